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
and retries after looking the key up again (``mnemosyne.writes.write_once``). No transaction is
left open between entries.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from mnemo_ops.database import BUSY_TIMEOUT_MS
from mnemo_ops.foundation.child_process import child_main, send_progress
from mnemo_ops.foundation.clock import local_timestamp
from mnemo_ops.jobs.memory_block_migrate.stored_rows import find_stored
from mnemo_ops.mnemosyne import writes
from mnemo_ops.mnemosyne.api import close_mnemosyne_connections, open_mnemosyne


def _store_one(memory: Any, connection: sqlite3.Connection, entry: dict[str, Any]) -> dict:
    key = entry["key"]

    def stored() -> Any:
        return find_stored(connection, local_timestamp(), only_key=key).get(key)

    writes.end_transactions(writes.mnemosyne_connections(memory))
    found, outcome = stored(), "already-stored"
    if found is None:
        written = writes.write_once(
            lambda: memory.remember(
                entry["content"],
                source=entry["source"],
                importance=entry["importance"],
                veracity=entry["veracity"],
                metadata=entry["metadata"],
                scope="global",
            ),
            lambda: writes.mnemosyne_connections(memory),
            find=stored,
        )
        # Found: an attempt that hit a lock error had stored it.
        found, outcome = written.found, "stored"
        if found is None:
            memory_id = written.value
            if memory_id is None:
                return {"key": key, "outcome": "filtered", "memory_id": None}
            found = stored()
            if found is None or found.memory_id != memory_id:
                # Mnemosyne merged the content into a row of this session that lacks our key: it
                # cannot happen with one session per run and distinct entries, and is reported if
                # it ever does.
                return {"key": key, "outcome": "merged", "memory_id": memory_id}
            return {"key": key, "outcome": "stored", "memory_id": memory_id}
    if not found.has_legacy_row:
        writes.repair_legacy_row(connection, found.memory_id)
    return {"key": key, "outcome": outcome, "memory_id": found.memory_id}


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
            writes.end_transactions(writes.mnemosyne_connections(memory))
        connection.close()
        close_mnemosyne_connections()
    return {"outcomes": outcomes}


if __name__ == "__main__":
    child_main(store)
