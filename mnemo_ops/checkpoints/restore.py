"""Restore a checkpoint's mnemosyne.db over the live database (or to another path), safely.

Order matters: the checkpoint is verified first; the writer lock is taken (refused while another
mnemo-ops writer holds it); the checkpoint DB is copied to a temporary file beside the target,
checked against the manifest's sha256, switched to WAL (Mnemosyne's mode) and fsynced; then the
current DB, its ``-wal`` and its ``-shm`` are moved into ``<state_dir>/restore-safety/<stamp>-<name>/``
(all three, before the new file appears: a WAL left beside a different database would be replayed
into it) and the temporary file is renamed over the target in one atomic step.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.checkpoints import catalog, chunk_store
from mnemo_ops.checkpoints.files import copy_private_file
from mnemo_ops.checkpoints.verify import (
    VerificationReport,
    is_deduplicated,
    reassemble_database,
    verify_checkpoint,
)
from mnemo_ops.core.folders import STATE_FIX
from mnemo_ops.core.lock import WriterLock, describe_holder, lock_path_for, probe_holder
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.foundation.clock import utc_now
from mnemo_ops.foundation.errors import LockHeldError, MnemoOpsError
from mnemo_ops.foundation.private_files import (
    PRIVATE_FILE_MODE,
    ensure_private_dir,
    fsync_path,
    refuse_symlink,
    sha256_file,
)
from mnemo_ops.foundation.writable import require_writable
from mnemo_ops.settings import Settings

SIDE_SUFFIXES = ("", "-wal", "-shm")


@dataclasses.dataclass
class RestoreOutcome:
    """What a restore did (or, with dry_run, would do)."""

    name: str
    target: Path
    dry_run: bool
    verification: VerificationReport
    moved_aside: list[str]
    safety_dir: Path | None
    row_counts: dict[str, int | None]
    open_by: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``backup restore --json``."""
        return {
            "name": self.name,
            "target": str(self.target),
            "dry_run": self.dry_run,
            "restored": not self.dry_run,
            "verification": self.verification.to_dict(),
            "moved_aside": self.moved_aside,
            "safety_dir": str(self.safety_dir) if self.safety_dir else None,
            "row_counts": self.row_counts,
            "open_by": self.open_by,
        }


def processes_using(paths: list[Path]) -> list[dict[str, Any]]:
    """Other processes that hold one of `paths` open (Linux /proc; empty where /proc is unavailable)."""
    wanted = {str(path) for path in paths}
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            for descriptor in (entry / "fd").iterdir():
                if os.readlink(descriptor) in wanted:
                    command = (entry / "comm").read_text(encoding="utf-8").strip()
                    found.append({"pid": int(entry.name), "command": command})
                    break
        except OSError:  # the process ended, or is not ours to inspect
            continue
    return found


def _prepare_copy(
    info: catalog.CheckpointInfo, target: Path, mode: int, progress: ProgressReporter | None = None
) -> Path:
    """Copy (or reassemble from the chunk store) the checkpoint DB beside `target`, check its
    hash, switch it to WAL; return the temp path."""
    temporary = target.parent / f".{target.name}.restore-{os.getpid()}.tmp"
    for suffix in SIDE_SUFFIXES:
        Path(f"{temporary}{suffix}").unlink(missing_ok=True)
    if is_deduplicated(info.manifest):
        try:
            reassemble_database(info, temporary, progress or ProgressReporter(False))
        except chunk_store.ChunkError as error:
            raise MnemoOpsError(f"{error}; nothing was changed") from None
    else:
        source = info.path / catalog.DATABASE_FILE
        copy_private_file(source, temporary)
        expected = (
            (info.manifest or {}).get("files", {}).get(catalog.DATABASE_FILE, {}).get("sha256")
        )
        if sha256_file(temporary) != expected:
            temporary.unlink()
            raise MnemoOpsError(
                f"the copy of {source} does not match its manifest sha256; nothing was changed"
            )
    connection = apsw.Connection(str(temporary))
    try:
        connection.execute(
            "PRAGMA journal_mode = WAL"
        )  # Mnemosyne's mode; closing removes -wal/-shm
    finally:
        connection.close()
    os.chmod(temporary, mode)
    fsync_path(temporary)
    return temporary


def check_restore_writes(target: Path, lock_dir: Path, safety_dir: Path | None) -> None:
    """Refuse, before anything is moved and in a dry run alike, a restore that could not finish:
    the target's folder (the restored copy is made there and renamed over it), the writer lock's
    folder, and the folder the files it replaces are moved aside into. FolderError (exit 2) names
    the first path and what to do, as a job's preflight does."""
    require_writable(
        target.parent,
        "the restored database",
        "make the folder writable, or restore elsewhere with --to PATH",
    )
    require_writable(lock_dir, "the writer lock", STATE_FIX)
    if safety_dir is not None:
        require_writable(safety_dir, "the files the restore moves aside", STATE_FIX)


def restore_checkpoint(
    settings: Settings,
    name: str,
    target: Path | None = None,
    dry_run: bool = False,
    force: bool = False,
    progress: ProgressReporter | None = None,
) -> RestoreOutcome:
    """Verify checkpoint `name` and restore its mnemosyne.db to `target` (default: the live DB).

    Raises MnemoOpsError (nothing changed) when the checkpoint does not verify or another process has
    the target open (unless `force`), LockHeldError (exit 75) while a mnemo-ops writer holds the lock.
    """
    info = catalog.find_checkpoint(settings, name)
    if info.failed:
        raise MnemoOpsError(
            f"checkpoint {name} failed verification when it was made; refusing to restore it"
        )
    report = verify_checkpoint(info, progress)
    if not report.ok:
        raise MnemoOpsError(
            f"checkpoint {name} does not verify ({report.problems[0]}); nothing was changed"
        )
    target = Path(target or settings.db_path).absolute()
    refuse_symlink(target)
    if target.exists() and not target.is_file():
        raise MnemoOpsError(f"restore target is not a regular file: {target}")
    present = [
        Path(f"{target}{suffix}") for suffix in SIDE_SUFFIXES if Path(f"{target}{suffix}").exists()
    ]
    open_by = processes_using(present)
    lock_path = lock_path_for(settings.state_dir, target)
    safety_dir = settings.state_dir / "restore-safety" / f"{catalog.stamp(utc_now())}-{name}"
    check_restore_writes(target, lock_path.parent, safety_dir.parent if present else None)
    outcome = RestoreOutcome(
        name,
        target,
        dry_run,
        report,
        [str(path) for path in present],
        safety_dir if present else None,
        dict((info.manifest or {}).get("row_counts") or {}),
        open_by,
    )
    if dry_run:
        holder = probe_holder(lock_path)
        if holder:
            raise LockHeldError(
                f"a restore would be refused now: the writer lock is held by {describe_holder(holder)}",
                holder,
            )
        return outcome
    if open_by and not force:
        users = ", ".join(f"pid {item['pid']} ({item['command']})" for item in open_by)
        raise MnemoOpsError(
            f"{target} is open by {users}: stop the agent first (or pass --force); nothing was changed"
        )
    lock = WriterLock(lock_path, "backup-restore")
    lock.acquire()  # LockHeldError (exit 75) while a job is writing
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = target.stat().st_mode & 0o777 if target.exists() else PRIVATE_FILE_MODE
        temporary = _prepare_copy(info, target, mode, progress)
        try:
            if present:
                ensure_private_dir(safety_dir.parent)
                ensure_private_dir(safety_dir)
                for path in (
                    present
                ):  # the DB first, then its -wal and -shm: all gone before the new file lands
                    shutil.move(str(path), str(safety_dir / path.name))
                fsync_path(safety_dir)
            for suffix in ("-wal", "-shm"):
                if Path(
                    f"{target}{suffix}"
                ).exists():  # re-created meanwhile: must not meet the new DB
                    ensure_private_dir(safety_dir)
                    shutil.move(
                        f"{target}{suffix}", str(safety_dir / f"{target.name}{suffix}.late")
                    )
            os.rename(temporary, target)
            fsync_path(target.parent)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    finally:
        lock.release()
    connection = database.open_memory_db(target, readonly=True)
    try:
        counts = database.row_counts(connection)
    finally:
        connection.close()
    expected = (info.manifest or {}).get("row_counts") or {}
    if counts != expected:
        raise MnemoOpsError(
            f"restored {target}, but its row counts {counts} differ from the manifest {expected}; "
            f"the previous database is in {safety_dir}"
        )
    outcome.row_counts = counts
    return outcome
