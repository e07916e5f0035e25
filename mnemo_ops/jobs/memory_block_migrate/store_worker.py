"""Child process: store block entries through Mnemosyne's own ``remember``, exactly once.

Run by ``store.store_entries`` through ``foundation.child_process`` (everything Mnemosyne prints goes
to stderr): a progress message ``{"stored": ...}`` after each entry, then the result
``{"outcomes": [...]}``. The worker dies with the job that started it (a kill -9 of the job
included), so an orphan never races the next run on the same keys.

Why a child process: Mnemosyne opens the database with Python's sqlite3 while the job's own
connections are apsw (another SQLite library); two libraries with one database open in one process
drop each other's POSIX locks (docs/contracts.md). This process touches the database through
Python's sqlite3 only.

Exactly once: before each remember the entry's key is looked up; remember commits the row and its
metadata (with the key) in one statement. Mnemosyne writes the legacy ``memories`` row in a second
commit, so a row whose legacy row is missing (a kill fell between the two) gets it repaired, the row
remember would have written. A lock error (the live agent's write at an unlucky moment) rolls back
and retries after looking the key up again. No transaction is left open between entries.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

from mnemo_ops.database import BUSY_TIMEOUT_MS, transactions
from mnemo_ops.foundation.child_process import child_main, send_progress
from mnemo_ops.foundation.clock import local_timestamp
from mnemo_ops.jobs.memory_block_migrate.stored_rows import find_stored
from mnemo_ops.mnemosyne.api import close_mnemosyne_connections, open_mnemosyne

LOCK_RETRY_ATTEMPTS = 8
LOCK_RETRY_BACKOFF_S = 0.05


def _end_transactions(memory: Any, rollback: bool = False) -> None:
    """Leave no transaction open on Mnemosyne's connections (a held snapshot makes the next write
    fail at once with "database is locked" once another connection committed)."""
    for connection in {id(c): c for c in (memory.conn, memory.beam.conn)}.values():
        if connection.in_transaction:
            if rollback:
                connection.rollback()
            else:
                connection.commit()


def _repair_legacy_row(connection: sqlite3.Connection, memory_id: str) -> None:
    transactions.write_statement(
        connection,
        "INSERT OR IGNORE INTO memories (id, content, source, timestamp, session_id, importance, "
        "metadata_json) SELECT id, content, source, timestamp, session_id, importance, metadata_json "
        "FROM working_memory WHERE id = ?",
        (memory_id,),
    )


def _store_one(memory: Any, connection: sqlite3.Connection, entry: dict[str, Any]) -> dict:
    key = entry["key"]
    for attempt in range(1, LOCK_RETRY_ATTEMPTS + 1):
        _end_transactions(memory)
        stored = find_stored(connection, local_timestamp(), only_key=key).get(key)
        if stored is not None:
            if not stored.has_legacy_row:
                _repair_legacy_row(connection, stored.memory_id)
            outcome = "stored" if attempt > 1 else "already-stored"
            return {"key": key, "outcome": outcome, "memory_id": stored.memory_id}
        try:
            memory_id = memory.remember(
                entry["content"],
                source=entry["source"],
                importance=entry["importance"],
                veracity=entry["veracity"],
                metadata=entry["metadata"],
                scope="global",
            )
            break
        except sqlite3.Error as error:
            _end_transactions(memory, rollback=True)
            if not transactions.is_busy_error(error) or attempt == LOCK_RETRY_ATTEMPTS:
                raise
            time.sleep(LOCK_RETRY_BACKOFF_S * attempt)
    _end_transactions(memory)
    if memory_id is None:
        return {"key": key, "outcome": "filtered", "memory_id": None}
    stored = find_stored(connection, local_timestamp(), only_key=key).get(key)
    if stored is None or stored.memory_id != memory_id:
        # Mnemosyne merged the content into a row of this session that lacks our key: it cannot
        # happen with one session per run and distinct entries, and is reported if it ever does.
        return {"key": key, "outcome": "merged", "memory_id": memory_id}
    return {"key": key, "outcome": "stored", "memory_id": memory_id}


def store(request: dict[str, Any]) -> dict[str, Any]:
    """Store every entry of the request; return each entry's outcome and memory id."""
    db_path = Path(request["db_path"])
    memory = open_mnemosyne(
        db_path,
        session_id=request["session_id"],
        hermes_home=Path(request["hermes_home"]) if request.get("hermes_home") else None,
        initialise=bool(request.get("initialise")),
    )
    connection = sqlite3.connect(str(db_path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    outcomes = []
    try:
        for entry in request["entries"]:
            outcome = _store_one(memory, connection, entry)
            outcomes.append(outcome)
            send_progress({"stored": outcome})
    finally:
        with contextlib.suppress(sqlite3.Error):
            _end_transactions(memory)
        connection.close()
        close_mnemosyne_connections()
    return {"outcomes": outcomes}


if __name__ == "__main__":
    child_main(store)
