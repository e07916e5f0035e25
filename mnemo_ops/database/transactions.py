"""Write transactions on the memory database: ``BEGIN IMMEDIATE``, short, retried whole on busy.

The live agent writes to the same file through its own connections, so every write transaction
takes the write lock up front (never upgraded mid-way), is kept short, and is retried from the start
when SQLite reports the database busy or locked. One implementation serves both SQLite libraries we
use: apsw (our own connections) and Python's sqlite3 (the library Mnemosyne uses, which bridge-drain
writes through while Mnemosyne has the file open).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import apsw

T = TypeVar("T")

ATTEMPTS = 8
BACKOFF_S = 0.05
"""Retry schedule: the busy timeout already waits up to 5 s per attempt; then 50 ms, 100 ms, ..."""


def is_busy_error(error: BaseException) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED (any extended code), from apsw or from Python's sqlite3."""
    if isinstance(error, (apsw.BusyError, apsw.LockedError)):
        return True
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)


def _in_transaction(connection: Any) -> bool:
    if isinstance(connection, apsw.Connection):
        return not connection.get_autocommit()
    return connection.in_transaction


@contextmanager
def immediate_transaction(connection: Any) -> Iterator[Any]:
    """One ``BEGIN IMMEDIATE`` transaction: commit on success, roll back on any exception.

    A Python sqlite3 connection must be in autocommit mode (``isolation_level=None``), so that the
    module never opens a transaction of its own around ours.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        if _in_transaction(connection):
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def write_batch(
    connection: Any,
    work: Callable[[Any], T],
    attempts: int = ATTEMPTS,
    backoff_s: float = BACKOFF_S,
) -> T:
    """Run `work(connection)` inside one BEGIN IMMEDIATE transaction, retrying it whole when busy.

    `work` must be safe to repeat: it is called again from the start after a busy rollback. After
    `attempts` tries the busy error propagates.
    """
    for attempt in range(1, attempts + 1):
        try:
            with immediate_transaction(connection):
                return work(connection)
        except (apsw.Error, sqlite3.Error) as error:
            if not is_busy_error(error) or attempt == attempts:
                raise
            time.sleep(backoff_s * attempt)
    raise AssertionError("unreachable")


def write_statement(connection: Any, sql: str, parameters: tuple = ()) -> None:
    """One statement in its own retried ``BEGIN IMMEDIATE`` transaction."""
    write_batch(connection, lambda conn: conn.execute(sql, parameters))


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
