"""What the checkpoint tests share: a database made corrupt the way a failing disk does it."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def corrupt_an_index(db_path: Path, index: str = "idx_timestamp") -> None:
    """Overwrite the body of one index page (the database must have no WAL content)."""
    connection = sqlite3.connect(db_path)
    (root,) = connection.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = ?", (index,)
    ).fetchone()
    (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    with db_path.open("r+b") as handle:
        handle.seek((root - 1) * page_size + 8)
        handle.write(b"\xa5" * (page_size - 8))
