"""The guard's decisions in state.db (``guard_history``): the report's trend, and no blind retries.

One row per guarded run that was decided (ok, refused, not-retried), with the fingerprint of what was
tried: the job, the whole configuration, the Mnemosyne and mnemo-ops versions, and the live memories
(counts and newest row). A refused change is not tried again while its fingerprint stays the same.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import apsw

from mnemo_ops import __version__
from mnemo_ops.core.state import StateTable
from mnemo_ops.mnemosyne.api import mnemosyne_version

TABLE = "guard_history"
MEMORY_TABLES = ("working_memory", "episodic_memory")


def fingerprint(job: str, options: dict[str, Any], connection: apsw.Connection) -> str:
    """What the change depends on, hashed: retrying is pointless while none of it moved."""
    marks = {}
    for table in MEMORY_TABLES:
        marks[table] = list(
            connection.execute(
                f"SELECT count(*), max(rowid), max(timestamp) FROM {table}"
            ).fetchone()
        )
    material = {
        "job": job,
        "options": options,
        "mnemosyne": mnemosyne_version(),
        "mnemo_ops": __version__,
        "memories": marks,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


HISTORY = StateTable(
    TABLE,
    {
        "id": int,
        "job": str,
        "run_at": str,
        "verdict": str,
        "fingerprint": str,
        "profile": str,
        "figures_json": str,
    },
    pk="id",
    indexes=(("job", "run_at"),),
)
"""``guard_history``: one row per guarded run that was decided (created only in a real run)."""


def record(
    state_db,
    job: str,
    run_at: str,
    verdict: str,
    fingerprint_value: str,
    profile: str,
    figures: dict[str, Any],
) -> None:
    """Append one decision."""
    HISTORY.ensure(state_db)
    with state_db.conn:
        state_db[TABLE].insert(
            {
                "job": job,
                "run_at": run_at,
                "verdict": verdict,
                "fingerprint": fingerprint_value,
                "profile": profile,
                "figures_json": json.dumps(figures, sort_keys=True, default=str),
            }
        )


def latest(state_db, job: str) -> dict[str, Any] | None:
    """The newest decision for `job` (figures decoded), or None."""
    rows = recent(state_db, limit=1, job=job)
    return rows[0] if rows else None


def recent(state_db, limit: int = 7, job: str | None = None) -> list[dict[str, Any]]:
    """The newest decisions, newest first (optionally of one job), figures decoded."""
    if state_db is None or TABLE not in state_db.table_names():
        return []
    where, parameters = ("WHERE job = ?", [job]) if job else ("", [])
    rows = state_db.query(
        f"SELECT * FROM {TABLE} {where} ORDER BY id DESC LIMIT ?", [*parameters, limit]
    )
    decoded = []
    for row in rows:
        entry = dict(row)
        entry["figures"] = json.loads(entry.pop("figures_json") or "{}")
        decoded.append(entry)
    return decoded
