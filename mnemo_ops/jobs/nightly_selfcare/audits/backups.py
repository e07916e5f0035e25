"""Backup freshness: the newest verified checkpoint's age, unverified and failed checkpoints.

Checkpoints are listed by the backup job's own catalog (``mnemo_ops.checkpoints.catalog``): one folder
per checkpoint under ``<state_dir>/backups/`` with a ``manifest.json``; work in progress in dot folders
(ignored); checkpoints that failed verification under ``backups/failed/``. Having no checkpoint at all
is tolerated (reported, not crashed on). Symlinked entries are never followed.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo_ops.checkpoints import catalog
from mnemo_ops.jobs.nightly_selfcare.audits.outcome import AuditOutcome
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
        return {
            "name": self.name,
            "kind": self.kind,
            "verified": self.verified,
            "problem": self.problem,
            "created_at": self.created_at.isoformat(timespec="seconds")
            if self.created_at
            else None,
        }


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _checkpoint(info: catalog.CheckpointInfo) -> Checkpoint:
    """The audit's view of one catalog entry, with the reason it cannot be trusted, if any."""
    checkpoint = Checkpoint(name=info.name, path=info.path)
    manifest = info.manifest
    if manifest is None:
        present = (info.path / catalog.MANIFEST).exists() or (
            info.path / catalog.MANIFEST
        ).is_symlink()
        checkpoint.problem = (
            "manifest.json unreadable (or a symlink)" if present else "no manifest.json"
        )
        return checkpoint
    checkpoint.kind = manifest.get("kind") if isinstance(manifest.get("kind"), str) else None
    checkpoint.created_at = _parse_time(manifest.get("created_at"))
    verification = (
        manifest.get("verification") if isinstance(manifest.get("verification"), dict) else {}
    )
    checkpoint.verified = verification.get("ok") is True
    if checkpoint.created_at is None:
        checkpoint.problem = "manifest.json has no valid created_at"
    elif not checkpoint.verified:
        checkpoint.problem = (
            f"not verified ({verification.get('integrity_check', 'no verification recorded')})"
        )
    return checkpoint


def list_checkpoints(backups_dir: Path) -> tuple[list[Checkpoint], list[Checkpoint]]:
    """(checkpoints, failed checkpoints), each oldest first by creation time, as the catalog lists them."""
    entries = catalog.list_folder(backups_dir)
    checkpoints = [_checkpoint(info) for info in entries if not info.failed]
    failed = [_checkpoint(info) for info in entries if info.failed]
    key = lambda item: (item.created_at or datetime.min.replace(tzinfo=UTC), item.name)  # noqa: E731
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
        "failed_since_newest": [
            item.to_dict()
            for item in failed
            if newest is None or (item.created_at and item.created_at > newest.created_at)
        ],
        "newest_verified": newest.to_dict() if newest else None,
        "newest_age_hours": round((now - newest.created_at).total_seconds() / 3600, 1)
        if newest
        else None,
    }


def audit(settings: Settings, now: datetime) -> AuditOutcome:
    """Flag no checkpoint, a stale newest checkpoint, unverified and failed checkpoints."""
    outcome = AuditOutcome("backups")
    status = backup_status(settings, now)
    outcome.stats.update(
        {key: status[key] for key in ("checkpoints", "verified", "newest_age_hours")}
    )
    outcome.stats["failed"] = len(status["failed"])
    warn_hours = settings.nightly_selfcare.backup_warn_hours
    error_hours = settings.nightly_selfcare.backup_error_hours
    age = status["newest_age_hours"]
    if age is None:
        outcome.warn(
            "backup-missing",
            "error",
            f"no verified checkpoint in {settings.backups_dir}",
            fix=BACKUP_FIX,
        )
    elif age > error_hours:
        outcome.warn(
            "backup-stale",
            "error",
            f"the newest verified checkpoint is {age:.0f} hours old "
            f"({status['newest_verified']['name']})",
            fix=BACKUP_FIX,
        )
    elif age > warn_hours:
        outcome.warn(
            "backup-stale",
            "warning",
            f"the newest verified checkpoint is {age:.0f} hours old "
            f"({status['newest_verified']['name']})",
            fix=BACKUP_FIX,
        )
    for item in status["unverified"]:
        outcome.warn(
            "backup-unverified",
            "warning",
            f"checkpoint {item['name']}: {item['problem']}",
            fix=f"mnemo-ops backup verify {item['name']}",
        )
    for item in status["failed_since_newest"]:
        outcome.warn(
            "backup-failed",
            "warning",
            f"checkpoint {item['name']} failed verification and was set aside in backups/failed/",
            fix=BACKUP_FIX,
        )
    return outcome
