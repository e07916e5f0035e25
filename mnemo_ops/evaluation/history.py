"""Eval history in state.db (table ``eval_history``, docs/architecture.md): one row per eval run.

The report reads it to show the trend. Created idempotently by whoever writes first.
"""

from __future__ import annotations

import json
from typing import Any

import sqlite_utils

from mnemo_ops.core.state import StateTable

TABLE = "eval_history"
STATUSES = ("ok", "regressed", "no-baseline")


HISTORY = StateTable(
    TABLE,
    {
        "id": int,
        "run_at": str,
        "suite": str,
        "suite_sha256": str,
        "engine": str,
        "k": int,
        "metrics_json": str,
        "regressions": int,
        "status": str,
    },
    pk="id",
    indexes=(("run_at",),),
)
"""``eval_history``: one row per eval run (created by whoever writes first)."""


def record(
    db: sqlite_utils.Database,
    *,
    run_at: str,
    suite: str,
    suite_sha256: str,
    engine: str,
    k: int,
    metrics: dict[str, float],
    regressions: int,
    status: str,
) -> int:
    """Append one history row; return its id."""
    if status not in STATUSES:
        raise ValueError(f"unknown eval status {status!r}")
    HISTORY.ensure(db)
    with db.conn:
        table = db[TABLE]
        table.insert(
            {
                "run_at": run_at,
                "suite": suite,
                "suite_sha256": suite_sha256,
                "engine": engine,
                "k": k,
                "metrics_json": json.dumps(metrics, sort_keys=True),
                "regressions": regressions,
                "status": status,
            }
        )
        return table.last_pk


def recent(db: sqlite_utils.Database | None, limit: int = 30) -> list[dict[str, Any]]:
    """The latest rows, newest first, with ``metrics`` decoded (empty when there is no history)."""
    if db is None or TABLE not in db.table_names():
        return []
    rows = []
    for row in db.query(f"SELECT * FROM {TABLE} ORDER BY id DESC LIMIT ?", [limit]):
        item = dict(row)
        item["metrics"] = json.loads(item.pop("metrics_json") or "{}")
        rows.append(item)
    return rows
