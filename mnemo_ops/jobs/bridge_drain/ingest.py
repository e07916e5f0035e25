"""Storing bridge items through Mnemosyne's own ``Mnemosyne.remember``, exactly once.

Each item's idempotency key goes inside its row's ``metadata_json`` (``_bridge.key``): remember commits
the row and its metadata in one statement, so the key is stored atomically with the row, and before
each insert the key is looked up. Two outcomes of remember are not a new row:
- Mnemosyne's write filter (``MNEMOSYNE_IGNORE_PATTERNS``, ``MNEMOSYNE_WRITE_CLASSIFIER=strict``)
  returns None: the item is rejected with the filter's reason.
- Mnemosyne deduplicates exact content within a session: remember refreshes the existing row and
  returns its id. The item is "merged"; its key cannot live in that row, so it is kept in state.db
  (``bridge_keys``).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.state import StateTable
from mnemo_ops.database import transactions
from mnemo_ops.jobs.bridge_drain.items import BRIDGE_METADATA_KEY, Item
from mnemo_ops.mnemosyne import writes
from mnemo_ops.mnemosyne.api import close_mnemosyne_connections, open_mnemosyne

KEYS_TABLE = "bridge_keys"


@dataclasses.dataclass
class KnownRow:
    """A memory row that already carries a bridge key."""

    memory_id: str
    memory_type: str | None
    has_legacy_row: bool = True


def keys_in_database(
    connection: apsw.Connection | sqlite3.Connection, only_key: str | None = None
) -> dict[str, KnownRow]:
    """Every idempotency key stored with a working_memory row (the truth for exactly-once).

    One scan per run (the LIKE prefilter keeps json_extract off the rows that cannot match); the
    writer lock guarantees no other drain adds keys meanwhile, and the live agent never writes them.
    With `only_key`, the prefilter narrows to that key (a recheck before retrying one item).
    """
    legacy = "memories" in database.table_names(connection)
    # Mnemosyne stores metadata with json.dumps, so the key appears JSON-encoded in the text.
    needle = BRIDGE_METADATA_KEY if only_key is None else json.dumps(only_key)[1:-1]
    pattern = f'%"{_like_escape(needle)}"%'
    rows = connection.execute(
        "SELECT w.id, w.memory_type, json_extract(w.metadata_json, '$.\"' || ?1 || '\".key'), "
        + ("EXISTS (SELECT 1 FROM memories AS m WHERE m.id = w.id) " if legacy else "1 ")
        + "FROM working_memory AS w WHERE w.metadata_json LIKE ?2 ESCAPE '\\' AND json_valid(w.metadata_json)",
        (BRIDGE_METADATA_KEY, pattern),
    ).fetchall()  # exhausted at once: no statement (and no read snapshot) stays open
    return {
        key: KnownRow(memory_id, memory_type, bool(has_legacy))
        for memory_id, memory_type, key, has_legacy in rows
        if isinstance(key, str) and (only_key is None or key == only_key)
    }


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def first_row(cursor) -> tuple | None:
    """The first row of a query, with the cursor exhausted so it holds no read snapshot open."""
    rows = cursor.fetchall()
    return rows[0] if rows else None


def merged_keys_in_state(state_db) -> set[str]:
    """Keys of items whose content Mnemosyne merged into an existing row (recorded in state.db)."""
    if state_db is None or KEYS_TABLE not in state_db.table_names():
        return set()
    return {
        row["key"]
        for row in state_db.query(f"SELECT key FROM {KEYS_TABLE} WHERE outcome = 'merged'")
    }


KEYS = StateTable(
    KEYS_TABLE,
    {
        "key": str,
        "memory_id": str,
        "session_id": str,
        "outcome": str,
        "file": str,
        "position": int,
        "ingested_at": str,
    },
    pk="key",
)
"""Every ingested item's key and its outcome (ingested, merged or filtered), in state.db."""


class Ingestor:
    """Writes items through Mnemosyne (one instance per session: Mnemosyne binds the session at creation).

    Coexisting with the live agent (see ``mnemosyne_api``): the instances are opened without
    Mnemosyne's schema initialisation when the schema is already current, since that initialisation
    changes the schema every time and a schema change beside the agent's writes leaves the agent's
    connection failing with "database is locked". No connection of ours keeps a transaction open
    between items, and an item whose write hits a lock error is retried after its key is looked up
    again in the database (so a retry never duplicates).
    """

    def __init__(self, ctx: JobContext, connection: sqlite3.Connection, schema_gaps: list[str]):
        self.ctx = ctx
        self.connection = connection  # Python's sqlite3, the library Mnemosyne uses (see run())
        self._instances: dict[str, Any] = {}
        self.schema_gaps = schema_gaps
        if self.schema_gaps:
            ctx.warn(
                "bridge-schema-migration",
                "the database schema is older than the installed Mnemosyne "
                f"({'; '.join(self.schema_gaps[:3])}); Mnemosyne migrates it while opening",
                severity="info",
            )

    def _memory(self, session_id: str):
        if session_id not in self._instances:
            self._instances[session_id] = open_mnemosyne(
                self.ctx.settings.db_path,
                session_id=session_id,
                hermes_home=self.ctx.settings.hermes_home,
                initialise=bool(self.schema_gaps),
            )
        return self._instances[session_id]

    def _mnemosyne_connections(self) -> list:
        connections = []
        for memory in self._instances.values():
            for connection in (memory.conn, memory.beam.conn):
                if all(connection is not known for known in connections):
                    connections.append(connection)
        return connections

    def end_transactions(self) -> None:
        """Leave no transaction open on Mnemosyne's connections: commit whatever Mnemosyne left
        pending, as its own next commit would have done (``mnemosyne.writes`` says why)."""
        writes.end_transactions(self._mnemosyne_connections())

    def remember(self, item: Item, file_name: str) -> tuple[str, str | None]:
        """Store one item; return (outcome, memory id) with outcome ingested | merged | filtered.

        Through ``mnemosyne.writes.write_once``: a lock error (the live agent holds the write lock
        at an unlucky moment) rolls the attempt back; before trying again the item's key is looked
        up in the database, because remember (Mnemosyne 3.15) commits the working_memory row before
        its other writes: a row already there is this item's, so the item counts as ingested and
        only its legacy row is repaired when missing. (4.0's remember writes an item in one
        transaction; the lookup then finds nothing.)
        """
        memory = self._memory(item.session_id)
        written = writes.write_once(
            lambda: memory.remember(
                item.content,
                source=item.source,
                importance=item.importance,
                veracity=item.veracity,
                metadata=item.row_metadata(file_name),
            ),
            self._mnemosyne_connections,
            find=lambda: self.stored_row(item.idempotency_key),
            on_retry=lambda: self._note("lock_retries"),
        )
        memory_id = written.value
        if written.found is not None:
            self._note("lock_retries_found_stored")
            if not written.found.has_legacy_row:
                self.repair_legacy_row(written.found.memory_id)
            memory_id = written.found.memory_id
        if memory_id is None:
            return "filtered", None
        stored = first_row(
            self.connection.execute(
                "SELECT json_extract(metadata_json, '$.\"' || ? || '\".key') FROM working_memory "
                "WHERE id = ? AND json_valid(metadata_json)",
                (BRIDGE_METADATA_KEY, memory_id),
            )
        )
        outcome = "ingested" if stored and stored[0] == item.idempotency_key else "merged"
        if outcome == "ingested" and item.memory_type:
            self.set_memory_type(memory_id, item.memory_type)
        return outcome, memory_id

    def _note(self, name: str) -> None:
        """A statistic, not a write count: how often the live agent's lock made us retry."""
        self.ctx.result.stats[name] = self.ctx.result.stats.get(name, 0) + 1

    def stored_row(self, key: str) -> KnownRow | None:
        """The working_memory row carrying `key`, read fresh from the database (None when absent)."""
        return keys_in_database(self.connection, key).get(key)

    def close(self) -> None:
        """Close Mnemosyne's connections (the instances are unusable afterwards)."""
        self.end_transactions()
        self._instances.clear()
        close_mnemosyne_connections()

    def repair_legacy_row(self, memory_id: str) -> None:
        """Write the legacy ``memories`` row of a row whose drain was killed (or hit a lock error)
        inside remember, between its two commits (``mnemosyne.writes.repair_legacy_row``)."""
        writes.repair_legacy_row(self.connection, memory_id)

    def set_memory_type(self, memory_id: str, memory_type: str) -> None:
        """Apply the producer's memory_type over Mnemosyne's own classification (remember has no such
        parameter). Also run for an already-present key, which repairs a run killed just before it."""
        transactions.write_statement(
            self.connection,
            "UPDATE working_memory SET memory_type = ? WHERE id = ? AND memory_type IS NOT ?",
            (memory_type, memory_id, memory_type),
        )


def open_ingest_connection(path) -> sqlite3.Connection:
    """Our connection for the ingest phase: Python's sqlite3 (the SQLite library Mnemosyne uses),
    autocommit, explicit ``BEGIN IMMEDIATE`` for writes, the same 5 s busy timeout."""
    return sqlite3.connect(str(path), timeout=database.BUSY_TIMEOUT_MS / 1000, isolation_level=None)


def content_exists(connection: apsw.Connection, session_id: str, content: str) -> bool:
    """Mnemosyne's own dedup rule (``BeamMemory._find_duplicate``): same session, same content."""
    return (
        first_row(
            connection.execute(
                "SELECT 1 FROM working_memory WHERE session_id = ? AND content = ? LIMIT 1",
                (session_id, content),
            )
        )
        is not None
    )
