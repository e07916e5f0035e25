"""Summary repair: an episodic summary must never bury its sources in recall.

Mnemosyne 3.15's sleep (ours, and the auto-sleep the Hermes plugin leaves on) writes each summary at
tier 1, full weight, stamped with the time of the sleep. Recall's cross-tier dedup then drops every
working source its summary outscores, and the agent gets a 500-character cut of a long summary
instead of the turns that answer (upstream mnemosyne-oss/mnemosyne#506, #563, #564). The repair
gives every live summary that is stamped later than its newest live source (by more than
``STAMPED_LATER``: the mark of a sleep that stamped it with its own time) the configured tier
(``evening_batch.summary_tier``, 3 by default) and the newest timestamp among its sources. Mnemosyne
4.0 writes summaries that way itself, so there the repair finds nothing to do.

A summary dated within its sources' time is left alone whatever its tier: it has no recency edge
over them, and moving it down a tier can leave its facts unreachable when the sources themselves
score too low to be recalled (on realistic generated text the recall guard lost probes that way
and refused the batch).

The values a repair replaces are recorded in state.db (``summary_repairs``) before the row changes,
so `revert` can put them back; each batch is one short ``BEGIN IMMEDIATE`` transaction that checks
the row still holds the values it planned from.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.core.state import StateTable
from mnemo_ops.database import transactions
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now

TABLE = "summary_repairs"
BATCH_SIZE = 200
STAMPED_LATER = timedelta(hours=1)
"""A summary this much newer than its newest source was stamped by the sleep (3.15 stamps "now"; it
runs at least 84 h after the turns it consolidates), not dated by its sources."""


@dataclasses.dataclass(frozen=True)
class Repair:
    """One summary's planned change."""

    episodic_id: str
    tier_before: int | None
    timestamp_before: str | None
    tier_after: int
    timestamp_after: str


def _source_ids(summary_of: str | None) -> list[str]:
    return [part.strip() for part in (summary_of or "").split(",") if part.strip()]


def _stamped_later(timestamp: str | None, newest_source: str) -> bool:
    """True when the summary's time is past its newest source's by more than ``STAMPED_LATER``.

    A time that does not parse counts as stamped later: the repair then dates it by its sources.
    """
    try:
        summary_time = datetime.fromisoformat(timestamp or "")
        source_time = datetime.fromisoformat(newest_source)
        if (summary_time.tzinfo is None) != (source_time.tzinfo is None):
            summary_time, source_time = (
                summary_time.replace(tzinfo=None),
                source_time.replace(tzinfo=None),
            )
        return summary_time - source_time > STAMPED_LATER
    except (TypeError, ValueError):
        return True


def plan(connection: apsw.Connection, tier: int) -> list[Repair]:
    """Every live summary with live sources that a sleep stamped later than them (module docstring)."""
    now = local_timestamp()
    summaries = connection.execute(
        "SELECT id, tier, timestamp, summary_of FROM episodic_memory "
        f"WHERE coalesce(summary_of, '') != '' AND {database.live_condition()} ORDER BY id",
        (now,),
    ).fetchall()
    repairs = []
    for episodic_id, tier_before, timestamp_before, summary_of in summaries:
        sources = _source_ids(summary_of)
        newest, live = None, 0
        for start in range(0, len(sources), 500):
            chunk = sources[start : start + 500]
            marks = ",".join("?" * len(chunk))
            row = connection.execute(
                f"SELECT max(timestamp), sum(CASE WHEN {database.live_condition()} THEN 1 ELSE 0 END) "
                f"FROM working_memory WHERE id IN ({marks})",
                (now, *chunk),
            ).fetchone()
            if row[0] is not None and (newest is None or row[0] > newest):
                newest = row[0]
            live += int(row[1] or 0)
        if not live or newest is None:
            continue  # nothing of its sources left to bury
        if tier_before == tier and timestamp_before == newest:
            continue
        if not _stamped_later(timestamp_before, newest):
            continue  # dated by its sources already: no recency edge over them
        repairs.append(Repair(episodic_id, tier_before, timestamp_before, tier, newest))
    return repairs


REPAIRS = StateTable(
    TABLE,
    {
        "episodic_id": str,
        "db": str,
        "tier_before": int,
        "timestamp_before": str,
        "tier_after": int,
        "timestamp_after": str,
        "repaired_at": str,
        "reverted_at": str,
    },
    pk=("db", "episodic_id"),
)
"""``summary_repairs``: each summary's tier and timestamp before and after its repair (created only in a real run)."""


def apply(connection: apsw.Connection, state_db, db_name: str, repairs: list[Repair]) -> int:
    """Record the originals in state.db, then change the rows; return how many rows changed.

    A summary repaired before keeps its first recorded original (the value Mnemosyne wrote), so a
    revert always goes back to where mnemo-ops started.
    """
    REPAIRS.ensure(state_db)
    changed = 0
    for batch in transactions.batched(repairs, BATCH_SIZE):
        stamp = isoformat(utc_now())
        with state_db.conn:
            # A first repair records the original; a summary repaired again keeps it, unless that
            # record was reverted (then this repair starts a new one).
            state_db.conn.executemany(
                f"INSERT INTO {TABLE} (episodic_id, db, tier_before, timestamp_before, tier_after, "
                "timestamp_after, repaired_at, reverted_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL) "
                "ON CONFLICT (db, episodic_id) DO UPDATE SET tier_before = excluded.tier_before, "
                "timestamp_before = excluded.timestamp_before, tier_after = excluded.tier_after, "
                "timestamp_after = excluded.timestamp_after, repaired_at = excluded.repaired_at, "
                "reverted_at = NULL WHERE reverted_at IS NOT NULL",
                [
                    (
                        repair.episodic_id,
                        db_name,
                        repair.tier_before,
                        repair.timestamp_before,
                        repair.tier_after,
                        repair.timestamp_after,
                        stamp,
                    )
                    for repair in batch
                ],
            )
        changed += transactions.write_batch(
            connection, lambda conn, batch=batch: _update(conn, batch)
        )
    return changed


def _update(connection: apsw.Connection, batch: list[Repair]) -> int:
    changed = 0
    for repair in batch:
        connection.execute(
            "UPDATE episodic_memory SET tier = ?, timestamp = ? "
            "WHERE id = ? AND tier IS ? AND timestamp IS ?",
            (
                repair.tier_after,
                repair.timestamp_after,
                repair.episodic_id,
                repair.tier_before,
                repair.timestamp_before,
            ),
        )
        changed += connection.changes()
    return changed


def recorded(state_db, db_name: str, include_reverted: bool = False) -> list[dict[str, Any]]:
    """The repairs recorded for this database (newest first)."""
    if state_db is None or TABLE not in state_db.table_names():
        return []
    condition = "" if include_reverted else " AND reverted_at IS NULL"
    return [
        dict(row)
        for row in state_db.query(
            f"SELECT * FROM {TABLE} WHERE db = ?{condition} ORDER BY repaired_at DESC, episodic_id",
            [db_name],
        )
    ]


def revert(connection: apsw.Connection, state_db, db_name: str, dry_run: bool) -> dict[str, int]:
    """Put back the recorded originals of summaries that still hold the repaired values.

    A summary changed since (by Mnemosyne's own degradation, say) is left as it is and counted.
    """
    entries = recorded(state_db, db_name)
    reverted = skipped = 0
    for entry in entries:
        row = connection.execute(
            "SELECT tier, timestamp FROM episodic_memory WHERE id = ?", (entry["episodic_id"],)
        ).fetchone()
        if row is None or (row[0], row[1]) != (entry["tier_after"], entry["timestamp_after"]):
            skipped += 1
            continue
        reverted += 1
        if dry_run:
            continue
        transactions.write_statement(
            connection,
            "UPDATE episodic_memory SET tier = ?, timestamp = ? WHERE id = ? AND tier IS ? AND timestamp IS ?",
            (
                entry["tier_before"],
                entry["timestamp_before"],
                entry["episodic_id"],
                entry["tier_after"],
                entry["timestamp_after"],
            ),
        )
        with state_db.conn:
            state_db.execute(
                f"UPDATE {TABLE} SET reverted_at = ? WHERE db = ? AND episodic_id = ?",
                [isoformat(utc_now()), db_name, entry["episodic_id"]],
            )
    return {"reverted": reverted, "changed_since": skipped}
