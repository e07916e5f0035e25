"""The command line a scheduler runs: this mnemo-ops, by absolute path, with explicit paths.

Schedulers start jobs with a minimal environment (cron's PATH, a systemd unit, a Hermes script), so
what they run must not depend on PATH or on the variables of the shell that installed it.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from mnemo_ops.settings import Settings


def installed_command() -> list[str]:
    """This mnemo-ops executable as an absolute path (or ``python -m mnemo_ops`` without one)."""
    found = shutil.which("mnemo-ops")
    if found:
        return [str(Path(found).resolve())]
    return [sys.executable, "-m", "mnemo_ops"]


def path_arguments(settings: Settings, with_config: bool = True) -> list[str]:
    """``--db DB --state-dir DIR [--config FILE]``: the paths these settings resolved to."""
    arguments = ["--db", str(settings.db_path), "--state-dir", str(settings.state_dir)]
    if with_config and settings.config_file:
        arguments += ["--config", str(settings.config_file)]
    return arguments


def job_arguments(job: str, job_flags: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The arguments after the global options that run `job` quietly (``-q run JOB [FLAGS]``)."""
    return ["-q", "run", job, *((job_flags or {}).get(job, ()))]


def scheduled_flags(settings: Settings) -> dict[str, list[str]]:
    """Per job, the flags its scheduled run passes: ``--if-needed`` for evening-batch when
    ``evening_batch.scheduled_if_needed`` is set (its sleep then waits for an adaptive trigger)."""
    flags: dict[str, list[str]] = {}
    if settings.evening_batch.scheduled_if_needed:
        flags["evening-batch"] = ["--if-needed"]
    return flags


def shell_line(arguments: list[str]) -> str:
    """`arguments` as one POSIX shell command line, every part quoted where needed."""
    return " ".join(shlex.quote(part) for part in arguments)


def database_of(arguments: list[str]) -> str | None:
    """The value of ``--db`` in a mnemo-ops command line (None when it has none)."""
    for index, part in enumerate(arguments):
        if part == "--db" and index + 1 < len(arguments):
            return arguments[index + 1]
        if part.startswith("--db="):
            return part.split("=", 1)[1]
    return None


def job_of(arguments: list[str]) -> str | None:
    """The JOB of ``... run JOB`` in a mnemo-ops command line (None when it runs no job)."""
    for index, part in enumerate(arguments[:-1]):
        if part == "run":
            return arguments[index + 1]
    return None


def is_mnemo_ops(arguments: list[str]) -> bool:
    """True when a command line starts mnemo-ops (its executable, or ``python -m mnemo_ops``)."""
    if not arguments:
        return False
    if Path(arguments[0]).name == "mnemo-ops":
        return True
    return len(arguments) >= 3 and arguments[1] == "-m" and arguments[2] == "mnemo_ops"
