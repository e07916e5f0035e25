"""Connections to the memory database (apsw), the Mnemosyne schema check, and write batches.

The live agent writes to the same file through its own connections, so every write transaction
starts with ``BEGIN IMMEDIATE`` (the write lock is taken up front, never upgraded mid-way), is kept
short, and is retried whole when SQLite reports the database busy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import apsw

from mnemo_ops.core.errors import DatabaseError

BUSY_TIMEOUT_MS = 5000
"""The same busy timeout Mnemosyne uses on its own connections."""

MNEMOSYNE_REQUIRED_TABLES = ("working_memory", "episodic_memory", "fts_working")
"""Tables every Mnemosyne database has: what tells it apart from any other SQLite file."""

MAIN_TABLES = (
    "working_memory", "episodic_memory", "canonical_facts", "graph_edges", "triples",
    "memory_embeddings",
)
"""The tables whose row counts status, backups and reports show."""

SQLITE_HEADER = b"SQLite format 3\x00"
T = TypeVar("T")


def check_database_file(path: Path) -> None:
    """Raise DatabaseError (exit 2, one line) unless `path` is an existing, readable SQLite file."""
    if not path.exists():
        raise DatabaseError(f"database not found: {path}")
    if not path.is_file():
        raise DatabaseError(f"not a regular file: {path}")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        raise DatabaseError(f"cannot read database {path}: {error.strerror}") from None
    if header != SQLITE_HEADER:
        raise DatabaseError(f"not an SQLite database: {path}")


def connect(path: Path, readonly: bool = False) -> apsw.Connection:
    """Open the memory database with the busy timeout set; read-only connections never write.

    A read-only connection neither checkpoints the WAL on close nor changes the file, which is what
    dry runs and read-only commands need.
    """
    check_database_file(path)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    try:
        connection = apsw.Connection(str(path), flags=flags | apsw.SQLITE_OPEN_URI)
        connection.set_busy_timeout(BUSY_TIMEOUT_MS)
        # Force the header to be read now so a damaged file fails here with a clear message.
        connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except apsw.NotADBError:
        raise DatabaseError(f"not an SQLite database (or damaged header): {path}") from None
    except apsw.Error as error:
        raise DatabaseError(f"cannot open database {path}: {error}") from None
    return connection


def table_names(connection: apsw.Connection) -> set[str]:
    """Names of all tables (and virtual tables) in the main schema."""
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def check_mnemosyne_schema(connection: apsw.Connection, path: Path) -> None:
    """Raise DatabaseError unless the database has Mnemosyne's core tables."""
    missing = [name for name in MNEMOSYNE_REQUIRED_TABLES if name not in table_names(connection)]
    if missing:
        raise DatabaseError(f"not a Mnemosyne database (no {', '.join(missing)} table): {path}")


def open_memory_db(path: Path, readonly: bool = False) -> apsw.Connection:
    """Open and schema-check a Mnemosyne database; raise DatabaseError with one line otherwise."""
    connection = connect(path, readonly=readonly)
    try:
        check_mnemosyne_schema(connection, path)
    except DatabaseError:
        connection.close()
        raise
    return connection


def copy_snapshot(source: Path, target: Path) -> None:
    """Copy the memory DB (with what its WAL holds) to a new file `target` inside one read snapshot.

    SQLite's backup API in a single step from a read-only connection: one read transaction, so the copy
    is consistent and the live writer is never blocked (WAL readers do not block writers). For private
    working copies (eval, dry-run consolidation); checkpoints use ``checkpoints.sqlite_copy``, which adds
    progress, row counts from the same snapshot and full-disk handling.
    """
    reader = open_memory_db(source, readonly=True)
    try:
        destination = apsw.Connection(str(target))
        try:
            with destination.backup("main", reader, "main") as backup:
                backup.step(-1)  # every page in one step: one consistent read snapshot
        finally:
            destination.close()
    finally:
        reader.close()


def row_counts(connection: apsw.Connection, tables: Iterable[str] = MAIN_TABLES) -> dict[str, int | None]:
    """Row counts of the given tables; None for a table this database does not have."""
    present = table_names(connection)
    counts: dict[str, int | None] = {}
    for table in tables:
        if table in present:
            counts[table] = connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        else:
            counts[table] = None
    return counts


def column_names(connection: apsw.Connection, table: str) -> list[str]:
    """Column names of `table` (empty when the table does not exist)."""
    return [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')]


@contextmanager
def immediate_transaction(connection: apsw.Connection) -> Iterator[apsw.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction: commit on success, roll back on any exception."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        if not connection.get_autocommit():
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def write_batch(
    connection: apsw.Connection,
    work: Callable[[apsw.Connection], T],
    attempts: int = 8,
    backoff_s: float = 0.05,
) -> T:
    """Run `work` inside one BEGIN IMMEDIATE transaction, retrying the whole batch on SQLITE_BUSY.

    `work` must be safe to repeat: it is called again from the start after a busy rollback.
    The busy timeout already waits up to 5 s per attempt, so a persistent lock means a real stall;
    after `attempts` tries the BusyError propagates.
    """
    for attempt in range(1, attempts + 1):
        try:
            with immediate_transaction(connection):
                return work(connection)
        except (apsw.BusyError, apsw.LockedError):
            if attempt == attempts:
                raise
            time.sleep(backoff_s * attempt)
    raise AssertionError("unreachable")


def batched(items: Iterable[T], size: int = 500) -> Iterator[list[T]]:
    """Yield lists of at most `size` items (the ~500-row write batches of DESIGN section 3)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def sqlite_version() -> str:
    """The SQLite library version apsw is linked with."""
    return apsw.sqlite_lib_version()


def fetch_dicts(connection: apsw.Connection, sql: str, bindings: Any = None) -> list[dict[str, Any]]:
    """Run a query and return rows as dicts keyed by column name."""
    cursor = connection.execute(sql, bindings) if bindings is not None else connection.execute(sql)
    try:
        names = [description[0] for description in cursor.get_description()]
    except apsw.ExecutionCompleteError:  # the statement produced no rows at all
        return []
    return [dict(zip(names, row)) for row in cursor]
