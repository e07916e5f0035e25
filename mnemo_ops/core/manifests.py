"""Job manifests (``jobs/*.yaml``): the one source of truth for names, schedules and write scopes.

``crontab.example``, ``cron install``, ``mnemo-ops jobs`` and the overdue checks all read them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from croniter import croniter

from mnemo_ops.database.versions import USAGES as MNEMOSYNE_USAGES
from mnemo_ops.foundation.errors import ConfigError, UsageError
from mnemo_ops.foundation.resources import resource_dir
from mnemo_ops.settings import JOB_NAMES, Settings

WRITE_SCOPES = (
    "database",
    "memory_blocks",
    "checkpoints",
    "queue",
    "quarantine",
    "reports",
    "state",
)
CHECKPOINT_MODES = ("none", "before-write")
GUARDS = ("recall",)
"""``guard: recall``: the change is tried on a copy and kept only if recall stays within tolerance."""
_FIELDS = {
    "name",
    "schedule",
    "description",
    "writes",
    "checkpoint",
    "timeout",
    "guard",
    "mnemosyne",
}


@dataclasses.dataclass(frozen=True)
class JobManifest:
    """One job's manifest: what it is, when it runs, what it writes, how long it may take."""

    name: str
    schedule: str
    description: str
    writes: tuple[str, ...]
    checkpoint: str
    timeout: int
    path: Path | None = None
    guard: str | None = None
    # How the job uses Mnemosyne (optional key, default none): opens-database (the live database,
    # through Mnemosyne's API), opens-snapshot (only private copies), uses-code (Mnemosyne's code on
    # our own connections). The runner's version check (database/versions.preflight) reads it.
    mnemosyne: str = "none"

    @property
    def module(self) -> str:
        """The module that implements the job (``memory-maintain`` -> ``mnemo_ops.jobs.memory_maintain``)."""
        return f"mnemo_ops.jobs.{self.name.replace('-', '_')}"

    @property
    def implemented(self) -> bool:
        """True when the job's module exists (looked up, not imported: the core imports no job)."""
        return importlib.util.find_spec(self.module) is not None

    @property
    def needs_lock(self) -> bool:
        """A job that writes anything besides our own state takes the writer lock."""
        return any(scope != "state" for scope in self.writes)

    def with_overrides(
        self, schedule: str | None = None, timeout: int | None = None
    ) -> JobManifest:
        """A copy with the schedule / timeout from the config file applied."""
        return dataclasses.replace(
            self, schedule=schedule or self.schedule, timeout=timeout or self.timeout
        )

    def next_run(self, after: datetime) -> datetime:
        """The next scheduled time strictly after `after` (timezone of `after`)."""
        return croniter(self.schedule, after).get_next(datetime)

    def previous_run(self, before: datetime) -> datetime:
        """The latest scheduled time at or before `before`."""
        return croniter(self.schedule, before).get_prev(datetime)


def manifests_dir() -> Path:
    """The folder holding ``<job>.yaml`` files."""
    return resource_dir("jobs")


def _parse(path: Path, data: Any) -> JobManifest:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a job manifest must be a mapping")
    unknown = set(data) - _FIELDS
    if unknown:
        raise ConfigError(f"{path}: unknown key '{sorted(unknown)[0]}'")
    for key in ("name", "schedule", "description", "writes", "checkpoint", "timeout"):
        if key not in data:
            raise ConfigError(f"{path}: missing key '{key}'")
    name, schedule = data["name"], data["schedule"]
    if name not in JOB_NAMES:
        raise ConfigError(f"{path}: key 'name' is not a known job: {name!r}")
    if not isinstance(schedule, str) or not croniter.is_valid(schedule):
        raise ConfigError(f"{path}: key 'schedule' is not a valid cron expression: {schedule!r}")
    writes = data["writes"] or []
    if not isinstance(writes, list) or any(scope not in WRITE_SCOPES for scope in writes):
        raise ConfigError(f"{path}: key 'writes' must be a list of {', '.join(WRITE_SCOPES)}")
    if data["checkpoint"] not in CHECKPOINT_MODES:
        raise ConfigError(f"{path}: key 'checkpoint' must be one of {', '.join(CHECKPOINT_MODES)}")
    if (
        not isinstance(data["timeout"], int)
        or isinstance(data["timeout"], bool)
        or data["timeout"] <= 0
    ):
        raise ConfigError(f"{path}: key 'timeout' must be a positive number of seconds")
    guard = data.get("guard")
    if guard is not None and guard not in GUARDS:
        raise ConfigError(f"{path}: key 'guard' must be one of {', '.join(GUARDS)}")
    mnemosyne = data.get("mnemosyne", "none")
    if mnemosyne not in MNEMOSYNE_USAGES:
        raise ConfigError(f"{path}: key 'mnemosyne' must be one of {', '.join(MNEMOSYNE_USAGES)}")
    return JobManifest(
        name=name,
        schedule=schedule,
        description=str(data["description"]).strip(),
        writes=tuple(writes),
        checkpoint=data["checkpoint"],
        timeout=data["timeout"],
        path=path,
        guard=guard,
        mnemosyne=mnemosyne,
    )


def load_manifests(directory: Path | None = None) -> dict[str, JobManifest]:
    """Load every manifest, keyed by job name, in the order of JOB_NAMES."""
    directory = directory or manifests_dir()
    found: dict[str, JobManifest] = {}
    for path in sorted(directory.glob("*.yaml")):
        manifest = _parse(path, yaml.safe_load(path.read_text(encoding="utf-8")))
        if manifest.name != path.stem:
            raise ConfigError(f"{path}: key 'name' must match the file name ({path.stem})")
        found[manifest.name] = manifest
    return {name: found[name] for name in JOB_NAMES if name in found}


def effective_manifests(settings: Settings) -> dict[str, JobManifest]:
    """Manifests with the per-job schedule and timeout overrides of the config file applied."""
    result = {}
    for name, manifest in load_manifests().items():
        result[name] = manifest.with_overrides(
            schedule=settings.job_option(name, "schedule"),
            timeout=settings.job_option(name, "timeout"),
        )
    return result


def get_manifest(settings: Settings, name: str) -> JobManifest:
    """The effective manifest for job `name`; UsageError (exit 2) for an unknown job."""
    manifests = effective_manifests(settings)
    if name not in manifests:
        raise UsageError(f"unknown job {name!r}; jobs are: {', '.join(JOB_NAMES)}")
    return manifests[name]
