"""Helpers for the nightly-selfcare, quarantine and report tests: ledger rows, checkpoints, a config.

Ledger rows go through the real `state.record_run` into a real state.db; checkpoints are folders with
the manifest.json layout of docs/contracts.md ("Checkpoints"), as the backup job writes them.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from mnemo_ops.core import state
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.settings import JOB_NAMES, Settings, load_settings

QUIET_DISK = {"free_disk_warn_mb": 0, "free_disk_error_mb": 0}
"""Disk thresholds that never fire: the machine's free space is not what these tests check."""


def write_config(directory: Path, nightly: dict | None = None) -> Path:
    """A config file with the given ``nightly_selfcare`` section (disk thresholds off by default)."""
    path = directory / "config.yaml"
    path.write_text(
        yaml.safe_dump({"nightly_selfcare": {**QUIET_DISK, **(nightly or {})}}), encoding="utf-8"
    )
    return path


def settings_for(sample, config: Path | None = None) -> Settings:
    """Settings for a sample home, optionally with a config file."""
    return load_settings(
        db=sample.db_path, state_dir=sample.state_dir, config=config, environ=sample.environ()
    )


def record_run(
    settings: Settings,
    job: str,
    status: str,
    when: datetime,
    warnings: list | None = None,
    error: str | None = None,
) -> None:
    """Append one ledger row for `job` that started at `when` and took one second."""
    result = JobResult(job=job, status=status, started_at=when, db=str(settings.db_path))
    result.finished_at = when + timedelta(seconds=1)
    result.error = error
    for code, severity, message in warnings or []:
        result.warn(code, message, severity=severity)
    ledger = state.open_state(settings.state_db_path)
    state.record_run(ledger, result)
    ledger.close()


def record_healthy_day(
    settings: Settings, when: datetime, skip: tuple[str, ...] = (), failed: tuple[str, ...] = ()
) -> None:
    """An ok (or failed) ledger row for every job except nightly-selfcare and those in `skip`."""
    for job in JOB_NAMES:
        if job == "nightly-selfcare" or job in skip:
            continue
        status = "failed" if job in failed else "ok"
        record_run(
            settings, job, status, when, error="simulated failure" if status == "failed" else None
        )


def write_checkpoint(
    settings: Settings, created_at: datetime, verified: bool = True, failed: bool = False
) -> Path:
    """A checkpoint folder with a manifest.json (as the backup job writes it)."""
    name = f"daily-{created_at:%Y%m%dT%H%M%SZ}"
    folder = settings.backups_dir / ("failed" if failed else "") / name
    folder.mkdir(parents=True, mode=0o700)
    manifest = {
        "name": name,
        "kind": "daily",
        "job": "backup",
        "created_at": isoformat(created_at),
        "source_db": str(settings.db_path),
        "files": {},
        "row_counts": {},
        "verification": {
            "ok": verified,
            "integrity_check": "ok" if verified else "row 3 missing from index",
            "checked_at": isoformat(created_at),
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    os.chmod(folder / "manifest.json", 0o600)
    return folder


def age_file(path: Path, when: datetime) -> None:
    """Set a file's mtime (and atime) to `when`."""
    os.utime(path, (when.timestamp(), when.timestamp()), follow_symlinks=False)


def install_in_hermes(settings: Settings, when: datetime) -> list[str]:
    """Install every implemented job in the sample's Hermes cron at `when`, as ``hermes install``
    does (real jobs.json, real scripts) and record the time as the command does; return the jobs."""
    from mnemo_ops.core.manifests import effective_manifests
    from mnemo_ops.scheduling import install_times
    from mnemo_ops.scheduling.hermes.install import InstallRequest, apply_install
    from mnemo_ops.scheduling.hermes.paths import HermesPaths
    from mnemo_ops.scheduling.invocation import path_arguments

    manifests = {
        name: manifest
        for name, manifest in effective_manifests(settings).items()
        if manifest.implemented
    }
    request = InstallRequest(
        manifests=manifests,
        command=["mnemo-ops", *path_arguments(settings)],
        deliver=None,
        disabled=set(),
        report_since="24h",
        now=when,
        lock_wait_s=5,
        environ={},
    )
    apply_install(HermesPaths(settings.hermes_home), request)
    install_times.record(settings, "hermes", list(manifests), when)
    return list(manifests)
