"""Job manifests (``jobs/*.yaml``): the one source of truth for names, schedules and write scopes.

``crontab.example``, ``cron install``, ``mnemo-ops jobs`` and the overdue checks all read them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from croniter import croniter
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from mnemo_ops.foundation.errors import ConfigError, UsageError
from mnemo_ops.foundation.resources import resource_dir
from mnemo_ops.mnemosyne.versions import USAGES as MNEMOSYNE_USAGES
from mnemo_ops.settings import JOB_NAMES, JOB_SECTIONS, Settings
from mnemo_ops.settings.messages import validation_message
from mnemo_ops.settings.types import CronExpression, PositiveInt

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
    # our own connections). The runner's version check (mnemosyne/versions.preflight) reads it.
    mnemosyne: str = "none"
    # A true/false option of the job that the recall guard may turn off for one run when the
    # change costs the agent's recall too much and nothing else is wrong (the rest is tried alone).
    costly_option: str | None = None
    # The job honours JobContext.withheld: when the recall guard refuses its change because new
    # rows took the agent's lines, it may try once more deriving nothing from those rows' origins.
    withholds_crowders: bool = False

    @property
    def module(self) -> str:
        """The module that implements the job (``memory-maintain`` -> ``mnemo_ops.jobs.memory_maintain.job``)."""
        return f"mnemo_ops.jobs.{self.name.replace('-', '_')}.job"

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


class ManifestFile(BaseModel):
    """What a manifest file may say; checked once here, then turned into a JobManifest."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    name: Literal[JOB_NAMES]  # type: ignore[valid-type]  # the jobs named in settings
    schedule: CronExpression
    description: str
    writes: list[Literal[WRITE_SCOPES]] | None  # type: ignore[valid-type]
    checkpoint: Literal[CHECKPOINT_MODES]  # type: ignore[valid-type]
    timeout: PositiveInt
    guard: Literal[GUARDS] | None = None  # type: ignore[valid-type]
    mnemosyne: Literal[MNEMOSYNE_USAGES] = "none"  # type: ignore[valid-type]
    costly_option: str | None = None
    withholds_crowders: bool = False

    @model_validator(mode="after")
    def _costly_option_is_a_switch(self) -> ManifestFile:
        if self.withholds_crowders and self.guard is None:
            raise PydanticCustomError(
                "cross_field", "withholds_crowders needs a guard: it is the guard that retries", {}
            )
        if self.costly_option is None:
            return self
        field = JOB_SECTIONS[self.name].model_fields.get(self.costly_option)
        if self.guard is None or field is None or field.annotation is not bool:
            raise PydanticCustomError(
                "cross_field",
                "costly_option must name a true/false option of the job, under a guard",
                {},
            )
        return self


def _parse(path: Path, data: Any) -> JobManifest:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a job manifest must be a mapping")
    try:
        checked = ManifestFile.model_validate(data)
    except ValidationError as error:
        raise ConfigError(validation_message(ManifestFile, error, str(path))) from None
    return JobManifest(
        name=checked.name,
        schedule=checked.schedule,
        description=checked.description.strip(),
        writes=tuple(checked.writes or ()),
        checkpoint=checked.checkpoint,
        timeout=checked.timeout,
        path=path,
        guard=checked.guard,
        mnemosyne=checked.mnemosyne,
        costly_option=checked.costly_option,
        withholds_crowders=checked.withholds_crowders,
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
            schedule=settings.job(name).schedule,
            timeout=settings.job(name).timeout,
        )
    return result


def get_manifest(settings: Settings, name: str) -> JobManifest:
    """The effective manifest for job `name`; UsageError (exit 2) for an unknown job."""
    manifests = effective_manifests(settings)
    if name not in manifests:
        raise UsageError(f"unknown job {name!r}; jobs are: {', '.join(JOB_NAMES)}")
    return manifests[name]
