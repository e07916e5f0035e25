"""bridge-drain: ingest captured items from the Maildir-style spool into Mnemosyne, exactly once.

Each item is written through Mnemosyne's own ``Mnemosyne.remember`` (so the row, its FTS entry, the
legacy ``memories`` row, triples, graph and whatever else remember maintains are exactly Mnemosyne's),
with the item's idempotency key inside the row's ``metadata_json`` (``_bridge.key``). remember commits
the row and its metadata in one statement, so the key is stored atomically with the row; before each
insert the key is looked up, so a run killed between an insert and the file move never duplicates,
and a re-delivered file is a no-op.

Two outcomes of remember are not a new row, and are reported as such:
- Mnemosyne's write filter (``MNEMOSYNE_IGNORE_PATTERNS``, ``MNEMOSYNE_WRITE_CLASSIFIER=strict``)
  returns None: the item goes to ``failed/`` with the filter's reason (nothing is lost).
- Mnemosyne deduplicates exact content within a session: remember refreshes the existing row
  (importance, timestamp, veracity) and returns its id. The item is counted as ``items_merged``; its
  key cannot live in that row (remember does not touch its metadata), so it is kept in state.db
  (``bridge_keys``), which the drain also consults.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from typing import Any

import apsw

from mnemo_ops.bridge.items import (
    BRIDGE_METADATA_KEY, DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_ITEM_BYTES, DEFAULT_SESSION, FileRejected, Item,
    RejectedItem, parse_file,
)
from mnemo_ops.bridge.spool import Spool
from mnemo_ops.core import database
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.errors import MnemoOpsError
from mnemo_ops.core.mnemosyne_api import close_mnemosyne_connections, live_schema_gaps, open_mnemosyne
from mnemo_ops.core.results import JobResult, isoformat, utc_now

COUNTS = ("files_drained", "items_ingested", "items_merged", "duplicates_skipped", "items_rejected",
          "files_rejected")
"""Every count is always present in ``changes`` (zero when nothing happened)."""

KEYS_TABLE = "bridge_keys"
REJECTION_WARNINGS_SHOWN = 20  # one warning per problem, then a summary line
LOCK_RETRY_ATTEMPTS = 8
DEFAULT_AGENT_SHARE = 0.5
MAX_AGENT_SHARE = 0.9
LOCK_RETRY_BACKOFF_S = 0.05


@dataclasses.dataclass(frozen=True)
class Limits:
    """The caps and defaults from the ``bridge_drain`` config section."""

    max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    default_session: str = DEFAULT_SESSION
    agent_share: float = DEFAULT_AGENT_SHARE

    @classmethod
    def from_settings(cls, settings) -> "Limits":
        """Read the limits from settings (``bridge_drain.*``), defaults where unset."""
        return cls(
            max_item_bytes=settings.option("bridge_drain.max_item_bytes", DEFAULT_MAX_ITEM_BYTES),
            max_file_bytes=settings.option("bridge_drain.max_file_bytes", DEFAULT_MAX_FILE_BYTES),
            default_session=settings.option("bridge_drain.default_session", DEFAULT_SESSION),
            agent_share=settings.option("bridge_drain.agent_share", DEFAULT_AGENT_SHARE),
        )

    def pause_after(self, busy_s: float) -> float:
        """How long to pause after an item whose writes took `busy_s`, so the live agent gets its share.

        Each remember is a dozen short write transactions back to back; a waiting agent polls the lock
        at growing intervals (SQLite's busy handler), so without free stretches it can wait out its
        5 s timeout, and Mnemosyne leaves its connection failing from then on.
        """
        share = min(self.agent_share, MAX_AGENT_SHARE)
        return busy_s * share / (1 - share)


@dataclasses.dataclass
class KnownRow:
    """A memory row that already carries a bridge key."""

    memory_id: str
    memory_type: str | None
    has_legacy_row: bool = True


def keys_in_database(connection: apsw.Connection | sqlite3.Connection,
                     only_key: str | None = None) -> dict[str, KnownRow]:
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
    return {key: KnownRow(memory_id, memory_type, bool(has_legacy))
            for memory_id, memory_type, key, has_legacy in rows
            if isinstance(key, str) and (only_key is None or key == only_key)}


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def first_row(cursor) -> tuple | None:
    """The first row of a query, with the cursor exhausted so it holds no read snapshot open."""
    rows = cursor.fetchall()
    return rows[0] if rows else None


def is_lock_error(error: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED (any extended code), as raised by Python's sqlite3."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)


def merged_keys_in_state(state_db) -> set[str]:
    """Keys of items whose content Mnemosyne merged into an existing row (recorded in state.db)."""
    if state_db is None or KEYS_TABLE not in state_db.table_names():
        return set()
    return {row["key"] for row in state_db.query(f"SELECT key FROM {KEYS_TABLE} WHERE outcome = 'merged'")}


def _create_keys_table(state_db) -> None:
    state_db[KEYS_TABLE].create({
        "key": str, "memory_id": str, "session_id": str, "outcome": str, "file": str, "position": int,
        "ingested_at": str,
    }, pk="key", if_not_exists=True)


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
            ctx.warn("bridge-schema-migration",
                     "the database schema is older than the installed Mnemosyne "
                     f"({'; '.join(self.schema_gaps[:3])}); Mnemosyne migrates it while opening",
                     severity="info")

    def _memory(self, session_id: str):
        if session_id not in self._instances:
            self._instances[session_id] = open_mnemosyne(
                self.ctx.settings.db_path, session_id=session_id, hermes_home=self.ctx.settings.hermes_home,
                initialise=bool(self.schema_gaps))
        return self._instances[session_id]

    def _mnemosyne_connections(self) -> list:
        connections = []
        for memory in self._instances.values():
            for connection in (memory.conn, memory.beam.conn):
                if all(connection is not known for known in connections):
                    connections.append(connection)
        return connections

    def end_transactions(self, rollback: bool = False) -> None:
        """Leave no transaction open on Mnemosyne's connections (Python's sqlite3 opens one implicitly).

        A transaction left open holds a read snapshot; once another connection commits, that
        connection's next write fails at once with "database is locked" (SQLITE_BUSY_SNAPSHOT),
        which the busy timeout does not cover. After a lock error the attempt is rolled back (the
        retry starts from a key lookup); otherwise whatever Mnemosyne left pending is committed, as
        its own next commit would have done.
        """
        for connection in self._mnemosyne_connections():
            if connection.in_transaction:
                if rollback:
                    connection.rollback()
                else:
                    connection.commit()

    def remember(self, item: Item, file_name: str) -> tuple[str, str | None]:
        """Store one item; return (outcome, memory id) with outcome ingested | merged | filtered.

        A lock error (the live agent holds the write lock at an unlucky moment) rolls the attempt
        back; before trying again the item's key is looked up in the database, because remember
        commits the working_memory row before its other writes: a row already there is this item's,
        so the item counts as ingested and only its legacy row is repaired when missing.
        """
        memory = self._memory(item.session_id)
        for attempt in range(1, LOCK_RETRY_ATTEMPTS + 1):
            self.end_transactions()
            if attempt > 1:
                stored = self.stored_row(item.idempotency_key)
                if stored is not None:
                    self._note("lock_retries_found_stored")
                    if not stored.has_legacy_row:
                        self.repair_legacy_row(stored.memory_id)
                    memory_id = stored.memory_id
                    break
            try:
                memory_id = memory.remember(
                    item.content, source=item.source, importance=item.importance, veracity=item.veracity,
                    metadata=item.row_metadata(file_name),
                )
                break
            except sqlite3.Error as error:
                self.end_transactions(rollback=True)
                if not is_lock_error(error) or attempt == LOCK_RETRY_ATTEMPTS:
                    raise
                self._note("lock_retries")
                time.sleep(LOCK_RETRY_BACKOFF_S * attempt)
        self.end_transactions()
        if memory_id is None:
            return "filtered", None
        stored = first_row(self.connection.execute(
            "SELECT json_extract(metadata_json, '$.\"' || ? || '\".key') FROM working_memory "
            "WHERE id = ? AND json_valid(metadata_json)", (BRIDGE_METADATA_KEY, memory_id)))
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
        """Write the legacy ``memories`` row of a row whose drain was killed inside remember.

        ``Mnemosyne.remember`` commits the working_memory row (with our key) first and its legacy
        ``memories`` row in a second commit; a kill in between leaves the key present and the legacy
        row missing. This is the row remember would have written (same id, content, fields).
        """
        write_now(self.connection,
                  "INSERT OR IGNORE INTO memories (id, content, source, timestamp, session_id, importance, "
                  "metadata_json) SELECT id, content, source, timestamp, session_id, importance, metadata_json "
                  "FROM working_memory WHERE id = ?", (memory_id,))

    def set_memory_type(self, memory_id: str, memory_type: str) -> None:
        """Apply the producer's memory_type over Mnemosyne's own classification (remember has no such
        parameter). Also run for an already-present key, which repairs a run killed just before it."""
        write_now(self.connection,
                  "UPDATE working_memory SET memory_type = ? WHERE id = ? AND memory_type IS NOT ?",
                  (memory_type, memory_id, memory_type))


def open_ingest_connection(path) -> sqlite3.Connection:
    """Our connection for the ingest phase: Python's sqlite3 (the SQLite library Mnemosyne uses),
    autocommit, explicit ``BEGIN IMMEDIATE`` for writes, the same 5 s busy timeout."""
    return sqlite3.connect(str(path), timeout=database.BUSY_TIMEOUT_MS / 1000, isolation_level=None)


def write_now(connection: sqlite3.Connection, sql: str, parameters: tuple,
              attempts: int = LOCK_RETRY_ATTEMPTS) -> None:
    """One statement in its own ``BEGIN IMMEDIATE`` transaction, retried on a lock error
    (``database.write_batch`` for a Python sqlite3 connection)."""
    for attempt in range(1, attempts + 1):
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(sql, parameters)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            return
        except sqlite3.OperationalError as error:
            if not is_lock_error(error) or attempt == attempts:
                raise
            time.sleep(LOCK_RETRY_BACKOFF_S * attempt)


def filter_reason(content: str) -> str | None:
    """Why Mnemosyne's write filter would refuse `content` (None when it would write it).

    ``mnemosyne.core.filters`` is pure (no database, no files), so dry runs use it too.
    """
    from mnemosyne.core.filters import should_remember

    allowed, decision = should_remember(content)
    return None if allowed else (decision.reason or "rejected")


def _content_exists(connection: apsw.Connection, session_id: str, content: str) -> bool:
    """Mnemosyne's own dedup rule (``BeamMemory._find_duplicate``): same session, same content."""
    return first_row(connection.execute("SELECT 1 FROM working_memory WHERE session_id = ? AND content = ? LIMIT 1",
                                        (session_id, content))) is not None


@dataclasses.dataclass
class Drain:
    """One run over the spool: what is known, what was done, and the pending state.db records."""

    ctx: JobContext
    spool: Spool
    limits: Limits
    connection: apsw.Connection | sqlite3.Connection  # apsw while planning, sqlite3 while ingesting
    known: dict[str, KnownRow]
    merged: set[str]
    state_db: Any = None
    ingestor: Ingestor | None = None
    planned_contents: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    rejections_reported: int = 0

    def reject(self, message: str) -> None:
        """A warning per rejected file or item (the first few), so the report names file and field."""
        self.rejections_reported += 1
        if self.rejections_reported <= REJECTION_WARNINGS_SHOWN:
            self.ctx.warn("bridge-rejected", message, severity="warning")

    def drain_file(self, name: str) -> None:
        """Parse, ingest and move one file (or, in a dry run, count what would happen)."""
        now = isoformat(utc_now())
        try:
            parsed = parse_file(name, self.spool.read(name, self.limits.max_file_bytes),
                                self.limits.max_item_bytes, self.limits.max_file_bytes, self.limits.default_session)
        except FileRejected as rejection:
            self.ctx.count("files_rejected")
            self.reject(f"{name}: rejected whole: {rejection.reason}")
            if not self.ctx.dry_run:
                self.spool.reject_file(name, rejection.reason, now)
            return
        rejected = list(parsed.rejected)
        records: list[dict[str, Any]] = []
        for item in parsed.items:
            problem = self.ingest(item, name, records)
            if problem is not None:
                rejected.append(RejectedItem(item.position, (problem,), item.original))
        rejected.sort(key=lambda entry: entry.position)
        for entry in rejected:
            self.reject(entry.describe(name))
        self.ctx.count("items_rejected", len(rejected))
        self.ctx.count("files_drained")
        if self.ctx.dry_run:
            return
        self.record(records)
        if rejected:
            self.spool.write_rejected_items(name, rejected, now)
        self.spool.mark_drained(name)

    def ingest(self, item: Item, file_name: str, records: list[dict[str, Any]]) -> str | None:
        """Ingest one valid item (or predict it in a dry run); return a rejection reason or None."""
        known = self.known.get(item.idempotency_key)
        if known is not None or item.idempotency_key in self.merged:
            self.ctx.count("duplicates_skipped")
            if known is not None and item.memory_type and known.memory_type != item.memory_type:
                if not self.ctx.dry_run:
                    self.ingestor.set_memory_type(known.memory_id, item.memory_type)
                known.memory_type = item.memory_type
            if known is not None and not known.has_legacy_row:
                self.ctx.count("legacy_rows_repaired")
                if not self.ctx.dry_run:
                    self.ingestor.repair_legacy_row(known.memory_id)
                known.has_legacy_row = True
            return None
        if self.ctx.dry_run:
            reason = filter_reason(item.content)
            if reason is not None:
                return f"Mnemosyne's write filter refused it ({reason})"
            signature = (item.session_id, item.content)
            merged = signature in self.planned_contents or _content_exists(self.connection, *signature)
            self.planned_contents.add(signature)
            self.known[item.idempotency_key] = KnownRow("(dry run)", item.memory_type)
            self.ctx.count("items_merged" if merged else "items_ingested")
            return None
        started = time.monotonic()
        outcome, memory_id = self.ingestor.remember(item, file_name)
        time.sleep(self.limits.pause_after(time.monotonic() - started))
        if outcome == "filtered":
            return f"Mnemosyne's write filter refused it ({filter_reason(item.content) or 'rejected'})"
        if outcome == "ingested":
            self.known[item.idempotency_key] = KnownRow(memory_id, item.memory_type)
        else:
            self.merged.add(item.idempotency_key)
        self.ctx.count("items_" + outcome)
        record = {"key": item.idempotency_key, "memory_id": memory_id, "session_id": item.session_id,
                  "outcome": outcome, "file": file_name, "position": item.position,
                  "ingested_at": isoformat(utc_now())}
        if outcome == "merged":
            # state.db is the only place a merged item's key lives: record it at once, so a kill later
            # in the file cannot make the next run merge it (refresh the row) a second time.
            self.record([record])
        else:
            records.append(record)
        return None

    def record(self, records: list[dict[str, Any]]) -> None:
        """Index the file's keys in state.db (merged ones live only there; the DB row is the truth
        for ingested ones)."""
        if records and self.state_db is not None:
            with self.state_db.conn:
                self.state_db[KEYS_TABLE].insert_all(records, ignore=True)


def run(ctx: JobContext) -> JobResult:
    """Drain ``<state_dir>/queue/new``: ingest valid items, move files to cur/ or failed/."""
    for name in COUNTS:
        ctx.count(name, 0)
    spool = Spool(ctx.settings.queue_dir)
    spool.check()
    names = spool.pending()
    ctx.result.stats["files_pending"] = len(names)
    if not names:
        return ctx.result
    limits = Limits.from_settings(ctx.settings)
    connection = ctx.open_db()
    state_db = ctx.open_state()
    drain = None
    try:
        drain = Drain(ctx=ctx, spool=spool, limits=limits, connection=connection,
                      known=keys_in_database(connection), merged=merged_keys_in_state(state_db))
        if not ctx.dry_run:
            spool.ensure()
            _create_keys_table(state_db)
            drain.state_db = state_db
            schema_gaps = live_schema_gaps(connection)
            # apsw bundles its own SQLite; Mnemosyne uses Python's sqlite3 (the system one). Two SQLite
            # libraries must never have one database open in the same process: they cannot see each
            # other's locks, so closing one deletes the WAL under the other, whose later writes are
            # then lost. So apsw is closed before Mnemosyne opens, and the ingest reads and writes
            # through Python's sqlite3 only.
            connection.close()
            connection = drain.connection = open_ingest_connection(ctx.settings.db_path)
            drain.ingestor = Ingestor(ctx, connection, schema_gaps)
        with ctx.progress.bar("bridge-drain: files", total=len(names)) as bar:
            for name in names:
                try:
                    drain.drain_file(name)
                except OSError as error:  # e.g. a file removed under us: report it, keep going
                    ctx.warn("bridge-file-error", f"{name}: {error}", severity="error")
                bar.advance()
        if drain.rejections_reported > REJECTION_WARNINGS_SHOWN:
            ctx.warn("bridge-rejected", f"... and {drain.rejections_reported - REJECTION_WARNINGS_SHOWN} more "
                     f"rejections; see {spool.folder('failed')}/*.error.json", severity="warning")
    finally:
        if drain is not None and drain.ingestor is not None:
            drain.ingestor.close()
        connection.close()
        if state_db is not None:
            state_db.close()
    if any(warning.severity == "error" for warning in ctx.result.warnings):
        raise MnemoOpsError("some spool files could not be processed (see warnings); they stay in queue/new")
    return ctx.result
