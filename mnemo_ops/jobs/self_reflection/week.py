"""Once per ISO week: the run ledger (``runs`` in state.db) says which week a run reflected on.

A successful real run records ``stats.reflection.week`` (``2026-W48``, of local time: the job runs on
Sunday evening, the last day of an ISO week) and ``stats.reflection.covered_until`` (the idle cut-off
it used). A later run in the same week changes nothing unless ``--force``; the next week's run takes
the sessions that became idle after the previous week's cut-off.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

JOB = "self-reflection"


def iso_week(moment: datetime) -> str:
    """``YYYY-Www`` of a (local) time."""
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def _reflection_runs(state_db) -> list[dict[str, Any]]:
    """Successful real runs that reflected (newest first), with their ``stats.reflection``."""
    if state_db is None or "runs" not in state_db.table_names():
        return []
    runs = []
    for row in state_db.execute(
        "SELECT id, started_at, result_json FROM runs WHERE job = ? AND status = 'ok' AND dry_run = 0 "
        "ORDER BY id DESC",
        [JOB],
    ).fetchall():
        try:
            stats = (json.loads(row[2] or "{}").get("stats") or {}).get("reflection") or {}
        except ValueError:
            continue
        if stats.get("week"):
            runs.append({"id": row[0], "started_at": row[1], **stats})
    return runs


def run_this_week(state_db, week: str) -> dict[str, Any] | None:
    """The latest successful run that reflected on `week`, or None."""
    return next((run for run in _reflection_runs(state_db) if run["week"] == week), None)


def covered_until_before(state_db, week: str) -> datetime | None:
    """The cut-off of the latest successful run of an earlier week (None: no such run)."""
    for run in _reflection_runs(state_db):
        if run["week"] < week and run.get("covered_until"):
            try:
                return datetime.fromisoformat(run["covered_until"])
            except ValueError:
                continue
    return None
