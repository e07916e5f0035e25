"""Where one Hermes home keeps its cron jobs and scripts, and which of its jobs.json entries are ours.

Our entries are the ones whose ``script`` lies in ``mnemo-ops/`` (relative to ``$HERMES_HOME/scripts/``,
as Hermes requires); nothing else in jobs.json is ever ours to change.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

SCRIPTS_FOLDER = "mnemo-ops"
"""Our scripts live in ``$HERMES_HOME/scripts/mnemo-ops/``; an entry whose script is there is ours."""


@dataclasses.dataclass(frozen=True)
class HermesPaths:
    """Where Hermes keeps its cron jobs and scripts, for one Hermes home."""

    hermes_home: Path

    @property
    def cron_dir(self) -> Path:
        """``$HERMES_HOME/cron``."""
        return self.hermes_home / "cron"

    @property
    def jobs_file(self) -> Path:
        """``$HERMES_HOME/cron/jobs.json``."""
        return self.cron_dir / "jobs.json"

    @property
    def lock_file(self) -> Path:
        """``$HERMES_HOME/cron/.jobs.lock``, the lock every writer of jobs.json holds."""
        return self.cron_dir / ".jobs.lock"

    @property
    def scripts_dir(self) -> Path:
        """``$HERMES_HOME/scripts``, the only place Hermes runs scripts from."""
        return self.hermes_home / "scripts"

    @property
    def our_scripts_dir(self) -> Path:
        """``$HERMES_HOME/scripts/mnemo-ops``."""
        return self.scripts_dir / SCRIPTS_FOLDER

    def script_path(self, job: str) -> Path:
        """The script file of `job`."""
        return self.our_scripts_dir / f"{job}.sh"


def script_reference(job: str) -> str:
    """The ``script`` value of `job`'s entry: relative to ``$HERMES_HOME/scripts/``, as Hermes requires."""
    return f"{SCRIPTS_FOLDER}/{job}.sh"


def job_of_entry(entry: Any) -> str | None:
    """The mnemo-ops job an entry of jobs.json runs, or None when the entry is not ours."""
    if not isinstance(entry, dict):
        return None
    script = entry.get("script")
    if not isinstance(script, str) or not script.startswith(f"{SCRIPTS_FOLDER}/"):
        return None
    name = script[len(SCRIPTS_FOLDER) + 1 :]
    return name[: -len(".sh")] if name.endswith(".sh") and "/" not in name else None


def our_entries(entries: list[Any]) -> dict[str, dict[str, Any]]:
    """Our entries among `entries` (a jobs.json array) by job; the first one of each (a second copy
    of one of ours is a stray that install drops)."""
    found: dict[str, dict[str, Any]] = {}
    for value in entries:
        job = job_of_entry(value)
        if job is not None and job not in found:
            found[job] = value
    return found
