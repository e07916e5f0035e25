"""The checkpoint catalog: names, manifests, listing, and retention.

Layout (docs/architecture.md, "Checkpoints")::

    <state_dir>/backups/<name>/            a verified checkpoint (0700)
    <state_dir>/backups/.tmp-<name>/       work in progress (readers ignore dot folders)
    <state_dir>/backups/failed/<name>/     a checkpoint that failed verification (never counts)
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo_ops.checkpoints.files import remove_tree, tree_size
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.foundation.private_files import PRIVATE_FILE_MODE, fsync_path
from mnemo_ops.settings import Settings

MANIFEST = "manifest.json"
DATABASE_FILE = "mnemosyne.db"
STATE_FILE = "state.db"
MEMORY_BLOCKS = "memory_blocks"
FAILED_DIR = "failed"
TEMP_PREFIX = ".tmp-"
KINDS = ("daily", "pre-write")
NAME_PATTERN = re.compile(r"^(daily|pre-[a-z0-9-]+)-\d{8}T\d{6}Z(-\d+)?$")


def stamp(moment: datetime) -> str:
    """The name stamp of a UTC moment: ``YYYYmmddTHHMMSSZ``."""
    return moment.strftime("%Y%m%dT%H%M%SZ")


def checkpoint_name(kind: str, job: str | None, moment: datetime) -> str:
    """``daily-<stamp>`` or ``pre-<job>-<stamp>``."""
    if kind == "daily":
        return f"daily-{stamp(moment)}"
    return f"pre-{job or 'write'}-{stamp(moment)}"


def valid_name(name: str) -> bool:
    """True for a name this tool could have made (no path separators, no dots, our pattern)."""
    return bool(NAME_PATTERN.match(name))


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` (0600, fsynced) into `folder`."""
    path = folder / MANIFEST
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(path, PRIVATE_FILE_MODE)


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

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``backup list --json``."""
        return {
            "name": self.name,
            "kind": self.kind,
            "created_at": self.created_at,
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "verified": self.verified,
            "job": self.job,
            "status": "failed" if self.failed else ("verified" if self.verified else "unverified"),
        }


def _info(folder: Path, failed: bool) -> CheckpointInfo:
    manifest = read_manifest(folder)
    verification = (manifest or {}).get("verification") or {}
    return CheckpointInfo(
        name=folder.name,
        kind=(manifest or {}).get("kind")
        or ("daily" if folder.name.startswith("daily-") else "pre-write"),
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


def retention_plan(settings: Settings, kind: str, keep: int) -> list[CheckpointInfo]:
    """Verified checkpoints of `kind` beyond the newest `keep`: what retention removes.

    Only verified checkpoints count and only they are removed, so a bad night never pushes out a good
    checkpoint. Failed ones live in failed/ and are pruned separately.
    """
    verified = [
        info
        for info in list_checkpoints(settings, include_failed=False)
        if info.kind == kind and info.verified
    ]
    return verified[:-keep] if keep > 0 and len(verified) > keep else []


def failed_plan(settings: Settings, keep: int) -> list[CheckpointInfo]:
    """Failed checkpoints beyond the newest `keep` (kept for inspection, but not forever)."""
    failed = [info for info in list_checkpoints(settings) if info.failed]
    return failed[:-keep] if keep > 0 and len(failed) > keep else []


def remove_checkpoints(infos: list[CheckpointInfo]) -> list[str]:
    """Remove the given checkpoint folders; return their names."""
    removed = []
    for info in infos:
        remove_tree(info.path)
        removed.append(info.name)
    if infos:
        fsync_path(infos[0].path.parent)
    return removed


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


def keep_count(settings: Settings, kind: str) -> int:
    """How many verified checkpoints of `kind` are kept (``backup.keep`` / ``backup.pre_write_keep``)."""
    return settings.backup.keep if kind == "daily" else settings.backup.pre_write_keep


def planned_removals(settings: Settings, kind: str) -> list[CheckpointInfo]:
    """What retention will remove once one more verified checkpoint of `kind` exists."""
    keep = keep_count(settings, kind)
    if keep > 1:
        return retention_plan(settings, kind, keep - 1)
    return [
        info
        for info in list_checkpoints(settings, include_failed=False)
        if info.kind == kind and info.verified
    ]


def apply_retention(settings: Settings, kind: str) -> list[str]:
    """Remove verified checkpoints of `kind` beyond the newest `keep`, and old failed ones; return names."""
    removed = remove_checkpoints(retention_plan(settings, kind, keep_count(settings, kind)))
    removed += remove_checkpoints(failed_plan(settings, keep_count(settings, "daily")))
    return removed
