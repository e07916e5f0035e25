"""A private, consistent copy of the memory database for read-only work that still writes.

Mnemosyne's recall bumps ``recall_count``/``last_recalled`` and may create tables, so the eval runs
it on a copy. The copy is made with SQLite's backup API in a single step from a read-only
connection: one read transaction, so it is a consistent snapshot and never blocks the live writer
(WAL readers do not block writers). Mnemosyne's ``config.yaml`` beside the database, if any, is
copied too, so recall runs with the agent's own configuration.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import apsw
import yaml

from mnemo_ops import database


def snapshot_database(source: Path, target_dir: Path) -> Path:
    """Copy `source` (and its Mnemosyne config.yaml) into `target_dir`; return the copy's path."""
    target_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = target_dir / "mnemosyne.db"
    copy_snapshot(Path(source), target)
    os.chmod(target, 0o600)
    config = Path(source).parent / "config.yaml"
    if config.is_file() and not config.is_symlink():
        shutil.copyfile(config, target_dir / "config.yaml")
        os.chmod(target_dir / "config.yaml", 0o600)
        point_config_at(target_dir / "config.yaml", target)
    return target


def point_config_at(config: Path, database_path: Path) -> None:
    """Make a copied Mnemosyne config.yaml name the copy's folder, never the original's.

    Mnemosyne seeds ``data_dir`` (and may hold ``db_path``) as absolute paths, and its config wins over
    the environment: a copy that kept them could lead Mnemosyne back to the live files.
    """
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # Mnemosyne will not read it either
    if not isinstance(data, dict):
        return
    changed = False
    if data.get("data_dir"):
        data["data_dir"], changed = str(database_path.parent), True
    if data.get("db_path"):
        data["db_path"], changed = str(database_path), True
    if changed:
        config.write_text(yaml.safe_dump(data, sort_keys=True), encoding="utf-8")


def copy_snapshot(source: Path, target: Path) -> None:
    """Copy the memory DB (with what its WAL holds) to a new file `target` inside one read snapshot.

    SQLite's backup API in a single step from a read-only connection: one read transaction, so the copy
    is consistent and the live writer is never blocked (WAL readers do not block writers). For private
    working copies (eval, dry-run consolidation); checkpoints use ``checkpoints.sqlite_copy``, which adds
    progress, row counts from the same snapshot and full-disk handling.
    """
    reader = database.open_memory_db(source, readonly=True)
    try:
        destination = apsw.Connection(str(target))
        try:
            with destination.backup("main", reader, "main") as backup:
                backup.step(-1)  # every page in one step: one consistent read snapshot
        finally:
            destination.close()
    finally:
        reader.close()
