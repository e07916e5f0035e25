"""Contained access to the mnemosyne-memory package.

Importing ``mnemosyne.core.memory`` initialises the database at Mnemosyne's default path, and
``Mnemosyne(...)`` seeds a ``config.yaml`` into ``MNEMOSYNE_DATA_DIR`` whatever ``db_path`` says
(3.15.1). Nothing here is imported at module level: read-only commands and dry runs never touch it.

Why Mnemosyne is opened *quietly* (no schema initialisation on a live database whose schema is
already current): every ``init_beam`` (run once by the import and twice by each ``Mnemosyne(...)``)
executes ``DROP TRIGGER IF EXISTS wm_au`` + ``CREATE TRIGGER wm_au``, i.e. two real schema changes
even when nothing needs migrating. A schema change makes the live agent's next ``INSERT INTO
working_memory`` re-prepare inside the transaction Python's sqlite3 has already opened with a
deferred ``BEGIN``; re-preparing reconnects the FTS5 table, which reads ``fts_working_config`` and so
takes a read snapshot; the INSERT then asks for the write lock while already holding a snapshot, and
SQLite answers SQLITE_BUSY at once (the busy handler is not used for a read-to-write upgrade) when
any other connection holds or has just committed the write lock. Mnemosyne never rolls that
transaction back, so the agent's connection keeps its stale snapshot and every later remember fails
with "database is locked" until the process restarts. Not changing the schema avoids all of it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

_SCRATCH_PREFIX = "mnemo-ops-mnemosyne-"
_construction_lock = threading.Lock()
_reference: dict[tuple[str, str], dict[str, Any]] | None = None


def mnemosyne_version() -> str | None:
    """The installed mnemosyne-memory version, read from package metadata (no import side effects)."""
    try:
        return metadata.version("mnemosyne-memory")
    except metadata.PackageNotFoundError:
        return None


def mnemosyne_environment(
    data_dir: Path,
    hermes_home: Path,
    *,
    home: Path | None = None,
    variables: Mapping[str, str] | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a child process that runs Mnemosyne on the database in `data_dir`.

    `base` (default: this process's environment) with, set before the child imports Mnemosyne:

    - ``MNEMOSYNE_DATA_DIR`` = `data_dir`: importing Mnemosyne initialises a database at its default
      path and ``Mnemosyne(...)`` seeds a ``config.yaml`` there, so it must be the folder of the
      database worked on (the live one's, or a private copy's), never another.
    - ``HERMES_HOME`` = `hermes_home`: where Mnemosyne's defaults and the Hermes plugin's files are
      (the agent's home beside the live database; a private folder beside a copy).
    - ``HOME`` = `home`, only for a private home (a dry run's scratch copy, a sample): nothing the
      child does may reach the user's home. Otherwise left alone, so an embedding model cached
      under the user's home is used as the agent would use it.
    - `variables`: this run's ``MNEMOSYNE_*`` settings (the eval's options, the sleep's batch size,
      a sample's ``MNEMOSYNE_NO_EMBEDDINGS``); the paths above are set after them and win.
    """
    environment = dict(os.environ if base is None else base)
    environment.update(variables or {})
    environment["MNEMOSYNE_DATA_DIR"] = str(data_dir)
    environment["HERMES_HOME"] = str(hermes_home)
    if home is not None:
        environment["HOME"] = str(home)
    return environment


def point_environment_at(db_path: Path, hermes_home: Path | None = None) -> None:
    """Make Mnemosyne's default data dir the folder of `db_path` (and HERMES_HOME, when given)."""
    os.environ["MNEMOSYNE_DATA_DIR"] = str(Path(db_path).absolute().parent)
    if hermes_home is not None:
        os.environ["HERMES_HOME"] = str(hermes_home)


def _normalised(sql: str | None) -> str:
    return re.sub(r"\s+", " ", (sql or "").strip()).lower().replace("if not exists ", "")


def describe_schema(rows, columns_of) -> dict[tuple[str, str], dict[str, Any]]:
    """(type, name) -> normalised SQL and column names, from ``sqlite_master`` rows (type, name, sql).

    `columns_of(name)` returns a table's column names; virtual tables are described by name only
    (their module, e.g. sqlite-vec's vec0, may not be loadable on the reading connection).
    """
    schema: dict[tuple[str, str], dict[str, Any]] = {}
    for object_type, name, sql in rows:
        if name.startswith("sqlite_"):
            continue
        virtual = (sql or "").upper().startswith("CREATE VIRTUAL TABLE")
        columns = set(columns_of(name)) if object_type == "table" and not virtual else set()
        schema[(object_type, name)] = {"sql": _normalised(sql), "columns": columns}
    return schema


def schema_gaps(live: dict, reference: dict) -> list[str]:
    """What Mnemosyne's schema initialisation would still change in `live` (empty when current).

    Tables and indexes are created ``IF NOT EXISTS`` and columns added when missing, so presence is
    what matters for them; triggers and views are compared by their SQL because ``init_beam``
    redefines ``wm_au`` (drop + create) to migrate older definitions.
    """
    gaps = []
    for (object_type, name), wanted in sorted(reference.items()):
        found = live.get((object_type, name))
        if found is None:
            gaps.append(f"{object_type} {name} missing")
        elif object_type == "table" and not wanted["columns"] <= found["columns"]:
            gaps.append(
                f"table {name} lacks {', '.join(sorted(wanted['columns'] - found['columns']))}"
            )
        elif object_type in ("trigger", "view") and found["sql"] != wanted["sql"]:
            gaps.append(f"{object_type} {name} differs")
    return gaps


def _import_memory_module():
    """Import ``mnemosyne.core.memory`` with its import-time ``init_db()`` aimed at a private scratch
    folder (never at the live database), and describe the schema that init creates there (once)."""
    global _reference
    if _reference is not None:
        return sys.modules["mnemosyne.core.memory"]
    previous = os.environ.get("MNEMOSYNE_DATA_DIR")
    with tempfile.TemporaryDirectory(prefix=_SCRATCH_PREFIX) as scratch:
        try:
            os.environ["MNEMOSYNE_DATA_DIR"] = scratch
            import mnemosyne.core.memory as memory_module

            reference_path = Path(scratch) / "mnemosyne.db"
            if not reference_path.exists():  # the module was imported earlier, elsewhere
                memory_module.init_db(reference_path)
            # Read with the same SQLite library as Mnemosyne's own connections to this file.
            connection = sqlite3.connect(f"{reference_path.as_uri()}?mode=ro", uri=True)
            try:
                _reference = describe_schema(
                    connection.execute("SELECT type, name, sql FROM sqlite_master").fetchall(),
                    lambda name: [
                        row[1] for row in connection.execute(f'PRAGMA table_info("{name}")')
                    ],
                )
            finally:
                connection.close()
        finally:
            if previous is None:
                os.environ.pop("MNEMOSYNE_DATA_DIR", None)
            else:
                os.environ["MNEMOSYNE_DATA_DIR"] = previous
    return memory_module


def live_schema_gaps(connection) -> list[str]:
    """Schema changes Mnemosyne's initialisation would make to the database behind the apsw `connection`."""
    _import_memory_module()
    live = describe_schema(
        connection.execute("SELECT type, name, sql FROM sqlite_master").fetchall(),
        lambda name: [
            row[1] for row in connection.execute(f'PRAGMA table_info("{name}")').fetchall()
        ],
    )
    return schema_gaps(live, _reference or {})


def open_mnemosyne(
    db_path: Path,
    session_id: str = "mnemo-ops",
    hermes_home: Path | None = None,
    initialise: bool = True,
):
    """Return a ``mnemosyne.core.memory.Mnemosyne`` bound to `db_path`, with side effects contained.

    Only for jobs that really write through Mnemosyne (never in a dry run). With ``initialise=False``
    Mnemosyne's schema initialisation (``init_db``/``init_beam``) is skipped; pass it only when
    :func:`live_schema_gaps` found nothing to change, so the live agent never sees a schema change
    from us (see the module docstring). ``remember`` itself is Mnemosyne's, untouched.
    """
    memory_module = _import_memory_module()
    point_environment_at(db_path, hermes_home)
    if initialise:
        return memory_module.Mnemosyne(session_id=session_id, db_path=Path(db_path).absolute())
    with schema_initialisation_skipped():
        return memory_module.Mnemosyne(session_id=session_id, db_path=Path(db_path).absolute())


@contextlib.contextmanager
def schema_initialisation_skipped() -> Iterator[None]:
    """Within the block, Mnemosyne's ``init_db``/``init_beam`` do nothing.

    For work on a database whose schema :func:`live_schema_gaps` found current: constructing
    ``Mnemosyne`` and, inside ``sleep_all_sessions``, the ``BeamMemory`` it makes for each session would
    otherwise redefine ``wm_au`` every time (see the module docstring).
    """
    memory_module = _import_memory_module()
    beam_module = sys.modules["mnemosyne.core.beam"]
    with _construction_lock:
        saved = memory_module.init_db, beam_module.init_beam
        memory_module.init_db = beam_module.init_beam = _skip_initialisation
        try:
            yield
        finally:
            memory_module.init_db, beam_module.init_beam = saved


def _skip_initialisation(db_path: Path | None = None) -> None:
    """Stands in for init_db/init_beam while working on a database whose schema is current."""


def close_mnemosyne_connections() -> None:
    """Close this thread's cached Mnemosyne connections (legacy and BEAM) and forget them.

    Mnemosyne keeps them open for the life of the thread; a job closes them when it is done so they
    are not closed at some later moment (interpreter exit) of the process.
    """
    for module_name in ("mnemosyne.core.memory", "mnemosyne.core.beam"):
        local = getattr(sys.modules.get(module_name), "_thread_local", None)
        connection = getattr(local, "conn", None)
        if connection is not None:
            connection.close()
            local.conn = None


def filter_reason(content: str) -> str | None:
    """Why Mnemosyne's write filter would refuse `content` (None when it would write it).

    The filter ``Mnemosyne.remember`` applies first (``MNEMOSYNE_IGNORE_PATTERNS``,
    ``MNEMOSYNE_WRITE_CLASSIFIER``): ``mnemosyne.core.filters`` is pure (no database, no files), so
    dry runs use it too.
    """
    from mnemosyne.core.filters import should_remember

    allowed, decision = should_remember(content)
    return None if allowed else (decision.reason or "rejected")


def open_canonical_store(db_path: Path):
    """Mnemosyne's ``CanonicalStore`` (its canonical facts) on `db_path`, on a connection of its own.

    Its ``remember(owner, category, name, body, ...)`` upserts one fact: created, unchanged (an
    identical body), or updated (the old row closed, version + 1). Only for a child process whose
    environment is already set; the caller closes ``store.conn``.
    """
    from mnemosyne.core.canonical import CanonicalStore

    return CanonicalStore(db_path=db_path)
