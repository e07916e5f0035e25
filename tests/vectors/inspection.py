"""Test tool: what a vector home's tables hold, read with sqlite-vec loaded into apsw.

The test process reads the memory database with apsw only (one SQLite library per process per
database); apsw can load the sqlite-vec extension, so vec0 tables are read as Mnemosyne reads them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import apsw
import sqlite_vec

LIVE = (
    "(superseded_by IS NULL OR superseded_by = '') "
    "AND (valid_until IS NULL OR valid_until = '' OR julianday(valid_until) > julianday('now', 'localtime'))"
)


def open_with_vectors(db_path: Path, readonly: bool = True) -> apsw.Connection:
    """An apsw connection to `db_path` with sqlite-vec loaded."""
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    connection = apsw.Connection(str(db_path), flags=flags)
    connection.enable_load_extension(True)
    connection.load_extension(sqlite_vec.loadable_path())
    connection.enable_load_extension(False)
    return connection


@dataclasses.dataclass
class VectorState:
    """Working rows, live and closed, and which of them have a vector in each store."""

    live: set[str]
    closed: set[str]
    embedded: set[str]
    """Working ids with a row in memory_embeddings (Mnemosyne's JSON fallback store)."""
    indexed: set[str]
    """Working ids whose rowid has a row in vec_working (the sqlite-vec table recall searches)."""
    orphan_vectors: int
    """vec_working rows whose rowid no working row has."""
    episodes: set[str]
    episodes_indexed: set[str]

    @property
    def live_without_vector(self) -> set[str]:
        """Live rows recall's vector voice cannot find."""
        return self.live - self.indexed

    @property
    def live_without_embedding(self) -> set[str]:
        """Live rows without Mnemosyne's stored embedding."""
        return self.live - self.embedded


def read_state(db_path: Path) -> VectorState:
    """The vector state of the database at `db_path`."""
    connection = open_with_vectors(db_path)
    try:

        def ids(sql: str) -> set[str]:
            return {str(row[0]) for row in connection.execute(sql)}

        tables = ids("SELECT name FROM sqlite_master WHERE type = 'table'")
        live = ids(f"SELECT id FROM working_memory WHERE {LIVE}")
        closed = ids(f"SELECT id FROM working_memory WHERE NOT ({LIVE})")
        embedded = ids("SELECT memory_id FROM memory_embeddings")
        indexed = ids("SELECT w.id FROM working_memory w JOIN vec_working v ON v.rowid = w.rowid")
        orphans = connection.execute(
            "SELECT count(*) FROM vec_working v WHERE NOT EXISTS "
            "(SELECT 1 FROM working_memory w WHERE w.rowid = v.rowid)"
        ).fetchone()[0]
        episodes = ids("SELECT id FROM episodic_memory") if "episodic_memory" in tables else set()
        episodes_indexed = (
            ids("SELECT e.id FROM episodic_memory e JOIN vec_episodes v ON v.rowid = e.rowid")
            if episodes
            else set()
        )
    finally:
        connection.close()
    return VectorState(live, closed, embedded, indexed, orphans, episodes, episodes_indexed)
