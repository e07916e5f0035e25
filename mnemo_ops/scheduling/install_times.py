"""When each job was installed in each scheduler, for the overdue check.

A job is overdue only when a scheduler runs it and one of its slots has passed since it was
installed there: a job installed a minute ago has missed nothing. The crontab keeps no such date,
so ``cron install`` (and ``hermes install``, ``systemd install``, which have dates of their own
as a fallback: the entry's ``created_at``, the timer file's time) records it in
``<state_dir>/schedulers.json``: ``{"crontab": {"backup": "2026-11-30T21:00:00+00:00", ...}}``. A
job keeps its first date while it stays installed; uninstall forgets it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.foundation.private_files import ensure_private_dir, write_json_atomic
from mnemo_ops.settings import Settings

FILE_NAME = "schedulers.json"
SCHEDULERS = ("crontab", "hermes", "systemd")


def _path(settings: Settings):
    return settings.state_dir / FILE_NAME


def read(settings: Settings) -> dict[str, dict[str, str]]:
    """The recorded install times per scheduler and job ({} when none were recorded)."""
    path = _path(settings)
    if path.is_symlink() or not path.is_file():
        return {}
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        scheduler: {job: stamp for job, stamp in jobs.items() if isinstance(stamp, str)}
        for scheduler, jobs in data.items()
        if scheduler in SCHEDULERS and isinstance(jobs, dict)
    }


def parse(stamp: Any) -> datetime | None:
    """An ISO time as an aware datetime (a naive one is taken as UTC), or None."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def record(settings: Settings, scheduler: str, jobs: Iterable[str], now: datetime) -> None:
    """`jobs` are now what `scheduler` runs for this database: new ones get `now`, ones still
    installed keep their first date, the others are forgotten (an empty `jobs`: uninstalled)."""
    current = read(settings)
    before = current.get(scheduler, {})
    after = {job: before.get(job) or isoformat(now) for job in jobs}
    if after == before:
        return
    if after:
        current[scheduler] = after
    else:
        current.pop(scheduler, None)
    ensure_private_dir(settings.state_dir)
    write_json_atomic(_path(settings), current)
