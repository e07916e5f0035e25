"""The checkpoint catalog: names, manifests, listing, and retention's facts and removals.

Which checkpoints retention keeps is decided in ``checkpoints/retention.py`` from plain facts; this
module gathers them (the folders, the ledger's runs) and removes the folders the plan names.

Layout (docs/contracts.md, "Checkpoints")::

    <state_dir>/backups/<name>/            a verified checkpoint (0700)
    <state_dir>/backups/.tmp-<name>/       work in progress (readers ignore dot folders)
    <state_dir>/backups/failed/<name>/     a checkpoint that failed verification (never counts)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo_ops.checkpoints import chunk_store, retention
from mnemo_ops.checkpoints.files import remove_tree, tree_size
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.foundation.private_files import PRIVATE_FILE_MODE, fsync_path, write_new_private
from mnemo_ops.settings import Settings

MANIFEST = "manifest.json"
DATABASE_FILE = "mnemosyne.db"
STATE_FILE = "state.db"
MEMORY_BLOCKS = "memory_blocks"
FAILED_DIR = "failed"
TEMP_PREFIX = ".tmp-"
KINDS = (retention.DAILY, retention.MANUAL, retention.PRE_WRITE)
NAME_PATTERN = re.compile(r"^(daily|manual|pre-[a-z0-9-]+)-\d{8}T\d{6}Z(-\d+)?$")


def stamp(moment: datetime) -> str:
    """The name stamp of a UTC moment: ``YYYYmmddTHHMMSSZ``."""
    return moment.strftime("%Y%m%dT%H%M%SZ")


def checkpoint_name(kind: str, job: str | None, moment: datetime) -> str:
    """``daily-<stamp>``, ``manual-<stamp>`` or ``pre-<job>-<stamp>``."""
    if kind in (retention.DAILY, retention.MANUAL):
        return f"{kind}-{stamp(moment)}"
    return f"pre-{job or 'write'}-{stamp(moment)}"


def valid_name(name: str) -> bool:
    """True for a name this tool could have made (no path separators, no dots, our pattern)."""
    return bool(NAME_PATTERN.match(name))


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` (0600, fsynced) into `folder`."""
    path = folder / MANIFEST
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(_manifest_text(manifest))
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(path, PRIVATE_FILE_MODE)


def _manifest_text(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The parsed manifest of a checkpoint folder, or None when missing, a symlink, or unreadable."""
    path = folder / MANIFEST
    if path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclasses.dataclass
class CheckpointInfo:
    """One checkpoint as listed: where it is, what kind, when, how big, verified or not."""

    name: str
    kind: str
    job: str | None
    created_at: str | None
    path: Path
    size_bytes: int
    verified: bool
    failed: bool
    manifest: dict[str, Any] | None

    @property
    def database_bytes(self) -> int | None:
        """The size of the database it restores (None when its manifest cannot tell)."""
        manifest = self.manifest or {}
        if manifest.get("layout") == "deduplicated":
            size = (manifest.get("database") or {}).get("size")
        else:
            size = ((manifest.get("files") or {}).get(DATABASE_FILE) or {}).get("size")
        return size if isinstance(size, int) else None

    @property
    def added_bytes(self) -> int:
        """What keeping it costs on disk: its folder, plus, in the deduplicated layout, the pages
        it added to the store when it was made (pages it shares with others are counted once, by
        the checkpoint that brought them)."""
        new = ((self.manifest or {}).get("database") or {}).get("new_bytes")
        return self.size_bytes + (new if isinstance(new, int) else 0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``backup list --json``."""
        return {
            "name": self.name,
            "kind": self.kind,
            "created_at": self.created_at,
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "database_bytes": self.database_bytes,
            "added_bytes": self.added_bytes,
            "verified": self.verified,
            "job": self.job,
            "status": "failed" if self.failed else ("verified" if self.verified else "unverified"),
        }


def _kind_of_name(name: str) -> str:
    for kind in (retention.DAILY, retention.MANUAL):
        if name.startswith(f"{kind}-"):
            return kind
    return retention.PRE_WRITE


def _info(folder: Path, failed: bool) -> CheckpointInfo:
    manifest = read_manifest(folder)
    verification = (manifest or {}).get("verification") or {}
    return CheckpointInfo(
        name=folder.name,
        kind=(manifest or {}).get("kind") or _kind_of_name(folder.name),
        job=(manifest or {}).get("job"),
        created_at=(manifest or {}).get("created_at"),
        path=folder,
        size_bytes=tree_size(folder),
        verified=bool(verification.get("ok")) and not failed,
        failed=failed,
        manifest=manifest,
    )


def _folders(directory: Path) -> list[Path]:
    if not directory.is_dir() or directory.is_symlink():
        return []
    return [
        entry
        for entry in directory.iterdir()
        if entry.is_dir() and not entry.is_symlink() and valid_name(entry.name)
    ]


def list_checkpoints(settings: Settings, include_failed: bool = True) -> list[CheckpointInfo]:
    """Every checkpoint (and failed one), oldest first; dot folders (work in progress) are ignored."""
    return list_folder(settings.backups_dir, include_failed)


def list_folder(backups_dir: Path, include_failed: bool = True) -> list[CheckpointInfo]:
    """`list_checkpoints` for a backups folder given directly (audits, restore hints)."""
    found = [_info(folder, failed=False) for folder in _folders(backups_dir)]
    if include_failed:
        found += [_info(folder, failed=True) for folder in _folders(backups_dir / FAILED_DIR)]
    return sorted(found, key=lambda info: (info.created_at or "", info.name))


def newest_verified_checkpoint(backups_dir: Path) -> str | None:
    """Name of the newest checkpoint whose manifest says it was verified, or None."""
    verified = [info for info in list_folder(backups_dir, include_failed=False) if info.verified]
    return verified[-1].name if verified else None


def restore_command(settings: Settings, name: str) -> str:
    """The exact ``mnemo-ops backup restore NAME`` command for this database and state dir."""
    return " ".join(
        [
            "mnemo-ops",
            "--db",
            shlex.quote(str(settings.db_path)),
            "--state-dir",
            shlex.quote(str(settings.state_dir)),
            "backup",
            "restore",
            shlex.quote(name),
        ]
    )


def find_checkpoint(settings: Settings, name: str) -> CheckpointInfo:
    """The checkpoint called `name` (good or failed); UsageError (exit 2) when there is none."""
    if not valid_name(name):
        raise UsageError(f"not a checkpoint name: {name!r} (see: mnemo-ops backup list)")
    for info in list_checkpoints(settings):
        if info.name == name:
            return info
    raise UsageError(
        f"no checkpoint named {name!r} in {settings.backups_dir} (see: mnemo-ops backup list)"
    )


def stale_temporaries(settings: Settings) -> list[Path]:
    """``.tmp-*`` folders left by a run that was killed (the writer lock makes them stale)."""
    directory = settings.backups_dir
    if not directory.is_dir() or directory.is_symlink():
        return []
    return [
        entry
        for entry in directory.iterdir()
        if entry.name.startswith(TEMP_PREFIX) and entry.is_dir() and not entry.is_symlink()
    ]


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _stamp_moment(name: str) -> datetime | None:
    """The moment in a checkpoint's name, for a manifest without a readable created_at."""
    match = re.search(r"(\d{8}T\d{6}Z)", name)
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def retention_view(info: CheckpointInfo) -> retention.Checkpoint:
    """What retention needs to know of one listed checkpoint."""
    return retention.Checkpoint(
        name=info.name,
        kind=info.kind,
        created_at=_moment(info.created_at) or _stamp_moment(info.name),
        verified=info.verified,
        failed=info.failed,
        job=info.job,
    )


def run_uses(settings: Settings) -> list[retention.RunUse]:
    """The ledger's real runs of jobs that write the database after a checkpoint
    (``checkpoint: before-write``), with the checkpoint each started from (read-only).

    The backup job's own runs are left out: the checkpoint it makes undoes none of its work.
    """
    # Imported here: the ledger and the manifests are read only for retention, and the checkpoint
    # child that every writing job starts would otherwise load them (and sqlite-utils) for nothing.
    from mnemo_ops.core import state
    from mnemo_ops.core.manifests import effective_manifests

    writers = {
        name
        for name, manifest in effective_manifests(settings).items()
        if manifest.checkpoint == "before-write"
    }
    ledger = state.open_state_readonly(settings.state_db_path)
    try:
        rows = state.checkpoint_uses(ledger)
    finally:
        if ledger is not None:
            ledger.close()
    uses = []
    for row in rows:
        started = _moment(row["started_at"])
        if started is not None and row["job"] in writers:
            uses.append(
                retention.RunUse(row["job"], started, row["status"] == "ok", row["checkpoint"])
            )
    return uses


def limits(settings: Settings) -> retention.Limits:
    """The counts of the ``backup`` section, as retention takes them."""
    options = settings.backup
    return retention.Limits(
        daily=options.keep,
        manual=options.manual_keep,
        pre_write=options.pre_write_keep,
        failed=options.keep,
    )


def plan_retention(
    settings: Settings, incoming: retention.Checkpoint | None = None
) -> retention.RetentionPlan:
    """Retention's plan for this backups folder; with `incoming`, as if that checkpoint were made
    (what a dry run reports)."""
    checkpoints = [retention_view(info) for info in list_checkpoints(settings)]
    if incoming is not None:
        checkpoints.append(incoming)
    return retention.plan(checkpoints, run_uses(settings), limits(settings))


def backup_kind(settings: Settings, moment: datetime) -> str:
    """The kind ``run backup`` makes at `moment`: the day's daily, or a manual one."""
    checkpoints = [retention_view(info) for info in list_checkpoints(settings)]
    return retention.kind_for_backup(checkpoints, moment)


def remove_checkpoints(infos: list[CheckpointInfo]) -> list[str]:
    """Remove the given checkpoint folders; return their names."""
    removed = []
    for info in infos:
        remove_tree(info.path)
        removed.append(info.name)
    if infos:
        fsync_path(infos[0].path.parent)
    return removed


def apply_retention(settings: Settings) -> list[str]:
    """Remove what retention's plan names (every kind, and old failed ones), then the chunks no
    remaining checkpoint references; return the names removed."""
    doomed = set(plan_retention(settings).removals())
    removed = remove_checkpoints(
        [info for info in list_checkpoints(settings) if info.name in doomed]
    )
    collect_chunks(settings)
    return removed


def referenced_packs(backups_dir: Path) -> set[str] | None:
    """Every pack named by a checkpoint still in the folder (verified, failed, unverified, or
    left half-made by a kill), or None when one of them might reference packs but its index
    cannot be read: then nothing may be collected."""
    folders = checkpoint_folders(backups_dir)
    if backups_dir.is_dir() and not backups_dir.is_symlink():
        folders += [
            entry
            for entry in backups_dir.iterdir()
            if entry.name.startswith(TEMP_PREFIX) and entry.is_dir() and not entry.is_symlink()
        ]
    referenced: set[str] = set()
    for folder in folders:
        index = folder / chunk_store.INDEX_FILE
        manifest = read_manifest(folder)
        if not index.exists() and not index.is_symlink():
            if manifest is None and not (folder / DATABASE_FILE).is_file():
                # Nothing tells what it is: a person looks at it; keep every chunk meanwhile.
                if not folder.name.startswith(TEMP_PREFIX):
                    return None
            elif (manifest or {}).get("layout") == "deduplicated":
                return None
            continue
        try:
            referenced.update(chunk_store.read_index(index).packs)
        except chunk_store.ChunkError:
            return None
    return referenced


REWRITE_SUFFIX = ".new"
"""A checkpoint's index and manifest being replaced by compaction: both are written under this
suffix (fsynced) before either is renamed into place, so a run killed between the two renames is
finished by the next one (`finish_index_rewrites`)."""


def checkpoint_folders(backups_dir: Path) -> list[Path]:
    """Every checkpoint folder, failed ones included (no work in progress)."""
    return _folders(backups_dir) + _folders(backups_dir / FAILED_DIR)


def rewrite_index(folder: Path, index: chunk_store.Index) -> None:
    """Replace a deduplicated checkpoint's index by `index` (the same database, its pages in other
    packs) and its manifest's record of it, so that a kill at any point leaves either the old pair
    or the new one (a half-renamed pair is finished by `finish_index_rewrites`)."""
    manifest = read_manifest(folder)
    if manifest is None:
        raise chunk_store.ChunkError(f"{folder / MANIFEST} cannot be read")
    data = index.to_bytes()
    manifest = json.loads(json.dumps(manifest))  # a copy: the caller's stays as it was
    manifest["files"][chunk_store.INDEX_FILE] = {
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    manifest.setdefault("database", {})["packs"] = list(index.packs)
    index_path = folder / chunk_store.INDEX_FILE
    manifest_path = folder / MANIFEST
    new_index = index_path.with_name(index_path.name + REWRITE_SUFFIX)
    new_manifest = manifest_path.with_name(manifest_path.name + REWRITE_SUFFIX)
    for path, content in ((new_index, data), (new_manifest, _manifest_text(manifest).encode())):
        # A leftover of a killed run goes first (a symlink is removed, never followed).
        path.unlink(missing_ok=True)
        write_new_private(path, content)
    fsync_path(folder)
    os.rename(new_index, index_path)
    os.rename(new_manifest, manifest_path)
    fsync_path(folder)


def finish_index_rewrites(backups_dir: Path) -> int:
    """Finish the index rewrites a killed compaction left (the writer lock is held); return how
    many folders were finished.

    The new manifest is written last, so its presence means both new files are whole: the pair is
    renamed into place. A new index alone is a rewrite that never started; it is removed.
    """
    finished = 0
    for folder in checkpoint_folders(backups_dir):
        new_index = folder / f"{chunk_store.INDEX_FILE}{REWRITE_SUFFIX}"
        new_manifest = folder / f"{MANIFEST}{REWRITE_SUFFIX}"
        if new_manifest.is_file() and not new_manifest.is_symlink():
            if new_index.is_file() and not new_index.is_symlink():
                os.rename(new_index, folder / chunk_store.INDEX_FILE)
            os.rename(new_manifest, folder / MANIFEST)
            fsync_path(folder)
            finished += 1
        elif new_index.exists() or new_index.is_symlink():
            new_index.unlink()
    return finished


def collect_chunks(settings: Settings) -> tuple[int, int]:
    """Remove the packs no checkpoint in the backups folder references (the writer lock is held:
    no checkpoint is being made); return (files, bytes) removed, (0, 0) when unsure."""
    store = chunk_store.ChunkStore(settings.backups_dir)
    if not store.packs.is_dir() or store.packs.is_symlink():
        return 0, 0
    # A rewrite a kill left half done may name packs only its new index names: finish it first.
    finish_index_rewrites(settings.backups_dir)
    referenced = referenced_packs(settings.backups_dir)
    if referenced is None:
        return 0, 0
    return store.collect_garbage(referenced)
