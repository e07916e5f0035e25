"""A second copy of each verified backup (``backup.copy_to``): another disk, or another machine
through rsync or rclone.

The copy is made in two steps, so the writer lock is held only for the instant one:

1. `stage` (under the lock): hard links of the checkpoint's files and of the packs its index
   names, laid out as a backups folder of their own in ``<backups>/.copy-<name>/``. Links cost no
   space and no time, and they keep those exact bytes even if retention or compaction removes or
   replaces the originals while the copy runs (packs are never changed in place, indexes are
   replaced by rename).
2. `copy` (without the lock: copies are slow): the staged folder goes to the target, is verified
   there, and the target's own retention runs. A folder target holds a backups folder like ours
   (``<copy_to>/<name>/``, ``<copy_to>/store/packs/``), so the copy is verified exactly as a
   checkpoint is (every file's sha256 against the manifest, every chunk against its sha256,
   integrity_check and the row counts), and its manifest must be byte for byte the original's.
   rsync and rclone targets are checked by the tool itself, comparing content.

Nothing here follows a symlink: a symlink in place of the target folder, its store, a checkpoint
folder or a staged file is refused, and new files are created with ``O_EXCL`` (0600; folders 0700).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from mnemo_ops.checkpoints import catalog, chunk_store
from mnemo_ops.checkpoints.catalog import CheckpointInfo
from mnemo_ops.checkpoints.files import copy_private_file, fsync_tree, remove_tree, tree_size
from mnemo_ops.checkpoints.verify import verify_checkpoint
from mnemo_ops.foundation.errors import ConfigError
from mnemo_ops.foundation.private_files import (
    PRIVATE_DIR_MODE,
    ensure_private_dir,
    fsync_path,
    sha256_file,
)
from mnemo_ops.settings import Settings

STAGING_PREFIX = ".copy-"
"""``<backups>/.copy-<name>/``: a checkpoint staged for its copy (readers ignore dot folders)."""
TOOLS = ("rsync", "rclone")
TOOL_TIMEOUT_S = 3600
"""How long one rsync or rclone call may take (the job's own timeout still applies)."""


class CopyError(Exception):
    """The copy could not be made or did not verify (one line naming the file or target)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the second copy goes: a folder, or `location` through rsync or rclone."""

    kind: str  # "folder" | "rsync" | "rclone"
    location: str

    @property
    def folder(self) -> Path:
        """The target folder (folder targets only)."""
        return Path(self.location).expanduser()

    def describe(self) -> str:
        """The target as the user wrote it."""
        return self.location if self.kind == "folder" else f"{self.kind}:{self.location}"


def parse_target(text: str) -> Target:
    """``/folder`` or ``~/folder``, ``rsync:HOST:PATH``, ``rclone:REMOTE:PATH`` (the settings
    model has already checked the form)."""
    if text.startswith(("/", "~")):
        return Target("folder", text)
    tool, _, location = text.partition(":")
    if tool not in TOOLS or not (":" in location or location.startswith("/")):
        raise ConfigError(f"backup.copy_to: not a folder or rsync/rclone target: {text!r}")
    return Target(tool, location)


def configured_target(settings: Settings) -> Target | None:
    """The ``backup.copy_to`` target, or None when no second copy is wanted."""
    text = settings.backup.copy_to
    return parse_target(text) if text else None


def require_tool(target: Target) -> None:
    """Refuse (exit 2, one line) a target whose tool is not on PATH: found before anything is
    written, rather than after every night's backup."""
    if target.kind in TOOLS and shutil.which(target.kind) is None:
        raise ConfigError(
            f"backup.copy_to {target.describe()!r} needs {target.kind}, which is not on PATH: "
            f"install it, or point copy_to at a folder"
        )


def staging_folder(settings: Settings, name: str) -> Path:
    """Where checkpoint `name` is staged for its copy."""
    return settings.backups_dir / f"{STAGING_PREFIX}{name}"


def _link_or_copy(source: Path, target: Path) -> None:
    if source.is_symlink() or not source.is_file():
        raise CopyError(f"{source} is not a regular file; a checkpoint never holds a symlink")
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:  # a filesystem without hard links: a private copy instead
        copy_private_file(source, target)


def checkpoint_packs(info: CheckpointInfo) -> list[Path]:
    """The pack files a deduplicated checkpoint's index names ([] for a full copy)."""
    index_path = info.path / chunk_store.INDEX_FILE
    if not index_path.exists() and not index_path.is_symlink():
        return []
    store = chunk_store.ChunkStore(info.path.parent)
    return [store.path_for(pack) for pack in chunk_store.read_index(index_path).packs]


def stage(settings: Settings, info: CheckpointInfo) -> Path:
    """Hard-link checkpoint `info` and its packs into ``<backups>/.copy-<name>/`` (call it under
    the writer lock: the checkpoint and its packs cannot change meanwhile); return the folder."""
    staged = staging_folder(settings, info.name)
    remove_tree(staged)
    folder = ensure_private_dir(staged / info.name)
    for directory, folders, files in os.walk(info.path):
        relative = Path(directory).relative_to(info.path)
        for name in folders:
            if (Path(directory) / name).is_symlink():
                raise CopyError(f"{Path(directory) / name} is a symlink; it is not copied")
            ensure_private_dir(folder / relative / name)
        for name in files:
            _link_or_copy(Path(directory) / name, folder / relative / name)
    packs = checkpoint_packs(info)
    if packs:
        store = chunk_store.ChunkStore(staged)
        store.prepare()
        for pack in packs:
            _link_or_copy(pack, store.packs / pack.name)
    return staged


def remove_stale_stagings(settings: Settings, older_than_s: float) -> list[str]:
    """Remove staged copies left by a killed run: older than `older_than_s` (the backup job's
    timeout), so a copy still running beside this run keeps its own."""
    directory = settings.backups_dir
    if not directory.is_dir() or directory.is_symlink():
        return []
    removed = []
    for entry in directory.iterdir():
        if not entry.name.startswith(STAGING_PREFIX) or entry.is_symlink():
            continue
        if time.time() - entry.lstat().st_mtime > older_than_s:
            remove_tree(entry)
            removed.append(entry.name)
    return removed


@dataclasses.dataclass
class CopyOutcome:
    """What one copy did: where, how much it wrote, and what the target's retention removed."""

    target: str
    name: str
    files_copied: int = 0
    bytes_copied: int = 0
    already_there: bool = False
    verified: bool = False
    removed: list[str] = dataclasses.field(default_factory=list)
    packs_removed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``stats.copy`` of the backup run)."""
        return dataclasses.asdict(self)


def copy(staged: Path, name: str, target: Target, keep: int) -> CopyOutcome:
    """Copy the staged checkpoint `name` to `target`, verify it there, then apply the target's
    retention (folders only). CopyError (one line) when it cannot be made or does not verify."""
    if target.kind == "folder":
        return _copy_to_folder(staged, name, target, keep)
    return _copy_with_tool(staged, name, target)


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise CopyError(f"{path} is a symlink; the backup copy never follows one")


def _copy_file(source: Path, target: Path, outcome: CopyOutcome) -> None:
    outcome.bytes_copied += copy_private_file(source, target)
    outcome.files_copied += 1


def _copy_to_folder(staged: Path, name: str, target: Target, keep: int) -> CopyOutcome:
    root = target.folder
    outcome = CopyOutcome(target.describe(), name)
    _refuse_link(root)
    if not root.is_dir():
        # Never created here: a second disk that is not mounted would be filled on the first.
        raise CopyError(f"{root} does not exist (is the disk mounted? create the folder once)")
    os.chmod(root, PRIVATE_DIR_MODE)
    final = root / name
    _refuse_link(final)
    store = chunk_store.ChunkStore(root)
    staged_store = chunk_store.ChunkStore(staged)
    if staged_store.packs.is_dir():
        for path in (staged_store.root, staged_store.packs):
            _refuse_link(root / path.relative_to(staged))
        store.prepare()
        for pack in sorted(staged_store.packs.iterdir()):
            there = store.packs / pack.name
            _refuse_link(there)
            if there.is_file() and there.stat().st_size == pack.stat().st_size:
                continue  # packs never change under their name; the verification reads it all
            temporary = store.packs / f"{chunk_store.TEMP_PREFIX}{pack.name}"
            temporary.unlink(missing_ok=True)
            _copy_file(pack, temporary, outcome)
            os.rename(temporary, there)
        fsync_path(store.packs)
    if final.is_dir():
        outcome.already_there = True
    else:
        temporary = root / f"{catalog.TEMP_PREFIX}{name}"
        _refuse_link(temporary)
        remove_tree(temporary)
        source = staged / name
        for directory, _folders, files in os.walk(source):
            relative = Path(directory).relative_to(source)
            ensure_private_dir(temporary / relative)
            for file_name in files:
                _copy_file(Path(directory) / file_name, temporary / relative / file_name, outcome)
        fsync_tree(temporary)
        os.rename(temporary, final)
        fsync_path(root)
    _verify_folder_copy(staged, name, root)
    outcome.verified = True
    outcome.removed, outcome.packs_removed = apply_copy_retention(root, keep, name)
    return outcome


def _verify_folder_copy(staged: Path, name: str, root: Path) -> None:
    """The copy is the checkpoint: its manifest is the original's, and it verifies as one."""
    copied = next(
        (info for info in catalog.list_folder(root, include_failed=False) if info.name == name),
        None,
    )
    problem = None
    if copied is None:
        problem = "it is not in the folder after copying"
    elif sha256_file(copied.path / catalog.MANIFEST) != sha256_file(
        staged / name / catalog.MANIFEST
    ):
        problem = "its manifest.json differs from the original's"
    else:
        report = verify_checkpoint(copied)
        if not report.ok:
            problem = report.problems[0]
    if problem is not None:
        # A copy that does not verify is no copy: it goes, so it is never taken for a good one.
        remove_tree(root / name)
        raise CopyError(f"the copy of {name} in {root} failed verification: {problem}")


def copy_retention_plan(root: Path, keep: int, newest: str | None = None) -> list[CheckpointInfo]:
    """The checkpoints of a copy folder its retention removes: all but the newest `keep`
    (`newest`, the one just copied, always stays)."""
    copies = catalog.list_folder(root, include_failed=False)
    kept = {info.name for info in copies[len(copies) - keep :]} if keep > 0 else set()
    kept |= {newest} if newest else set()
    return [info for info in copies if info.name not in kept]


def apply_copy_retention(root: Path, keep: int, newest: str) -> tuple[list[str], int]:
    """Remove the copies retention names, then the packs no remaining copy names; return the
    names removed and how many packs went."""
    removed = catalog.remove_checkpoints(copy_retention_plan(root, keep, newest))
    referenced = catalog.referenced_packs(root)
    packs = 0
    store = chunk_store.ChunkStore(root)
    if referenced is not None and store.packs.is_dir() and not store.packs.is_symlink():
        packs, _ = store.collect_garbage(referenced)
    return removed, packs


def _run_tool(command: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CopyError(f"{what}: {command[0]} did not run: {error}") from None
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or ["no message"])[-1]
        raise CopyError(f"{what}: {command[0]} exited {completed.returncode}: {last}")
    return completed


def _copy_with_tool(staged: Path, name: str, target: Target) -> CopyOutcome:
    """rsync or rclone: copy the staged backups folder into the target (packs already there are
    skipped by the tool), then have the tool compare content, not dates and sizes."""
    require_tool(target)
    outcome = CopyOutcome(target.describe(), name)
    source = f"{staged}/"
    destination = target.location.rstrip("/") + "/"
    if target.kind == "rsync":
        # Permissions set on the far side too; --checksum on the second pass compares content.
        base = ["rsync", "--recursive", "--times", "--chmod=D0700,F0600"]
        _run_tool([*base, "--", source, destination], f"copying {name}")
        check = _run_tool(
            [*base, "--checksum", "--dry-run", "--itemize-changes", "--", source, destination],
            f"checking the copy of {name}",
        )
        differing = [line for line in check.stdout.splitlines() if line[:1] in "<>ch*"]
        if differing:
            raise CopyError(f"the copy of {name} at {target.describe()} differs: {differing[0]}")
    else:
        _run_tool(["rclone", "copy", source, destination], f"copying {name}")
        _run_tool(
            ["rclone", "check", "--one-way", "--download", source, destination],
            f"checking the copy of {name}",
        )
    outcome.files_copied = sum(len(files) for _d, _f, files in os.walk(staged))
    outcome.bytes_copied = tree_size(staged)
    outcome.verified = True
    return outcome
