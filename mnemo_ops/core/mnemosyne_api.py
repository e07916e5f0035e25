"""Contained access to the mnemosyne-memory package.

Importing ``mnemosyne.core.memory`` initialises the database at Mnemosyne's default path, and
``Mnemosyne(...)`` seeds a ``config.yaml`` into ``MNEMOSYNE_DATA_DIR`` whatever ``db_path`` says
(3.15.1). So the environment is pointed at the database's own folder before the first import, and
nothing here is imported at module level: read-only commands and dry runs never touch it.
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path


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


def open_mnemosyne(db_path: Path, session_id: str = "mnemo-ops", hermes_home: Path | None = None):
    """Return a ``mnemosyne.core.memory.Mnemosyne`` bound to `db_path`, with side effects contained.

    Only for jobs that really write through Mnemosyne (never in a dry run).
    """
    point_environment_at(db_path, hermes_home)
    from mnemosyne.core.memory import Mnemosyne

    return Mnemosyne(session_id=session_id, db_path=Path(db_path).absolute())
