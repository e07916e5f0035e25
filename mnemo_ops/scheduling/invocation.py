"""The command line a scheduler runs: this mnemo-ops, by absolute path, with explicit paths, and
the environment it runs in.

Schedulers start jobs with a minimal environment (cron's PATH, a systemd unit, a Hermes script), so
what they run must not depend on PATH or on the variables of the shell that installed it: the
command names the program and the paths, and `scheduled_environment` carries the variables the
install saw (``HERMES_HOME``, ``MNEMOSYNE_DATA_DIR``, the config file, ``PATH`` to this
mnemo-ops's folder) into every scheduler's entry.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.settings import ENV_CONFIG, Settings

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The system folders a scheduled run's PATH ends with (after the folder of this mnemo-ops)."""
HOME_VARIABLES = frozenset({"HERMES_HOME", "MNEMOSYNE_DATA_DIR"})
"""The variables that name the home: a template unit or a pod finds its home another way."""
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


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


def _program_folder(command: Sequence[str]) -> Path | None:
    """The folder of the program a scheduler calls (a venv's ``bin``), None when it is not found."""
    program = command[0] if command else ""
    if "/" not in program:
        found = shutil.which(program) if program else None
        if not found:
            return None
        program = found
    return Path(program).expanduser().absolute().parent


def _runs_as_module(command: Sequence[str]) -> bool:
    """True for ``python -m mnemo_ops``: the package is found on sys.path, maybe through PYTHONPATH."""
    return len(command) >= 3 and command[1] == "-m" and command[2] == "mnemo_ops"


def scheduled_environment(
    settings: Settings, command: Sequence[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables every scheduled run of `command` gets: what this install saw or resolved.

    - ``HERMES_HOME``: the Hermes home these settings resolved (the memory blocks, Hermes' files and
      Mnemosyne's defaults are found from it; cron would otherwise use ``~/.hermes``);
    - ``MNEMOSYNE_DATA_DIR``: when it is set here, or when the database is not where HERMES_HOME
      puts it (Mnemosyne, and the child processes that import it, find the same database);
    - ``MNEMO_OPS_CONFIG``: the config file, when one is in use;
    - ``PATH``: the folder of the program the scheduler calls (a venv's ``bin``), then the system
      folders, so what the job itself starts comes from the same install;
    - ``PYTHONPATH``: only when the program is ``python -m mnemo_ops`` and PYTHONPATH is set here
      (a checkout run without installing: the package is found only through it).

    A value with a line break or another control character cannot be written into a crontab line
    or a unit file: UsageError (exit 2) naming the variable.
    """
    environ = os.environ if environ is None else environ
    variables = {"HERMES_HOME": str(settings.hermes_home)}
    data_dir = environ.get("MNEMOSYNE_DATA_DIR")
    if data_dir:
        variables["MNEMOSYNE_DATA_DIR"] = str(Path(data_dir).expanduser().absolute())
    elif settings.db_path.parent != settings.hermes_home / "mnemosyne" / "data":
        variables["MNEMOSYNE_DATA_DIR"] = str(settings.db_path.parent)
    if settings.config_file:
        variables[ENV_CONFIG] = str(settings.config_file)
    folder = _program_folder(command)
    variables["PATH"] = f"{folder}:{SYSTEM_PATH}" if folder else SYSTEM_PATH
    python_path = environ.get("PYTHONPATH")
    if python_path and _runs_as_module(command):
        variables["PYTHONPATH"] = os.pathsep.join(
            str(Path(part).expanduser().absolute())
            for part in python_path.split(os.pathsep)
            if part
        )
    for name, value in variables.items():
        if any(ord(character) < 32 or ord(character) == 127 for character in value):
            raise UsageError(
                f"{name} is {value!r}: a path with a line break or another control character "
                "cannot be written into a scheduler's entry; move or rename it"
            )
    return variables


def environment_mismatches(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> list[str]:
    """One line per place where this environment and the config file name different homes.

    The config file's paths win over HERMES_HOME and MNEMOSYNE_DATA_DIR, and the schedule carries
    what won; but the shell that installs it (and the agent run from it) may be using another home,
    and a database found through HERMES_HOME is not the config's ``hermes_home``. Said at install
    time, before the schedule runs somewhere the user did not expect.
    """
    environ = os.environ if environ is None else environ
    where = f"the config file {settings.config_file}"
    found = []
    home_from_config = settings.sources.get("hermes_home") == "config"
    hermes_home = environ.get("HERMES_HOME")
    if (
        home_from_config
        and hermes_home
        and Path(hermes_home).expanduser().absolute() != settings.hermes_home
    ):
        found.append(
            f"HERMES_HOME is {hermes_home} here, but {where} names hermes_home "
            f"{settings.hermes_home}: the schedule uses {settings.hermes_home}"
        )
    data_dir = environ.get("MNEMOSYNE_DATA_DIR")
    if (
        settings.sources.get("db") == "config"
        and data_dir
        and Path(data_dir).expanduser().absolute() != settings.db_path.parent
    ):
        found.append(
            f"MNEMOSYNE_DATA_DIR is {data_dir} here, but {where} names the database "
            f"{settings.db_path}: the schedule uses {settings.db_path}"
        )
    if (
        home_from_config
        and settings.sources.get("db") == "default"
        and settings.hermes_home not in settings.db_path.parents
    ):
        found.append(
            f"{where} names hermes_home {settings.hermes_home}, but the database "
            f"{settings.db_path} comes from this environment (MNEMOSYNE_DATA_DIR, HERMES_HOME "
            "or ~/.hermes): set db in the config file too"
        )
    return found


def shell_assignments(environment: Mapping[str, str]) -> list[str]:
    """``NAME=value`` words for a POSIX shell, each value quoted (``HERMES_HOME='/a b'``)."""
    return [f"{name}={shlex.quote(value)}" for name, value in environment.items()]


def without_assignments(arguments: list[str]) -> list[str]:
    """A shell command's words without the ``NAME=value`` assignments before its program."""
    index = 0
    while index < len(arguments) and _ASSIGNMENT.match(arguments[index]):
        index += 1
    return arguments[index:]


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
