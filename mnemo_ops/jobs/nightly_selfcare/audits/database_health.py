"""Database health: ``PRAGMA quick_check`` (read-only), WAL size, free disk at the DB and backup folders."""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from pathlib import Path

import apsw

from mnemo_ops import database
from mnemo_ops.core import disk_reserve as reserve
from mnemo_ops.foundation.errors import DatabaseError
from mnemo_ops.jobs.nightly_selfcare.audits.outcome import AuditOutcome
from mnemo_ops.settings import Settings

CODE_PREFIXES = ("db-", "disk-")
MEBIBYTE = 1024 * 1024


def _nearest_existing(path: Path) -> Path:
    """`path` or its nearest existing parent (the backups folder may not exist yet)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def audit(settings: Settings, now: datetime) -> AuditOutcome:
    """Quick-check the database, measure the WAL and the free disk space."""
    outcome = AuditOutcome("database_health")
    try:
        connection = database.open_memory_db(settings.db_path, readonly=True)
    except DatabaseError as error:
        outcome.warn("db-unreadable", "critical", error.message, fix="mnemo-ops doctor")
        return outcome
    try:
        rows = [row[0] for row in connection.execute("PRAGMA quick_check")]
    except apsw.Error as error:
        rows = [f"quick_check could not run: {error}"]
    finally:
        connection.close()
    outcome.stats["quick_check"] = "ok" if rows == ["ok"] else f"{len(rows)} problem(s)"
    if rows != ["ok"]:
        outcome.warn(
            "db-quick-check-failed",
            "critical",
            f"PRAGMA quick_check on {settings.db_path}: {'; '.join(map(str, rows[:3]))}",
            fix="mnemo-ops run monthly-maintenance",
        )
    wal = Path(f"{settings.db_path}-wal")
    wal_bytes = wal.stat().st_size if wal.exists() else 0
    outcome.stats["wal_bytes"] = wal_bytes
    wal_limit = settings.nightly_selfcare.wal_warn_mb
    if wal_bytes > wal_limit * MEBIBYTE:
        outcome.warn(
            "db-wal-large",
            "warning",
            f"the WAL is {wal_bytes / MEBIBYTE:,.0f} MiB (over {wal_limit} MiB): a long reader may be "
            "blocking checkpoints",
            fix="mnemo-ops run monthly-maintenance",
        )
    warn_mb = settings.nightly_selfcare.free_disk_warn_mb
    error_mb = settings.nightly_selfcare.free_disk_error_mb
    seen_devices: set[int] = set()
    outcome.stats["free_mb"] = {}
    for label, folder in (("database", settings.db_path.parent), ("backups", settings.backups_dir)):
        existing = _nearest_existing(folder)
        device = os.stat(existing).st_dev
        if device in seen_devices:
            continue
        seen_devices.add(device)
        free_mb = shutil.disk_usage(existing).free // MEBIBYTE
        outcome.stats["free_mb"][label] = free_mb
        if free_mb < error_mb:
            outcome.warn(
                "disk-space-low",
                "error",
                f"only {free_mb:,} MiB free at the {label} folder {folder}",
                fix=f"df -h {existing}",
            )
        elif free_mb < warn_mb:
            outcome.warn(
                "disk-space-low",
                "warning",
                f"only {free_mb:,} MiB free at the {label} folder {folder}",
                fix=f"df -h {existing}",
            )
    _reserve_audit(settings, outcome)
    return outcome


def _reserve_audit(settings: Settings, outcome) -> None:
    """Warn before the agent's free-space reserve is reached on the database's filesystem.

    Below the reserve, writing jobs refuse to start and checkpoints are refused (``disk.reserve``);
    the warning comes while there is still time to act: at the reserve plus the room one
    checkpoint of the database takes.
    """
    space = reserve.free_space(settings)
    outcome.stats["reserve_mb"] = space.reserve // MEBIBYTE
    checkpoint_room = reserve.database_bytes(settings)
    if not space.enough:
        outcome.warn(
            "disk-reserve-reached",
            "error",
            f"{space.describe()}: writing jobs will not start and checkpoints are refused",
            fix=f"df -h {space.folder}",
        )
    elif space.left - checkpoint_room < space.reserve:
        outcome.warn(
            "disk-reserve-near",
            "warning",
            f"{space.free / MEBIBYTE:,.0f} MiB free at {space.folder}: one more checkpoint of the "
            f"database ({checkpoint_room / MEBIBYTE:,.0f} MiB) would reach the "
            f"{space.reserve / MEBIBYTE:,.0f} MiB reserve kept for the live agent",
            fix=f"df -h {space.folder}",
        )
