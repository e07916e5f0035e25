"""Generated rows written by SQL into a schema Mnemosyne created, for databases too large to write
through its API (benchmarks and scale tests).

Rows go straight into ``working_memory`` and ``episodic_memory`` (Mnemosyne's own FTS triggers index
them) through Python's sqlite3, the library Mnemosyne uses: run it where no apsw connection to the
file is open (docs/contracts.md, one SQLite library per process per database).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_COMMON_COLUMNS = (
    "id",
    "content",
    "source",
    "timestamp",
    "session_id",
    "importance",
    "metadata_json",
)
WORKING_COLUMNS = (*_COMMON_COLUMNS, "veracity", "memory_type", "consolidated_at")
"""The order of a working row's values."""
EPISODIC_COLUMNS = (*_COMMON_COLUMNS, "summary_of")
"""The order of an episodic summary's values."""

Batch = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]
"""One transaction's rows: (working rows, episodic summaries)."""


def _insert(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def append_rows(db_path: Path, batches: Iterable[Batch]) -> dict[str, int]:
    """Write each batch of `batches` in one transaction, then checkpoint the WAL; the counts written.

    `batches` may be a generator: each batch is made only when the one before is committed, so a
    million rows never sit in memory at once.
    """
    connection = sqlite3.connect(db_path)
    working = episodic = 0
    try:
        for memories, summaries in batches:
            with connection:
                connection.executemany(_insert("working_memory", WORKING_COLUMNS), memories)
                connection.executemany(_insert("episodic_memory", EPISODIC_COLUMNS), summaries)
            working += len(memories)
            episodic += len(summaries)
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return {"working": working, "episodic": episodic}
