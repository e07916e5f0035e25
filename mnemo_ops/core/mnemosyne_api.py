"""Contained access to the mnemosyne-memory package.

Importing ``mnemosyne.core.memory`` initialises the database at Mnemosyne's default path, and
``Mnemosyne(...)`` seeds a ``config.yaml`` into ``MNEMOSYNE_DATA_DIR`` whatever ``db_path`` says
(3.15.1). So the environment is pointed at the database's own folder before the first import, and
nothing here is imported at module level: read-only commands and dry runs never touch it.
"""

from __future__ import annotations

import os
import time
from importlib import metadata
from pathlib import Path

SETTLE_SECONDS = 0.5
"""Pause after Mnemosyne's schema initialisation, before our first write (see `initialise_schema_once`)."""

_initialised_paths: set[str] = set()


def mnemosyne_version() -> str | None:
    """The installed mnemosyne-memory version, read from package metadata (no import side effects)."""
    try:
        return metadata.version("mnemosyne-memory")
    except metadata.PackageNotFoundError:
        return None


def point_environment_at(db_path: Path, hermes_home: Path | None = None) -> None:
    """Make Mnemosyne's default data dir the folder of `db_path` (and HERMES_HOME, when given)."""
    os.environ["MNEMOSYNE_DATA_DIR"] = str(Path(db_path).absolute().parent)
    if hermes_home is not None:
        os.environ["HERMES_HOME"] = str(hermes_home)


def initialise_schema_once() -> None:
    """Make Mnemosyne initialise its schema once per database per process, not once per instance.

    Every ``Mnemosyne(...)`` and every ``BeamMemory(...)`` (``sleep_all_sessions`` makes one per
    session) runs ``init_beam``, which drops and re-creates the ``wm_au`` trigger and a probe table
    (3.15.1): each instance bumps the schema version (measured: +4 to +6). Every statement the live
    agent has prepared must then be prepared again, and preparing its FTS-triggering INSERT opens a read
    transaction before it asks for the write lock. If one of our writes holds the lock at that moment,
    SQLite cannot wait (the agent's snapshot would be stale) and the agent gets an immediate
    "database is locked", again and again while we keep writing. Initialising once, then pausing
    (`settle`) before writing, lets the agent re-prepare while nobody holds the lock.
    """
    from mnemosyne.core import beam, memory

    if getattr(beam.init_beam, "_mnemo_ops_once", False):
        return
    original = beam.init_beam

    def init_beam_once(db_path=None):
        key = str(Path(db_path).absolute()) if db_path else str(beam._default_db_path())
        if key in _initialised_paths:
            return None
        _initialised_paths.add(key)
        return original(db_path)

    init_beam_once._mnemo_ops_once = True
    beam.init_beam = init_beam_once
    memory.init_beam = init_beam_once


def settle() -> None:
    """Pause (holding no lock) so the live agent can re-prepare its statements after a schema change."""
    time.sleep(SETTLE_SECONDS)


def open_mnemosyne(db_path: Path, session_id: str = "mnemo-ops", hermes_home: Path | None = None):
    """Return a ``mnemosyne.core.memory.Mnemosyne`` bound to `db_path`, with side effects contained.

    Only for jobs that really write through Mnemosyne (never in a dry run), and never in a process that
    also has an apsw connection to the same database open (docs/architecture.md: one SQLite library per
    process). The first instance per database initialises Mnemosyne's schema and then pauses briefly
    (`initialise_schema_once`); later instances reuse that initialisation.
    """
    point_environment_at(db_path, hermes_home)
    import mnemosyne.core.memory as memory_module

    initialise_schema_once()
    first = str(Path(db_path).absolute()) not in _initialised_paths
    instance = memory_module.Mnemosyne(session_id=session_id, db_path=Path(db_path).absolute())
    if first:
        settle()
    return instance
