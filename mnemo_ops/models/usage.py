"""The model layer's records in state.db: calls and seconds per night (the budget), and valid answers.

``model_usage``: (night, model, job) -> calls, seconds, updated_at. A night runs from noon to noon,
local time (the date of "now minus 12 hours"), so an evening batch at 21:00 and a self-reflection at
23:00 share one night's budget, and a re-run at 01:00 still counts against it.

``model_answers``: key (sha256 of model, options and the whole prompt) -> model, task, answer (the
validated JSON), created_at. Only validated answers are kept; a prompt holds only redacted text, and
the key cannot be turned back into it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from mnemo_ops.core.state import StateTable
from mnemo_ops.foundation.clock import isoformat, local_now, utc_now

USAGE_TABLE = "model_usage"
ANSWERS_TABLE = "model_answers"


def night_of(moment: datetime | None = None) -> str:
    """The night (``YYYY-MM-DD`` of its evening) that local time `moment` belongs to."""
    return ((moment or local_now()) - timedelta(hours=12)).date().isoformat()


def used_tonight(state_db, night: str) -> tuple[int, float]:
    """(calls, seconds) recorded for `night`, all models and jobs together (0, 0 without a record)."""
    if state_db is None or USAGE_TABLE not in state_db.table_names():
        return 0, 0.0
    row = state_db.execute(
        f"SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(seconds), 0) FROM {USAGE_TABLE} "
        "WHERE night = ?",
        [night],
    ).fetchone()
    return int(row[0]), float(row[1])


USAGE = StateTable(
    USAGE_TABLE,
    {
        "night": str,
        "model": str,
        "job": str,
        "calls": int,
        "seconds": float,
        "updated_at": str,
    },
    pk=("night", "model", "job"),
)
"""Calls and seconds per night, model and job: the nightly budget."""


ANSWERS = StateTable(
    ANSWERS_TABLE,
    {"key": str, "model": str, "task": str, "answer": str, "created_at": str},
    pk="key",
)
"""Kept answers by request key, so a repeated request costs no second call."""


def create_tables(state_db) -> None:
    """Create the layer's tables (real runs only: dry runs never write state.db)."""
    for table in (USAGE, ANSWERS):
        table.ensure(state_db)


def record_call(state_db, night: str, model: str, job: str, seconds: float) -> None:
    """Count one call of `seconds` against `night`'s budget."""
    with state_db.conn:
        state_db.execute(
            f"INSERT INTO {USAGE_TABLE} (night, model, job, calls, seconds, updated_at) "
            "VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT (night, model, job) DO UPDATE SET "
            "calls = calls + 1, seconds = seconds + excluded.seconds, "
            "updated_at = excluded.updated_at",
            [night, model, job, round(seconds, 3), isoformat(utc_now())],
        )


def stored_answer(state_db, key: str) -> Any | None:
    """The validated answer kept for `key` (decoded JSON), or None."""
    if state_db is None or ANSWERS_TABLE not in state_db.table_names():
        return None
    row = state_db.execute(f"SELECT answer FROM {ANSWERS_TABLE} WHERE key = ?", [key]).fetchone()
    if row is None:
        return None
    try:
        return json.loads(row[0])
    except ValueError:
        return None


def store_answer(state_db, key: str, model: str, task: str, answer: Any) -> None:
    """Keep a validated answer (its JSON) under `key`."""
    with state_db.conn:
        state_db.execute(
            f"INSERT OR REPLACE INTO {ANSWERS_TABLE} (key, model, task, answer, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [key, model, task, json.dumps(answer, sort_keys=True), isoformat(utc_now())],
        )
