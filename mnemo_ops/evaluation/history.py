"""Eval history in state.db (table ``eval_history``, docs/contracts.md): one row per eval run.

The report reads it to show the trend and the week's largest category of misses (``misses_json``:
per category, the cases and those missed; why they were missed is ``mnemo-ops eval explain``'s to
say, since explaining costs several recalls a case). Created idempotently by whoever writes first;
a table from before ``misses_json`` gains the column on the next write.
"""

from __future__ import annotations

import json
from typing import Any

import sqlite_utils

from mnemo_ops.core.state import StateTable
from mnemo_ops.evaluation.evaluate import Evaluation

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
        "misses_json": str,
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
    misses: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Append one history row (`misses`: `misses_by_category`); return its id."""
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
                "misses_json": json.dumps(misses or {}, sort_keys=True),
            },
            alter=True,  # a table made before misses_json gains the column
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
        item["misses"] = json.loads(item.pop("misses_json", None) or "{}")
        rows.append(item)
    return rows


MISSED_IDS_KEPT = 10
"""Missed case ids kept per category and run (the report names a few; ``eval explain`` has all)."""


def misses_by_category(evaluation: Evaluation) -> dict[str, dict[str, Any]]:
    """Per category (``uncategorized`` for cases without one): how many cases, how many missed
    (nothing relevant within the case's k) and the first missed case ids."""
    table: dict[str, dict[str, Any]] = {}
    for outcome in evaluation.outcomes:
        row = table.setdefault(
            outcome.case.category or "uncategorized", {"cases": 0, "missed": 0, "examples": []}
        )
        row["cases"] += 1
        if not outcome.score.passed:
            row["missed"] += 1
            if len(row["examples"]) < MISSED_IDS_KEPT:
                row["examples"].append(outcome.case.id)
    return dict(sorted(table.items()))
