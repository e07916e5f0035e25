"""Private copies for a dry run: the sleep stages run for real on them, then they are removed.

The memory database is copied in one read snapshot (``database.snapshot``), state.db through
SQLite's backup API from a read-only connection, both into a new 0700 folder under the temporary
directory (never beside the database or in the state dir). Running the same code on copies is what
makes a dry run's counts exactly those of the real run, stage after stage.
"""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
import tempfile
from pathlib import Path

from mnemo_ops.database.snapshot import snapshot_database

PREFIX = "mnemo-ops-sleep-"


@dataclasses.dataclass
class Scratch:
    """The copies of one dry run."""

    folder: Path
    db_path: Path
    state_db_path: Path

    def remove(self) -> None:
        """Remove the copies (they hold the user's memories)."""
        shutil.rmtree(self.folder, ignore_errors=True)


def make(db_path: Path, state_db_path: Path) -> Scratch:
    """Copy the memory database and state.db (when it exists) into a new private folder."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX))
    try:
        copy = snapshot_database(db_path, folder / "data")
        state_copy = folder / "state" / "state.db"
        state_copy.parent.mkdir(mode=0o700)
        if state_db_path.exists():
            reader = sqlite3.connect(f"file:{state_db_path}?mode=ro", uri=True)
            writer = sqlite3.connect(state_copy)
            try:
                reader.backup(writer)
            finally:
                writer.close()
                reader.close()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Scratch(folder=folder, db_path=copy, state_db_path=state_copy)
