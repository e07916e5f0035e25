"""Create one checkpoint: snapshot copy, verification, hashes, manifest, fsync, atomic rename.

Everything is written into ``backups/.tmp-<name>/`` first. Only a complete, verified checkpoint is
renamed to ``backups/<name>/``; one that fails verification is renamed to ``backups/failed/<name>/``
(kept for inspection, never counted by retention); a copy that fails part-way (full disk, I/O
error, kill) leaves nothing behind but the temporary folder, which is removed at once (or by the
next run after a kill), so earlier checkpoints are never touched.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.checkpoints import catalog, chunk_store, retention, sqlite_copy
from mnemo_ops.checkpoints.files import copy_private_file, fsync_tree, remove_tree
from mnemo_ops.core import disk_reserve as reserve
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.foundation.private_files import (
    ensure_private_dir,
    fsync_path,
    sha256_file,
    write_new_private,
)
from mnemo_ops.foundation.writable import describe_os_error
from mnemo_ops.mnemosyne.api import mnemosyne_version
from mnemo_ops.settings import Settings

MANIFEST_FORMAT = 1
FULL_COPY = "full-copy"
DEDUPLICATED = "deduplicated"
FREE_SPACE_RESERVE_BYTES = 1 << 20
"""Room left over after the estimated checkpoint size: never fill the disk the agent writes to."""
STATE_TABLES = ("runs",)


class CheckpointError(MnemoOpsError):
    """A checkpoint could not be made; nothing partial was left behind. Carries a warning code."""

    def __init__(self, message: str, code: str = "backup-failed", severity: str = "error"):
        super().__init__(message)
        self.code = code
        self.severity = severity


@dataclasses.dataclass
class CheckpointOutcome:
    """The checkpoint that was made (verified, or kept aside in failed/) and how it went."""

    name: str
    path: Path
    verified: bool
    manifest: dict[str, Any]
    problems: list[str]
    source_corrupt: bool
    stats: dict[str, Any]
    """The figures for the job's result (output only: read the fields above and below instead)."""
    state_db_problem: str | None = None
    """What ``integrity_check`` found wrong in the copy of state.db (None: fine, or no state.db)."""


def _unique_name(
    settings: Settings, kind: str, job: str | None, moment: datetime | None
) -> tuple[str, str]:
    moment = moment or utc_now()
    base = catalog.checkpoint_name(kind, job, moment)
    name, number = base, 1
    backups = settings.backups_dir
    while any(
        path.exists()
        for path in (
            backups / name,
            backups / catalog.FAILED_DIR / name,
            backups / f"{catalog.TEMP_PREFIX}{name}",
        )
    ):
        number += 1
        name = f"{base}-{number}"
    return name, isoformat(moment)


def _memory_block_files(settings: Settings) -> list[Path]:
    """Regular files directly in the memory blocks folder (not symlinks, not Hermes' ``.lock`` files)."""
    folder = settings.memory_blocks_dir
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(
        entry
        for entry in folder.iterdir()
        if entry.is_file() and not entry.is_symlink() and not entry.name.endswith(".lock")
    )


def _file_size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def _database_bytes(settings: Settings) -> int:
    db = settings.db_path
    return _file_size(db) + _file_size(Path(f"{db}-wal"))


def _page_size(path: Path) -> int:
    """The page size in the database header (bytes 16-17; 1 means 65,536), 512 when unreadable."""
    try:
        with path.open("rb") as handle:
            header = handle.read(18)
    except OSError:
        return 512
    if len(header) < 18:
        return 512
    value = int.from_bytes(header[16:18], "big")
    return 65536 if value == 1 else max(512, value)


def estimated_size(settings: Settings, shares_previous: bool = False) -> int:
    """An upper bound of the checkpoint's size: the DB and its WAL, state.db, the memory blocks.

    With `shares_previous` (a deduplicated checkpoint after an earlier one) the database counts
    only as its index: how many of its pages are new is not known before they are read, so those
    are bounded while they are written instead (``keep_free`` of the chunk store).
    """
    database_part = _database_bytes(settings)
    if shares_previous:
        pages = -(-database_part // _page_size(settings.db_path))
        database_part = pages * chunk_store.RECORD_BYTES
    return (
        database_part
        + _file_size(settings.state_db_path)
        + sum(_file_size(path) for path in _memory_block_files(settings))
    )


def check_free_space(settings: Settings, shares_previous: bool = False) -> int:
    """Refuse (CheckpointError) before writing anything when the backups folder lacks room.

    A checkpoint that fills the disk would also break the live agent when both share a filesystem,
    so there it must leave the agent's reserve (``disk.reserve``) free as well. Returns the bytes a
    deduplicated checkpoint must still leave free while it writes its new pages: the rest of the
    checkpoint, the margin and, on the agent's filesystem, the reserve.
    """
    rest = estimated_size(settings, shares_previous=True) + FREE_SPACE_RESERVE_BYTES
    needed = estimated_size(settings, shares_previous) + FREE_SPACE_RESERVE_BYTES
    free = shutil.disk_usage(settings.backups_dir).free
    if free < needed:
        raise CheckpointError(
            f"not enough free space in {settings.backups_dir}: {free:,} bytes free, about {needed:,} needed; "
            "nothing was written and earlier checkpoints are intact",
            code="backup-disk-full",
        )
    # On the agent's own filesystem the checkpoint must also leave the agent its reserve.
    if reserve.same_filesystem(settings.backups_dir, settings.db_path.parent):
        space = reserve.free_space(settings, settings.backups_dir, needed=needed)
        if not space.enough:
            raise CheckpointError(
                f"checkpoint refused: {space.describe()}; nothing was written and earlier "
                "checkpoints are intact",
                code="backup-disk-reserve",
            )
        return rest + space.reserve
    return rest


def _describe_failure(error: BaseException, settings: Settings) -> str:
    full = isinstance(error, apsw.FullError) or (
        isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
    )
    # SQLite reports a full disk in several ways (SQLITE_FULL, CANTOPEN when no file can be created,
    # IOERR on a short write): the filesystem itself says whether space ran out.
    if full or (
        isinstance(error, apsw.Error) and sqlite_copy.filesystem_full(settings.backups_dir)
    ):
        return f"no space left on device in {settings.backups_dir}"
    if isinstance(error, OSError):
        return describe_os_error(error)
    return f"{type(error).__name__}: {error}"


def _copy_database(
    settings: Settings, target: Path, progress: ProgressReporter
) -> sqlite_copy.SnapshotCopy:
    with progress.bar("copying mnemosyne.db (one snapshot)") as bar:
        seen = {"done": 0, "total": None}

        def on_pages(done: int, total: int) -> None:
            if seen["total"] != total:
                seen["total"] = total
                bar.update(total=total)
            bar.advance(done - seen["done"])
            seen["done"] = done

        return sqlite_copy.copy_in_one_snapshot(settings.db_path, target, on_pages=on_pages)


def previous_index(settings: Settings) -> chunk_store.Index | None:
    """The index of the newest deduplicated checkpoint whose packs are all in the store (the
    pages a new one most likely shares), or None."""
    store = chunk_store.ChunkStore(settings.backups_dir)
    for info in reversed(catalog.list_checkpoints(settings, include_failed=False)):
        if (info.manifest or {}).get("layout") != DEDUPLICATED:
            continue
        try:
            index = chunk_store.read_index(info.path / chunk_store.INDEX_FILE)
        except chunk_store.ChunkError:
            continue
        return index if all(store.has(name) for name in index.packs) else None
    return None


def _store_database(
    settings: Settings,
    store: chunk_store.ChunkStore,
    name: str,
    progress: ProgressReporter,
    shared: StoreSpace,
) -> tuple[chunk_store.ChunkedSnapshot, str | None]:
    with progress.bar("storing mnemosyne.db (one snapshot, new chunks only)") as bar:
        seen = {"done": 0, "total": None}

        def on_pages(done: int, total: int) -> None:
            if seen["total"] != total:
                seen["total"] = total
                bar.update(total=total)
            bar.advance(done - seen["done"])
            seen["done"] = done

        return chunk_store.snapshot_to_store(
            settings.db_path,
            store,
            chunk_store.new_pack_name(name),
            previous=shared.previous,
            on_pages=on_pages,
            integrity=shared.integrity,
            keep_free=shared.keep_free,
        )


def _copy_state(settings: Settings, folder: Path) -> dict[str, Any]:
    source = settings.state_db_path
    if not source.is_file() or source.is_symlink():
        return {"present": False}
    target = folder / catalog.STATE_FILE
    copy = sqlite_copy.copy_in_one_snapshot(source, target, tables=STATE_TABLES, pages_per_step=-1)
    return {
        "present": True,
        "row_counts": copy.row_counts,
        "integrity_check": sqlite_copy.integrity_check(target),
    }


def _copy_memory_blocks(settings: Settings, folder: Path) -> dict[str, Any]:
    files = _memory_block_files(settings)
    target = ensure_private_dir(folder / catalog.MEMORY_BLOCKS)
    for path in files:
        copy_private_file(path, target / path.name)
    return {
        "source": str(settings.memory_blocks_dir),
        "present": settings.memory_blocks_dir.is_dir(),
        "files": [path.name for path in files],
    }


def _hash_files(folder: Path, progress: ProgressReporter) -> dict[str, dict[str, Any]]:
    paths = sorted(
        path for path in folder.rglob("*") if path.is_file() and path.name != catalog.MANIFEST
    )
    total = sum(path.stat().st_size for path in paths)
    files: dict[str, dict[str, Any]] = {}
    with progress.bar("hashing the checkpoint", total=total) as bar:
        for path in paths:
            files[path.relative_to(folder).as_posix()] = {
                "sha256": sha256_file(path, on_bytes=bar.advance),
                "size": path.stat().st_size,
            }
    return files


def _verify_copy(
    copy_path: Path, snapshot: sqlite_copy.SnapshotCopy
) -> tuple[str, dict, list[str]]:
    integrity = sqlite_copy.integrity_check(copy_path)
    problems = [] if integrity == "ok" else [f"integrity_check on the copy: {integrity}"]
    try:
        copy_counts = sqlite_copy.counts_of(copy_path)
    except apsw.Error as error:
        copy_counts = {}
        problems.append(f"cannot count rows in the copy: {error}")
    if copy_counts and copy_counts != snapshot.row_counts:
        problems.append(
            f"row counts of the copy {copy_counts} differ from its snapshot {snapshot.row_counts}"
        )
    return integrity, copy_counts, problems


def _manifest(
    settings: Settings,
    name: str,
    kind: str,
    job: str | None,
    created_at: str,
    snapshot: sqlite_copy.SnapshotCopy,
    files: dict,
    state_info: dict,
    blocks_info: dict,
    integrity: str,
    copy_counts: dict,
    problems: list[str],
    database_info: dict[str, Any],
) -> dict[str, Any]:
    """The manifest of docs/contracts.md ("Checkpoints"), plus what helps a person later."""
    return {
        "format": MANIFEST_FORMAT,
        "layout": database_info["layout"],
        "database": database_info,
        "name": name,
        "kind": kind,
        "job": job,
        "created_at": created_at,
        "source_db": str(settings.db_path),
        "source_journal_mode": snapshot.source_journal_mode,
        "page_size": snapshot.page_size,
        "page_count": snapshot.page_count,
        "files": files,
        "row_counts": snapshot.row_counts,
        "state_db": state_info,
        "memory_blocks": blocks_info,
        "sqlite_version": database.sqlite_version(),
        "mnemosyne_version": mnemosyne_version(),
        "verification": {
            "ok": not problems,
            "integrity_check": integrity,
            "row_counts_match": bool(copy_counts) and copy_counts == snapshot.row_counts,
            "problems": problems,
            "checked_at": isoformat(utc_now()),
        },
    }


@dataclasses.dataclass(frozen=True)
class StoreSpace:
    """What a deduplicated checkpoint shares and must leave: the previous index, the free bytes
    to keep while new pages are written, and whether integrity_check runs on the snapshot."""

    previous: chunk_store.Index | None
    keep_free: int
    integrity: bool = False


def _deduplicated_database(
    settings: Settings, kind: str, folder: Path, progress: ProgressReporter, space: StoreSpace
) -> tuple[sqlite_copy.SnapshotCopy, str, dict, list[str], dict[str, Any], float]:
    """Store the snapshot's new chunks and write the checkpoint's index into `folder`.

    The pages come from SQLite inside one read snapshot and are hashed as they are stored, so
    there is no copy to check against its snapshot; ``integrity_check`` runs on that same snapshot
    for daily and manual backups (and pre-write ones with ``backup.pre_write_integrity_check``): on a
    large database it costs several times the copy, which a checkpoint before every write cannot
    afford (benchmarks/README.md).
    Verify and restore always run it on the reassembled file.
    """
    store = chunk_store.ChunkStore(settings.backups_dir)
    store.prepare()
    store.remove_temporaries()  # left by a killed checkpoint; the writer lock is ours now
    check = kind != retention.PRE_WRITE or settings.backup.pre_write_integrity_check
    started = time.perf_counter()
    shared = dataclasses.replace(space, integrity=check)
    chunked, integrity = _store_database(settings, store, folder.name, progress, shared)
    verify_s = time.perf_counter() - started - chunked.snapshot.copy_s - chunked.snapshot.counts_s
    write_new_private(folder / chunk_store.INDEX_FILE, chunked.index.to_bytes())
    problems = []
    if integrity is None:
        integrity = "not run (pre-write checkpoint: checked by verify and restore)"
    elif integrity != "ok":
        problems.append(f"integrity_check on the snapshot: {integrity}")
    index = chunked.index
    info = {
        "layout": DEDUPLICATED,
        "index": chunk_store.INDEX_FILE,
        "size": index.size,
        "page_size": index.page_size,
        "chunk_bytes": index.chunk_bytes,
        "chunk_count": len(index.chunk_digests),
        "packs": list(index.packs),
        "tree_sha256": index.tree_sha256(),
        "new_pages": chunked.new_pages,
        "new_bytes": chunked.new_bytes,
        "reused_chunks": chunked.reused_chunks,
        "integrity_checked": check,
    }
    counts = dict(chunked.snapshot.row_counts)
    return chunked.snapshot, integrity, counts, problems, info, max(verify_s, 0.0)


def create_checkpoint(
    settings: Settings,
    kind: str,
    job: str | None = None,
    progress: ProgressReporter | None = None,
    moment: datetime | None = None,
) -> CheckpointOutcome:
    """Make one checkpoint of `kind` (daily, manual or pre-write), stamped `moment` (default now).

    Returns the outcome (verified, or kept aside in failed/ when verification failed). Raises
    CheckpointError, with nothing partial left behind, when the copy itself fails.
    """
    progress = progress or ProgressReporter(False)
    database.check_database_file(settings.db_path)
    try:
        backups = ensure_private_dir(settings.backups_dir)
        # Left by a killed run; the writer lock is ours now.
        for stale in catalog.stale_temporaries(settings):
            remove_tree(stale)
        # An index a killed compaction left half replaced, before any index is read.
        catalog.finish_index_rewrites(settings.backups_dir)
    except OSError as error:
        raise CheckpointError(
            f"backup failed: {describe_os_error(error)}; nothing was written and earlier "
            "checkpoints are intact"
        ) from None
    layout = settings.backup.layout
    previous = previous_index(settings) if layout == DEDUPLICATED else None
    space = StoreSpace(previous, check_free_space(settings, shares_previous=previous is not None))
    name, created_at = _unique_name(settings, kind, job, moment)
    temporary = backups / f"{catalog.TEMP_PREFIX}{name}"
    started = time.perf_counter()
    try:
        ensure_private_dir(temporary)
        try:
            if layout == DEDUPLICATED:
                snapshot, integrity, copy_counts, problems, database_info, verify_s = (
                    _deduplicated_database(settings, kind, temporary, progress, space)
                )
            else:
                db_copy = temporary / catalog.DATABASE_FILE
                snapshot = _copy_database(settings, db_copy, progress)
                verify_started = time.perf_counter()
                integrity, copy_counts, problems = _verify_copy(db_copy, snapshot)
                verify_s = time.perf_counter() - verify_started
                database_info = {"layout": FULL_COPY, "file": catalog.DATABASE_FILE}
        except (apsw.CorruptError, apsw.NotADBError) as error:
            raise CheckpointError(
                f"the source database is corrupt ({error}); no checkpoint was made and earlier ones are intact",
                code="source-db-corrupt",
                severity="critical",
            ) from None
        except chunk_store.SpaceError as error:
            on_agent_disk = reserve.same_filesystem(settings.backups_dir, settings.db_path.parent)
            raise CheckpointError(
                f"checkpoint refused: {error}"
                + (
                    " (the rest of it, and the reserve kept for the live agent)"
                    if on_agent_disk
                    else ""
                )
                + "; the partial checkpoint was removed and earlier checkpoints are intact",
                code="backup-disk-reserve" if on_agent_disk else "backup-disk-full",
            ) from None
        except chunk_store.ChunkError as error:
            raise CheckpointError(
                f"backup failed: {error}; the partial checkpoint was removed and earlier "
                "checkpoints are intact"
            ) from None
        state_info = _copy_state(settings, temporary)
        blocks_info = _copy_memory_blocks(settings, temporary)
        hash_started = time.perf_counter()
        files = _hash_files(temporary, progress)
        hash_s = time.perf_counter() - hash_started
        source_corrupt = False
        if problems:
            # Tell a damaged source (critical: the live DB needs attention) from a bad copy.
            source_check = sqlite_copy.quick_check(settings.db_path)
            source_corrupt = source_check != "ok"
            if source_corrupt:
                problems.append(f"the source database fails quick_check: {source_check}")
        manifest = _manifest(
            settings,
            name,
            kind,
            job,
            created_at,
            snapshot,
            files,
            state_info,
            blocks_info,
            integrity,
            copy_counts,
            problems,
            database_info,
        )
        catalog.write_manifest(temporary, manifest)
        fsync_tree(temporary)
        if problems:
            destination = ensure_private_dir(backups / catalog.FAILED_DIR) / name
        else:
            destination = backups / name
        os.rename(temporary, destination)
        fsync_path(destination.parent)
    except CheckpointError:
        remove_tree(temporary)
        raise
    except (OSError, apsw.Error) as error:
        reason = _describe_failure(error, settings)  # before the cleanup frees space again
        remove_tree(temporary)
        raise CheckpointError(
            f"backup failed: {reason}; the partial checkpoint was removed and earlier checkpoints are intact",
            code="backup-disk-full" if reason.startswith("no space") else "backup-failed",
        ) from None
    except BaseException:  # a timeout or an interrupt: still leave nothing partial behind
        remove_tree(temporary)
        raise
    stats = {
        "name": name,
        "path": str(destination),
        "db_bytes": snapshot.page_size * snapshot.page_count,
        "size_bytes": sum(entry["size"] for entry in files.values()),
        "row_counts": snapshot.row_counts,
        "copy_s": snapshot.copy_s,
        "counts_s": snapshot.counts_s,
        "verify_s": round(verify_s, 3),
        "hash_s": round(hash_s, 3),
        "layout": layout,
        "total_s": round(time.perf_counter() - started, 3),
    }
    if layout == DEDUPLICATED:
        stats["size_bytes"] += database_info["new_bytes"]
        stats.update({key: database_info[key] for key in ("new_pages", "new_bytes", "chunk_count")})
    state_db_problem = None
    if state_info.get("present") and state_info.get("integrity_check") != "ok":
        state_db_problem = state_info.get("integrity_check")
        stats["state_db_problem"] = state_db_problem
    return CheckpointOutcome(
        name, destination, not problems, manifest, problems, source_corrupt, stats, state_db_problem
    )
