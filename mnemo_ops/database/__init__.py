"""The memory database layer: connections (apsw), the Mnemosyne schema check, introspection.

Submodules: ``transactions`` (BEGIN IMMEDIATE batches retried on busy), ``fts_query`` (the only way
to build an FTS5 MATCH), ``mnemosyne_api`` (contained access to the mnemosyne-memory package) and
``snapshot`` (private consistent copies for read-only work).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops.database import wal
from mnemo_ops.foundation.errors import DatabaseError

BUSY_TIMEOUT_MS = 5000
"""The same busy timeout Mnemosyne uses on its own connections."""

BUSY_POLL_S = 0.001
"""How often a writable connection of ours asks again for a lock another connection holds."""


def patient_busy_handler(timeout_ms: int = BUSY_TIMEOUT_MS) -> Callable[[int], bool]:
    """A busy handler that asks again every millisecond until `timeout_ms` have passed.

    Why not SQLite's own busy timeout: its sleeps between attempts grow to a tenth of a second, and
    a live agent that writes back to back frees the write lock only for the few milliseconds
    between its transactions. A waiter that looks that rarely misses nearly every such gap, waits
    out its whole timeout and fails with "database is locked". Looking every millisecond finds the
    gaps; the agent's own waits are unchanged.
    """
    started = 0.0

    def handler(prior_calls: int) -> bool:
        nonlocal started
        now = time.monotonic()
        if prior_calls == 0:  # a new wait: its clock starts now
            started = now
        if now - started >= timeout_ms / 1000:
            return False
        time.sleep(BUSY_POLL_S)
        return True

    return handler


MNEMOSYNE_REQUIRED_TABLES = ("working_memory", "episodic_memory", "fts_working")
"""Tables every Mnemosyne database has: what tells it apart from any other SQLite file."""

MAIN_TABLES = (
    "working_memory",
    "episodic_memory",
    "canonical_facts",
    "graph_edges",
    "triples",
    "memory_embeddings",
)
"""The tables whose row counts status, backups and reports show."""

SQLITE_HEADER = b"SQLite format 3\x00"


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


SIDE_FILES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database while it is open (or after a crash)."""


def side_files(path: Path) -> list[Path]:
    """The -wal, -shm and -journal files beside `path` that exist now."""
    return [Path(f"{path}{suffix}") for suffix in SIDE_FILES if Path(f"{path}{suffix}").exists()]


_UNTOUCHED: contextvars.ContextVar[bool] = contextvars.ContextVar("untouched", default=False)


@contextlib.contextmanager
def untouched_reads(enabled: bool = True) -> Iterator[None]:
    """Within the block, every read-only `connect` is `untouched` (a dry run: wherever it reads
    the database from, not one file may appear beside it)."""
    token = _UNTOUCHED.set(enabled or _UNTOUCHED.get())
    try:
        yield
    finally:
        _UNTOUCHED.reset(token)


def connect(path: Path, readonly: bool = False, untouched: bool = False) -> apsw.Connection:
    """Open the memory database, patient when busy; read-only connections never write.

    A read-only connection neither checkpoints the WAL on close nor changes the file, which is what
    dry runs and read-only commands need. It still creates empty -wal and -shm files beside a WAL
    database nobody has open, and cannot remove them. With `untouched` (a dry run: not one byte
    or file may change), a database with no -wal, -shm or -journal beside it, which no one has
    open, is read as immutable (SQLite's ``immutable=1``: no lock, no file created); one that has
    them is read beside its writer, the ordinary read-only way, creating nothing new.
    """
    check_database_file(path)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    name = str(path)
    if readonly and (untouched or _UNTOUCHED.get()) and not side_files(path):
        name = f"{Path(path).absolute().as_uri()}?immutable=1"
    try:
        connection = apsw.Connection(name, flags=flags | apsw.SQLITE_OPEN_URI)
        if readonly:
            connection.set_busy_timeout(BUSY_TIMEOUT_MS)
        else:
            connection.set_busy_handler(patient_busy_handler())
        # Force the header to be read now so a damaged file fails here with a clear message.
        connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
        if not readonly:
            wal.defer_checkpoints(connection)
    except apsw.NotADBError:
        raise DatabaseError(f"not an SQLite database (or damaged header): {path}") from None
    except apsw.Error as error:
        raise DatabaseError(f"cannot open database {path}: {error}") from None
    return connection


def table_names(connection: apsw.Connection) -> set[str]:
    """Names of all tables (and virtual tables) in the main schema."""
    return {
        row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }


def check_mnemosyne_schema(connection: apsw.Connection, path: Path) -> None:
    """Raise DatabaseError unless the database has Mnemosyne's core tables."""
    missing = [name for name in MNEMOSYNE_REQUIRED_TABLES if name not in table_names(connection)]
    if missing:
        raise DatabaseError(f"not a Mnemosyne database (no {', '.join(missing)} table): {path}")


def open_memory_db(path: Path, readonly: bool = False, untouched: bool = False) -> apsw.Connection:
    """Open and schema-check a Mnemosyne database; raise DatabaseError with one line otherwise
    (`untouched`: see `connect`)."""
    connection = connect(path, readonly=readonly, untouched=untouched)
    try:
        check_mnemosyne_schema(connection, path)
    except DatabaseError:
        connection.close()
        raise
    return connection


def row_counts(
    connection: apsw.Connection, tables: Iterable[str] = MAIN_TABLES
) -> dict[str, int | None]:
    """Row counts of the given tables; None for a table this database does not have."""
    present = table_names(connection)
    counts: dict[str, int | None] = {}
    for table in tables:
        if table in present:
            counts[table] = connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        else:
            counts[table] = None
    return counts


IMPORTANCE_BANDS = ((0.0, 0.3), (0.3, 0.5), (0.5, 0.65), (0.65, 0.8), (0.8, 1.01))
"""Importance bands for `importance_distribution`: 0.65 is the Hermes plugin's cut (a recalled row
below it is dropped when its score is low), 0.5 what the plugin gives a user turn."""


def importance_distribution(connection: apsw.Connection) -> dict[str, Any]:
    """How the current working memories' importance is spread: the count per band, and the share at
    or above the plugin's cut (importance ranks only when not nearly every row has it)."""
    if "working_memory" not in table_names(connection):
        return {"rows": 0, "bands": {}, "at_or_above_cut": 0.0}
    cases = " ".join(
        f"WHEN importance < {high} THEN '{low:.2f}-{min(high, 1.0):.2f}'"
        for low, high in IMPORTANCE_BANDS
    )
    bands = {f"{low:.2f}-{min(high, 1.0):.2f}": 0 for low, high in IMPORTANCE_BANDS}
    for band, count in connection.execute(
        f"SELECT CASE {cases} END, count(*) FROM working_memory "
        "WHERE valid_until IS NULL AND (superseded_by IS NULL OR superseded_by = '') "
        "AND importance IS NOT NULL GROUP BY 1"
    ):
        bands[band] = count
    rows = sum(bands.values())
    high = sum(count for band, count in bands.items() if float(band.split("-")[0]) >= 0.65)
    return {
        "rows": rows,
        "bands": bands,
        "at_or_above_cut": round(high / rows, 4) if rows else 0.0,
    }


def column_names(connection: apsw.Connection, table: str) -> list[str]:
    """Column names of `table` (empty when the table does not exist)."""
    return [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')]


def sqlite_version() -> str:
    """The SQLite library version apsw is linked with."""
    return apsw.sqlite_lib_version()


def fetch_dicts(
    connection: apsw.Connection, sql: str, bindings: Any = None
) -> list[dict[str, Any]]:
    """Run a query and return rows as dicts keyed by column name."""
    cursor = connection.execute(sql, bindings) if bindings is not None else connection.execute(sql)
    try:
        names = [description[0] for description in cursor.get_description()]
    except apsw.ExecutionCompleteError:  # the statement produced no rows at all
        return []
    return [dict(zip(names, row)) for row in cursor]


def live_condition(alias: str = "", now: str = "?") -> str:
    """SQL that holds for a live memory row: not superseded, and not closed (``valid_until`` passed).

    `alias` qualifies the columns (``"w"`` -> ``w.valid_until``); `now` is the placeholder bound to
    the current time in Mnemosyne's own format (``core.clock.local_timestamp()``).
    """
    prefix = f"{alias}." if alias else ""
    return (
        f"({prefix}superseded_by IS NULL OR {prefix}superseded_by = '') "
        f"AND ({prefix}valid_until IS NULL OR {prefix}valid_until > {now})"
    )
