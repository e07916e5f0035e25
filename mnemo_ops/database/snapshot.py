"""A private, consistent copy of the memory database for read-only work that still writes.

Mnemosyne's recall bumps ``recall_count``/``last_recalled`` and may create tables, so the eval runs
it on a copy. The copy is made inside one read transaction of a read-only connection, so it is a
consistent snapshot and never blocks the live writer (WAL readers do not block writers).
Mnemosyne's ``config.yaml`` beside the database, if any, is copied too, so recall runs with the
agent's own configuration.

A database in WAL mode is copied as files (the database, then its WAL) while the read transaction
holds its snapshot: a reflink where the filesystem offers one, else the kernel's
``copy_file_range``. That is safe because, while a reader holds a snapshot, SQLite never moves a
WAL frame newer than the snapshot into the database file and never rewrites the WAL frames the
snapshot uses: every page of the copied file is either as it was or as one of the copied WAL
frames has it, and the copy's own WAL recovery replays those frames (a frame half written at the
end fails its checksum and is dropped with its transaction). The copy's WAL is then folded in.
On a large database this is many times quicker than the backup API, which copies page by page
through SQLite. Any other journal mode, or a copy that fails, goes through the backup API.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import apsw
import yaml

from mnemo_ops import database


def snapshot_database(source: Path, target_dir: Path, link: bool = False) -> Path:
    """Copy `source` (and its Mnemosyne config.yaml) into `target_dir`; return the copy's path.

    With `link`, `source` must be a private copy nothing else has open (the recall guard's): it is
    hard-linked instead of copied, so work on the returned path changes `source` itself, which is
    what a copy that is thrown away afterwards allows (see `fold_wal` for the link's WAL).
    """
    target_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = target_dir / "mnemosyne.db"
    linked = False
    if link:
        try:
            os.link(source, target)
            linked = True
        except OSError:
            pass  # another filesystem: copied below
    if not linked:
        copy_snapshot(Path(source), target)
    os.chmod(target, 0o600)
    config = Path(source).parent / "config.yaml"
    if config.is_file() and not config.is_symlink():
        shutil.copyfile(config, target_dir / "config.yaml")
        os.chmod(target_dir / "config.yaml", 0o600)
        point_config_at(target_dir / "config.yaml", target)
    return target


def fold_wal(path: Path) -> None:
    """Fold the WAL beside `path` into the file (a hard link's WAL is named after the link, and
    goes away with the link's folder: without this the changes in it would be lost, and a file
    left half checkpointed would be damaged)."""
    if Path(f"{path}-wal").exists():
        connection = apsw.Connection(str(path))
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            connection.close()


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


FICLONE = 0x40049409
"""Linux's ioctl that makes `target` share `source`'s blocks (btrfs, XFS; refused elsewhere)."""


def copy_file(source: Path, target: Path) -> str:
    """Copy the bytes of `source` into a new file `target`; return how ("reflink", "kernel" or
    "stream"). A reflink shares the blocks until either file changes; ``copy_file_range`` copies
    inside the kernel; the stream copy is the fallback for filesystems that offer neither."""
    with open(source, "rb") as reader, open(target, "wb") as writer:
        try:
            fcntl.ioctl(writer.fileno(), FICLONE, reader.fileno())
            return "reflink"
        except OSError:
            pass
        try:
            while os.copy_file_range(reader.fileno(), writer.fileno(), 1 << 30):
                pass
            return "kernel"
        except OSError:
            reader.seek(0)
            writer.seek(0)
            writer.truncate()
        shutil.copyfileobj(reader, writer, 1 << 20)
        return "stream"


def copy_snapshot(source: Path, target: Path) -> str:
    """Copy the memory DB (with what its WAL holds) to a new file `target` inside one read snapshot;
    return the method (see the module docstring: "reflink", "kernel", "stream" or "backup").

    For private working copies (eval, the recall guard's trial, dry-run consolidation); checkpoints
    use ``checkpoints.sqlite_copy``, which adds progress, row counts from the same snapshot and
    full-disk handling.
    """
    reader = database.open_memory_db(source, readonly=True)
    try:
        if reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            try:
                return _copy_files_in_snapshot(reader, Path(source), Path(target))
            except (OSError, apsw.Error):
                # A filesystem or a file the copy cannot handle: the backup API below does.
                for leftover in (target, Path(f"{target}-wal"), Path(f"{target}-shm")):
                    leftover.unlink(missing_ok=True)
        _backup(reader, Path(target))
        return "backup"
    finally:
        reader.close()


def _copy_files_in_snapshot(reader: apsw.Connection, source: Path, target: Path) -> str:
    """The file copy under one read transaction of `reader` (module docstring), WAL folded in."""
    reader.execute("BEGIN")
    try:
        # The first read takes the snapshot (the read lock on the WAL) the copy stands on.
        reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
        method = copy_file(source, target)
        wal = Path(f"{source}-wal")
        if wal.exists():
            copy_file(wal, Path(f"{target}-wal"))
    finally:
        reader.execute("COMMIT")
    copy = apsw.Connection(str(target))
    try:
        copy.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        copy.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        copy.close()
    return method


def _backup(reader: apsw.Connection, target: Path) -> None:
    """SQLite's backup API in a single step: one read transaction, so one consistent snapshot."""
    destination = apsw.Connection(str(target))
    try:
        with destination.backup("main", reader, "main") as backup:
            backup.step(-1)  # every page in one step: one consistent read snapshot
    finally:
        destination.close()
