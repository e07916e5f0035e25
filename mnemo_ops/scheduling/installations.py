"""Where each job is installed: the crontab, Hermes' cron, systemd timers.

A job installed in two schedulers for the same database runs twice per slot: the second run only
meets the writer lock (exit 75) every time, and a read-only job does its work twice. So every place
is read for the database it serves (``--db`` of its command line, or the Hermes home of a template
instance), and ``mnemo-ops jobs`` warns when one job serves one database from two places.
Everything here only reads; a scheduler that cannot be asked (no crontab program) is skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.scheduling import crontab, install_times, systemd
from mnemo_ops.scheduling.hermes.install import installed_entries
from mnemo_ops.scheduling.hermes.paths import HermesPaths
from mnemo_ops.scheduling.hermes.scripts import script_command
from mnemo_ops.scheduling.invocation import (
    database_of,
    is_mnemo_ops,
    job_of,
    without_assignments,
)
from mnemo_ops.settings import Settings, mnemosyne_default_db


@dataclasses.dataclass(frozen=True)
class Installation:
    """One place that runs a job: which scheduler, what it is called there, whether it is active."""

    job: str
    scheduler: str  # "crontab" | "hermes" | "systemd"
    where: str
    database: Path | None  # None: could not tell
    active: bool
    since: datetime | None = None
    """When it was installed there (None: not known, as for a crontab line written by hand)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "job": self.job,
            "scheduler": self.scheduler,
            "where": self.where,
            "db": str(self.database) if self.database else None,
            "active": self.active,
            "since": isoformat(self.since) if self.since else None,
        }


def _database(arguments: list[str], environ: dict[str, str]) -> Path:
    given = database_of(arguments)
    # No --db: the command finds the database as Mnemosyne does, from its environment.
    return Path(given).expanduser().absolute() if given else mnemosyne_default_db(environ)


def _crontab_command(line: str) -> list[str] | None:
    # The words of the command without the NAME=value assignments our lines start with.
    command = crontab.command_of_line(line)
    if command is None:
        return None
    with contextlib.suppress(ValueError):
        return without_assignments(shlex.split(command))
    return None


def from_crontab(environ: dict[str, str]) -> list[Installation]:
    """Active crontab lines that run a mnemo-ops job (ours in the marked block, or written by hand)."""
    try:
        text = crontab.read_crontab()
    except (MnemoOpsError, OSError):
        return []
    found = []
    for line in text.splitlines():
        arguments = _crontab_command(line)
        if not arguments or not is_mnemo_ops(arguments):
            continue
        job = job_of(arguments)
        if job:
            found.append(
                Installation(job, "crontab", "crontab", _database(arguments, environ), True)
            )
    return found


def from_hermes(settings: Settings) -> list[Installation]:
    """Our entries in this Hermes home's cron (active unless paused)."""
    paths = HermesPaths(settings.hermes_home)
    try:
        entries = installed_entries(paths)
    except MnemoOpsError:
        return []
    found = []
    for job, entry in entries.items():
        arguments = script_command(paths, job)
        database = (
            _database(arguments, {"HERMES_HOME": str(settings.hermes_home)}) if arguments else None
        )
        found.append(
            Installation(
                job,
                "hermes",
                f"{paths.jobs_file} ({entry.get('id')})",
                database,
                bool(entry.get("enabled", True)),
                install_times.parse(entry.get("created_at")),
            )
        )
    return found


def from_systemd(environ: dict[str, str]) -> list[Installation]:
    """Our timers in the user and system unit folders (active when enabled)."""
    found = []
    for directory in (systemd.unit_dir(True, environ), systemd.unit_dir(False, environ)):
        enabled = set(systemd.enabled_timers(directory))
        for path in systemd.our_unit_files(directory):
            if not path.name.endswith(".service"):
                continue
            job = path.name.removeprefix(systemd.UNIT_PREFIX).split("@")[0].removesuffix(".service")
            if "@" in path.name:
                stem = path.name.removesuffix("@.service")
                for timer in sorted(enabled):
                    if timer.startswith(stem + "@"):
                        home = systemd.unescape_path(timer[len(stem) + 1 : -len(".timer")])
                        database = mnemosyne_default_db({"HERMES_HOME": home})
                        found.append(
                            Installation(
                                job,
                                "systemd",
                                str(directory / timer),
                                database,
                                True,
                                _file_time(path),
                            )
                        )
                continue
            timer = path.name.replace(".service", ".timer")
            arguments = _exec_start(path)
            found.append(
                Installation(
                    job,
                    "systemd",
                    str(directory / timer),
                    _database(arguments, environ) if arguments else None,
                    timer in enabled,
                    _file_time(directory / timer),
                )
            )
    return found


def _exec_start(path: Path) -> list[str] | None:
    with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
        for key, value in systemd.parse_unit(path.read_text(encoding="utf-8")).get("Service", []):
            if key == "ExecStart":
                return shlex.split(value.replace("%%", "%").replace("$$", "$"))
    return None


def _file_time(path: Path) -> datetime | None:
    """When a unit file was last written: when its timer was installed, as far as systemd says."""
    with contextlib.suppress(OSError):
        return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    return None


def installations(settings: Settings, environ: dict[str, str] | None = None) -> list[Installation]:
    """Every place that runs a mnemo-ops job for `settings`' database (or for an unknown one),
    with when it was installed there: as ``install`` recorded it, else as the scheduler says."""
    environ = dict(os.environ if environ is None else environ)
    everything = from_crontab(environ) + from_hermes(settings) + from_systemd(environ)
    target = settings.db_path.absolute()
    recorded = install_times.read(settings)
    found = []
    for item in everything:
        if item.database is not None and item.database != target:
            continue
        since = install_times.parse(recorded.get(item.scheduler, {}).get(item.job))
        found.append(dataclasses.replace(item, since=since) if since else item)
    return found


def duplicates(found: list[Installation]) -> dict[str, list[Installation]]:
    """Jobs run by more than one active place for the same database."""
    by_job: dict[str, list[Installation]] = {}
    for item in found:
        if item.active:
            by_job.setdefault(item.job, []).append(item)
    return {job: items for job, items in by_job.items() if len(items) > 1}


UNINSTALL = {
    "crontab": "mnemo-ops cron uninstall",
    "hermes": "mnemo-ops hermes uninstall",
    "systemd": "mnemo-ops systemd uninstall",
}
"""The command that takes a scheduler's jobs out again."""


def installed_elsewhere(
    settings: Settings, scheduler: str, jobs: list[str], environ: dict[str, str] | None = None
) -> list[str]:
    """One warning per other scheduler that already runs some of `jobs` for this database: an
    install into `scheduler` would make them run twice per slot (racing for the writer lock)."""
    warnings = []
    others: dict[str, list[Installation]] = {}
    for item in installations(settings, environ):
        if item.scheduler != scheduler and item.active and item.job in jobs:
            others.setdefault(item.scheduler, []).append(item)
    for other, items in sorted(others.items()):
        names = ", ".join(sorted({item.job for item in items}, key=jobs.index))
        where = sorted({item.where.split(" (")[0] for item in items})[0]
        warnings.append(
            f"{names} also run from {other} ({where}) for this database: installed here too, each "
            f"would run twice per slot and race for the writer lock; keep one scheduler "
            f"(`{UNINSTALL[other]}`, or uninstall this one)"
        )
    return warnings
