"""Backup freshness: the newest verified checkpoint's age, unverified and failed checkpoints.

Reads the checkpoint layout of docs/architecture.md ("Checkpoints") directly: one folder per
checkpoint under ``<state_dir>/backups/`` with a ``manifest.json``; work in progress in dot folders
(ignored); checkpoints that failed verification under ``backups/failed/``. Having no checkpoint at all
is tolerated (reported, not crashed on). Symlinked entries are never followed.
"""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mnemo_ops.audits import AuditOutcome
from mnemo_ops.settings import Settings

CODE_PREFIXES = ("backup-",)
BACKUP_FIX = "mnemo-ops run backup"


@dataclasses.dataclass
class Checkpoint:
    """One checkpoint as its manifest describes it (or the reason it could not be read)."""

    name: str
    path: Path
    kind: str | None = None
    created_at: datetime | None = None
    verified: bool = False
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the report."""
        return {"name": self.name, "kind": self.kind, "verified": self.verified, "problem": self.problem,
                "created_at": self.created_at.isoformat(timespec="seconds") if self.created_at else None}


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def read_checkpoint(folder: Path) -> Checkpoint:
    """Read ``folder/manifest.json``; a missing or bad manifest is recorded as the problem."""
    checkpoint = Checkpoint(name=folder.name, path=folder)
    manifest_path = folder / "manifest.json"
    try:
        if manifest_path.is_symlink():
            raise OSError("manifest.json is a symlink")
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        checkpoint.problem = "no manifest.json"
        return checkpoint
    except (OSError, ValueError) as error:
        checkpoint.problem = f"manifest.json unreadable: {error}"
        return checkpoint
    checkpoint.kind = data.get("kind") if isinstance(data.get("kind"), str) else None
    checkpoint.created_at = _parse_time(data.get("created_at"))
    verification = data.get("verification") if isinstance(data.get("verification"), dict) else {}
    checkpoint.verified = verification.get("ok") is True
    if checkpoint.created_at is None:
        checkpoint.problem = "manifest.json has no valid created_at"
    elif not checkpoint.verified:
        checkpoint.problem = f"not verified ({verification.get('integrity_check', 'no verification recorded')})"
    return checkpoint


def _folders(directory: Path) -> list[Path]:
    if not directory.is_dir() or directory.is_symlink():
        return []
    with os.scandir(directory) as entries:
        return sorted(Path(entry.path) for entry in entries
                      if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."))


def list_checkpoints(backups_dir: Path) -> tuple[list[Checkpoint], list[Checkpoint]]:
    """(checkpoints, failed checkpoints), each oldest first by creation time."""
    checkpoints = [read_checkpoint(folder) for folder in _folders(backups_dir) if folder.name != "failed"]
    failed = [read_checkpoint(folder) for folder in _folders(backups_dir / "failed")]
    key = lambda item: (item.created_at or datetime.min.replace(tzinfo=timezone.utc), item.name)  # noqa: E731
    return sorted(checkpoints, key=key), sorted(failed, key=key)


def backup_status(settings: Settings, now: datetime) -> dict[str, Any]:
    """The numbers the report shows: newest verified checkpoint, its age, counts."""
    checkpoints, failed = list_checkpoints(settings.backups_dir)
    verified = [item for item in checkpoints if item.verified and item.created_at]
    newest = verified[-1] if verified else None
    return {
        "checkpoints": len(checkpoints),
        "verified": len(verified),
        "unverified": [item.to_dict() for item in checkpoints if item.problem],
        "failed": [item.to_dict() for item in failed],
        # Failed attempts since the newest verified checkpoint: older ones were already superseded.
        "failed_since_newest": [item.to_dict() for item in failed
                                if newest is None or (item.created_at and item.created_at > newest.created_at)],
        "newest_verified": newest.to_dict() if newest else None,
        "newest_age_hours": round((now - newest.created_at).total_seconds() / 3600, 1) if newest else None,
    }


def audit(settings: Settings, now: datetime) -> AuditOutcome:
    """Flag no checkpoint, a stale newest checkpoint, unverified and failed checkpoints."""
    outcome = AuditOutcome("backups")
    status = backup_status(settings, now)
    outcome.stats.update({key: status[key] for key in ("checkpoints", "verified", "newest_age_hours")})
    outcome.stats["failed"] = len(status["failed"])
    warn_hours = settings.option("nightly_selfcare.backup_warn_hours", 26)
    error_hours = settings.option("nightly_selfcare.backup_error_hours", 72)
    age = status["newest_age_hours"]
    if age is None:
        outcome.warn("backup-missing", "error", f"no verified checkpoint in {settings.backups_dir}", fix=BACKUP_FIX)
    elif age > error_hours:
        outcome.warn("backup-stale", "error", f"the newest verified checkpoint is {age:.0f} hours old "
                     f"({status['newest_verified']['name']})", fix=BACKUP_FIX)
    elif age > warn_hours:
        outcome.warn("backup-stale", "warning", f"the newest verified checkpoint is {age:.0f} hours old "
                     f"({status['newest_verified']['name']})", fix=BACKUP_FIX)
    for item in status["unverified"]:
        outcome.warn("backup-unverified", "warning", f"checkpoint {item['name']}: {item['problem']}",
                     fix=f"mnemo-ops backup verify {item['name']}")
    for item in status["failed_since_newest"]:
        outcome.warn("backup-failed", "warning",
                     f"checkpoint {item['name']} failed verification and was set aside in backups/failed/",
                     fix=BACKUP_FIX)
    return outcome
