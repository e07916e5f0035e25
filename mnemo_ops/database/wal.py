"""Our WAL checkpoints run after our write transaction, not inside its COMMIT.

SQLite's automatic checkpoint (every 1,000 WAL pages, by default) runs in the connection that
commits, inside the ``COMMIT`` statement, after the write lock is released. A passive checkpoint
does not block the agent's writes, but it made our COMMIT return late: on a large home a write
transaction whose own work was short was reported over the bound (a `write-transaction-long`
warning), and the agent's share pause after it was sized from the inflated time. Turning the
automatic checkpoint off alone would be worse: the agent's next commit would then checkpoint our
pages.

So a writable connection of ours gets a WAL hook instead (a hook replaces SQLite's automatic
checkpoint on that connection). The hook only notes how many pages the WAL holds; `checkpoint_due`
runs the same passive checkpoint SQLite would have run, at the same threshold, once the caller
has measured its transaction (`transactions.write_batch`, `transactions.immediate_transaction`).
A commit made outside those two leaves its pages to the next one, to the agent's own automatic
checkpoint, or to the checkpoint SQLite runs when our connection closes.
"""

from __future__ import annotations

import weakref

import apsw

CHECKPOINT_PAGES = 1000
"""WAL pages after which a passive checkpoint runs: SQLite's own default (``wal_autocheckpoint``)."""

_pending: weakref.WeakKeyDictionary[apsw.Connection, int] = weakref.WeakKeyDictionary()


def defer_checkpoints(connection: apsw.Connection) -> None:
    """Replace the automatic checkpoint in `connection`'s COMMIT by `checkpoint_due` after it."""

    def note_pages(hooked: apsw.Connection, database_name: str, pages: int) -> int:
        _pending[hooked] = pages
        return apsw.SQLITE_OK

    _pending[connection] = 0
    connection.set_wal_hook(note_pages)


def pending_pages(connection: object) -> int:
    """WAL pages the last commit of `connection` left (0 for a connection without the hook)."""
    return _pending.get(connection, 0) if isinstance(connection, apsw.Connection) else 0


def checkpoint_due(connection: object) -> bool:
    """Run a passive checkpoint when the WAL holds `CHECKPOINT_PAGES` or more; True when it ran.

    Passive: it copies what no reader still needs and never waits for the agent; what it leaves
    is taken by a later checkpoint. When another connection is checkpointing at that moment
    (SQLITE_BUSY, returned at once), it does not run and the job goes on, as SQLite's automatic
    checkpoint does. Never called inside a transaction.
    """
    if pending_pages(connection) < CHECKPOINT_PAGES:
        return False
    assert isinstance(connection, apsw.Connection)
    if not connection.get_autocommit():
        return False
    try:
        connection.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
    except (apsw.BusyError, apsw.LockedError):
        # Another connection (the agent's automatic checkpoint) is checkpointing right now: that
        # one does the work, as SQLite's own automatic checkpoint assumes; ours waits for the next.
        return False
    _pending[connection] = 0
    return True
