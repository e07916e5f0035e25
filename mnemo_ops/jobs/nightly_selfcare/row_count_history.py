"""Daily row counts of the memory tables, kept in state.db so the report can show growth per table.

nightly-selfcare records one row per (UTC day, table); a second run the same day updates that day's
numbers. Table ``row_count_history``: day (YYYY-MM-DD), table_name, row_count, recorded_at.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import sqlite_utils

from mnemo_ops.core.state import StateTable

TABLE = "row_count_history"


HISTORY = StateTable(
    TABLE,
    {"day": str, "table_name": str, "row_count": int, "recorded_at": str},
    pk=("day", "table_name"),
)
"""One row per day and table; created only in a real run (the caller decides)."""


def stored_counts(db: sqlite_utils.Database | None, day: date) -> dict[str, int]:
    """The counts recorded for exactly `day` ({} when none)."""
    if db is None or TABLE not in db.table_names():
        return {}
    return {
        row["table_name"]: row["row_count"]
        for row in db.query(
            f"SELECT table_name, row_count FROM {TABLE} WHERE day = ?", [day.isoformat()]
        )
    }


def changed_counts(
    db: sqlite_utils.Database | None, day: date, counts: dict[str, int | None]
) -> dict[str, int]:
    """The counts that differ from what is stored for `day` (what a record would write)."""
    stored = stored_counts(db, day)
    return {
        table: count
        for table, count in counts.items()
        if count is not None and stored.get(table) != count
    }


def record(db: sqlite_utils.Database, day: date, counts: dict[str, int], recorded_at: str) -> None:
    """Upsert the given counts for `day` in one transaction."""
    HISTORY.ensure(db)
    with db.conn:
        db[TABLE].upsert_all(
            [
                {
                    "day": day.isoformat(),
                    "table_name": table,
                    "row_count": count,
                    "recorded_at": recorded_at,
                }
                for table, count in counts.items()
            ],
            pk=("day", "table_name"),
        )


def counts_on_or_before(
    db: sqlite_utils.Database | None, day: date
) -> tuple[str | None, dict[str, int]]:
    """(the latest recorded day at or before `day`, its counts); (None, {}) when there is none."""
    if db is None or TABLE not in db.table_names():
        return None, {}
    row = db.execute(f"SELECT max(day) FROM {TABLE} WHERE day <= ?", [day.isoformat()]).fetchone()
    if not row or row[0] is None:
        return None, {}
    found = date.fromisoformat(row[0])
    return row[0], stored_counts(db, found)


def latest(db: sqlite_utils.Database | None) -> tuple[str | None, dict[str, Any]]:
    """The most recent recorded day and its counts."""
    return counts_on_or_before(db, date.max)
