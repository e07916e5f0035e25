"""The schedule view: for each job its schedule, last run and status, next run, where it is
installed and whether it is overdue.

The same rows serve ``mnemo-ops jobs``, the overdue-jobs audit and the morning report. A job is
overdue only when a scheduler runs it (the crontab, Hermes' cron or a systemd timer, active) and a
slot of its schedule has passed since it was installed there without a successful run after it: a
job no scheduler runs has missed nothing, however long ago its slot was.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from mnemo_ops.core import state
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.scheduling.installations import Installation, installations
from mnemo_ops.settings import Settings


def installed_since(places: list[Installation]) -> tuple[bool, datetime | None]:
    """(whether an active scheduler runs the job, since when). A place whose date is not known
    (a crontab line written by hand) counts as installed long ago: its slots all count."""
    active = [place for place in places if place.active]
    if not active:
        return False, None
    dates = [place.since for place in active]
    return True, None if any(date is None for date in dates) else min(dates)


def is_overdue(
    slot: datetime, scheduled: bool, since: datetime | None, last_success: str | None
) -> bool:
    """A scheduled job whose `slot` came after it was installed, with no success since the slot."""
    if not scheduled or (since is not None and since >= slot):
        return False
    return last_success is None or last_success < isoformat(slot)


def job_table(settings: Settings, found: list[Installation] | None = None) -> list[dict[str, Any]]:
    """One row per job: name, schedule, implemented, enabled, last run, status, next run, whether
    a scheduler runs it and since when, overdue. `found`: the installations, when already read."""
    ledger = state.open_state_readonly(settings.state_db_path)
    last = state.last_runs(ledger)
    if ledger is not None:
        ledger.close()
    found = installations(settings) if found is None else found
    now = utc_now().astimezone()
    rows = []
    for name, manifest in effective_manifests(settings).items():
        info = last.get(name, {})
        last_success = info.get("last_success")
        scheduled, since = installed_since([item for item in found if item.job == name])
        overdue = (
            manifest.implemented
            and settings.job(name).enabled
            and is_overdue(manifest.previous_run(now), scheduled, since, last_success)
        )
        rows.append(
            {
                "job": name,
                "schedule": manifest.schedule,
                "implemented": manifest.implemented,
                "enabled": settings.job(name).enabled,
                "last_run": info.get("started_at"),
                "last_status": info.get("status"),
                "last_success": last_success,
                "next_run": isoformat(manifest.next_run(now)),
                "scheduled": scheduled,
                "installed_since": isoformat(since) if since else None,
                "overdue": bool(overdue),
                "description": manifest.description,
            }
        )
    return rows
