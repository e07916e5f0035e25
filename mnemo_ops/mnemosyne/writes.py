"""Writes through Mnemosyne's own API beside the live agent: once, retried while the database is locked.

Mnemosyne's ``remember`` (and ``CanonicalStore.remember``) run on Mnemosyne's own connections
(Python's sqlite3). The live agent may hold the write lock at an unlucky moment; its busy timeout
does not cover every case (a connection that holds a read snapshot gets SQLITE_BUSY at once when it
asks to write), so a write that fails with a lock error is rolled back and tried again after a
short pause.

Exactly once: a retry must never write twice. Mnemosyne 3.15's ``remember`` commits the
working_memory row (with the caller's idempotency key in its metadata) before its legacy
``memories`` row, in a second commit; a lock error on the second leaves the first in place. So
before each retry the caller's `find` looks the write up in the database (by that key), and a write
found there is not made again (4.0 writes an item in one transaction: there the lookup finds
nothing and the write is simply retried). The legacy row a found write may lack is the caller's to
repair (`repair_legacy_row`), since only it knows whether its lookup saw one.

No transaction is left open on Mnemosyne's connections between writes: Python's sqlite3 opens one
implicitly, and an open transaction holds a read snapshot, so once another connection commits, that
connection's next write fails at once with "database is locked" (SQLITE_BUSY_SNAPSHOT), which the
busy timeout does not cover. Before and after each write, whatever Mnemosyne left pending is
committed, as its own next commit would have done; after a lock error the attempt is rolled back.

Nothing here imports Mnemosyne: the writes are the caller's callables on objects it opened through
``api``, so this module may be imported anywhere, before the child's environment is set.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any

from mnemo_ops.database import transactions

LOCK_RETRY_ATTEMPTS = 8
"""Attempts of one write (the first included) before a lock error is raised."""
LOCK_RETRY_BACKOFF_S = 0.05
"""The pause after the n-th failed attempt is n times this."""


@dataclasses.dataclass(frozen=True)
class Written:
    """What `write_once` did: made the write, or found it already made by an earlier attempt."""

    value: Any = None
    """What the write returned (``Mnemosyne.remember``: the memory id, None when its write filter
    refused the content); None when the write was found."""
    found: Any = None
    """Not None when `find` found the write in the database before a retry (what it returned): an
    attempt that failed with a lock error had committed it, and it was not made again."""


def write_once(
    write: Callable[[], Any],
    connections: Callable[[], Iterable[sqlite3.Connection]],
    *,
    find: Callable[[], Any] | None,
    on_retry: Callable[[], None] | None = None,
    attempts: int = LOCK_RETRY_ATTEMPTS,
    backoff_s: float = LOCK_RETRY_BACKOFF_S,
) -> Written:
    """Run one Mnemosyne write, retrying while the database is locked, without ever writing twice.

    `connections()` are Mnemosyne's connections the write uses (``memory.conn`` and
    ``memory.beam.conn``, a ``CanonicalStore``'s ``conn``): before and after each attempt they are
    left without an open transaction; after a lock error they are rolled back. `find()` looks the
    write up in the database (by the caller's idempotency key, read fresh on the caller's own
    connection) and returns what it found, None when absent; it runs before each retry. Pass
    ``find=None`` only for a write that is idempotent by itself (``CanonicalStore.remember`` of the
    same body leaves the fact unchanged). `on_retry()` is called before each pause (a statistic).

    A lock error on the last attempt, and any other error at once, is raised (the attempt rolled
    back).
    """
    for attempt in range(1, attempts + 1):
        end_transactions(connections())
        if attempt > 1 and find is not None:
            found = find()
            if found is not None:
                return Written(found=found)
        try:
            value = write()
        except sqlite3.Error as error:
            end_transactions(connections(), rollback=True)
            if not transactions.is_busy_error(error) or attempt == attempts:
                raise
            if on_retry is not None:
                on_retry()
            time.sleep(backoff_s * attempt)
            continue
        end_transactions(connections())
        return Written(value=value)
    raise ValueError(f"write_once needs at least one attempt, not {attempts}")


def end_transactions(connections: Iterable[sqlite3.Connection], rollback: bool = False) -> None:
    """Leave no transaction open on `connections` (each one once, however often it is named):
    commit what is pending, or roll it back with `rollback` (the module docstring says why)."""
    for connection in {id(connection): connection for connection in connections}.values():
        if connection.in_transaction:
            if rollback:
                connection.rollback()
            else:
                connection.commit()


def mnemosyne_connections(memory: Any) -> list[sqlite3.Connection]:
    """The connections a ``Mnemosyne`` instance writes through: its legacy one and its BEAM one."""
    return [memory.conn, memory.beam.conn]


def repair_legacy_row(connection: Any, memory_id: str) -> None:
    """Write the legacy ``memories`` row of working_memory row `memory_id`, when it lacks one.

    ``Mnemosyne.remember`` (3.15) commits the working_memory row first and its legacy ``memories``
    row in a second commit; a kill or a lock error in between leaves the row without its legacy
    row (4.0 commits both at once). This is the row remember would have written (same id, content,
    fields), in its own short ``BEGIN IMMEDIATE`` transaction on `connection` (the caller's own).
    """
    transactions.write_statement(
        connection,
        "INSERT OR IGNORE INTO memories (id, content, source, timestamp, session_id, importance, "
        "metadata_json) SELECT id, content, source, timestamp, session_id, importance, metadata_json "
        "FROM working_memory WHERE id = ?",
        (memory_id,),
    )
