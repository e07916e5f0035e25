"""Find the newest verified checkpoint and spell out the command that restores it.

Reads the checkpoint layout of docs/architecture.md: ``<state_dir>/backups/<name>/manifest.json``
with ``created_at`` and ``verification.ok``; dot folders (work in progress) and ``failed/`` are not
checkpoints. Only reads, so it is safe on a damaged database and in a dry run.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from mnemo_ops.settings import Settings


def newest_verified_checkpoint(backups_dir: Path) -> str | None:
    """Name of the newest checkpoint whose manifest says it was verified, or None."""
    if not backups_dir.is_dir() or backups_dir.is_symlink():
        return None
    verified: list[tuple[str, str]] = []
    for folder in backups_dir.iterdir():
        if folder.name.startswith(".") or folder.name == "failed" or folder.is_symlink() or not folder.is_dir():
            continue
        manifest_path = folder / "manifest.json"
        if manifest_path.is_symlink():
            continue
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # unreadable or half-written manifests are not checkpoints to trust
        if not isinstance(manifest, dict) or not (manifest.get("verification") or {}).get("ok"):
            continue
        verified.append((str(manifest.get("created_at") or ""), folder.name))
    return max(verified)[1] if verified else None


def restore_command(settings: Settings, name: str) -> str:
    """The exact ``mnemo-ops backup restore NAME`` command for this database and state dir."""
    return " ".join([
        "mnemo-ops", "--db", shlex.quote(str(settings.db_path)), "--state-dir", shlex.quote(str(settings.state_dir)),
        "backup", "restore", shlex.quote(name),
    ])
