"""The jobs as systemd timers: a ``.service`` and a ``.timer`` per job, plus a template pair.

``mnemo-ops-<job>.service`` (Type=oneshot) runs the same command line as the crontab entry, in the
environment the install saw (one ``Environment=`` line per variable: HERMES_HOME,
MNEMOSYNE_DATA_DIR, MNEMO_OPS_CONFIG, PATH), with ``SuccessExitStatus=75`` (lock held: skipped,
the next slot catches up) and, for the heavy jobs,
``Nice=`` and ``IOSchedulingClass=idle``; ``mnemo-ops-<job>.timer`` carries the schedule
(OnCalendar translated from the cron expression, ``Persistent=true``, ``RandomizedDelaySec=``).
The template pair ``mnemo-ops-<job>@.service`` / ``@.timer`` serves one Hermes home per instance:
the instance is the home's path escaped as ``systemd-escape --path`` does
(``mnemo-ops-backup@srv-agents-dana-.hermes.timer``), and the unit sets ``HERMES_HOME=%f`` (the
install's PATH and config file too, never its home).

Our unit files carry a marker line; install and uninstall touch only files that have it, so the
other units of the folder stay byte for byte. ``systemctl`` is called with an argument list, never
through a shell; ``MNEMO_OPS_SYSTEMCTL`` names another program (tests, custom setups).
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mnemo_ops.core.manifests import JobManifest
from mnemo_ops.foundation.errors import MnemoOpsError, UsageError
from mnemo_ops.foundation.private_files import fsync_path, refuse_symlink, write_atomic
from mnemo_ops.scheduling.calendar import on_calendar
from mnemo_ops.scheduling.invocation import HOME_VARIABLES, job_arguments
from mnemo_ops.settings import JOB_NAMES

UNIT_PREFIX = "mnemo-ops-"
MARKER = (
    "# Managed by mnemo-ops (`mnemo-ops systemd install`); edit jobs/*.yaml or the config instead."
)
TIMEOUT_MARGIN_S = 300
"""systemd's own stop comes this long after the job's manifest timeout, as a backstop only."""
_SAFE_ARGUMENT = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")
_NAME = re.compile(r"^mnemo-ops-([a-z0-9-]+?)(@[^/]*)?\.(service|timer)$")


@dataclasses.dataclass(frozen=True)
class UnitFile:
    """One rendered unit file."""

    name: str
    job: str
    template: bool
    text: str


def unit_dir(user: bool, environ: dict[str, str]) -> Path:
    """Where units go: ``~/.config/systemd/user`` (``--user``), else ``/etc/systemd/system``."""
    if not user:
        return Path("/etc/systemd/system")
    base = environ.get("XDG_CONFIG_HOME") or str(
        Path(environ.get("HOME") or Path.home()) / ".config"
    )
    return Path(base) / "systemd" / "user"


def escape_path(path: str) -> str:
    """An absolute path as a unit instance name, as ``systemd-escape --path`` writes it."""
    trimmed = "/".join(part for part in path.split("/") if part)
    if not trimmed:
        return "-"
    escaped = []
    for index, character in enumerate(trimmed):
        if character == "/":
            escaped.append("-")
        elif (character.isascii() and (character.isalnum() or character in ":_.")) and not (
            index == 0 and character == "."
        ):
            escaped.append(character)
        else:
            escaped.extend(f"\\x{byte:02x}" for byte in character.encode("utf-8"))
    return "".join(escaped)


def unescape_path(instance: str) -> str:
    """The path an escaped instance name stands for (``%f``)."""
    raw = instance.replace("-", "/")
    decoded = re.sub(rb"\\x([0-9a-fA-F]{2})", lambda m: bytes([int(m.group(1), 16)]), raw.encode())
    return "/" + decoded.decode("utf-8", "replace")


def quote(argument: str) -> str:
    """One ExecStart argument as systemd parses it: quoted where needed, ``%`` and ``$`` escaped."""
    escaped = argument.replace("%", "%%").replace("$", "$$")
    if _SAFE_ARGUMENT.match(argument):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def environment_line(name: str, value: str) -> str:
    """``Environment="NAME=value"`` as systemd unquotes it: the whole assignment in double quotes
    (a value may hold spaces), ``\\`` and ``"`` escaped, ``%`` doubled (a specifier otherwise);
    ``$`` is plain text in Environment=."""
    assignment = f"{name}={value}".replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'Environment="{assignment}"'


def _first_sentence(text: str) -> str:
    sentence = " ".join(text.split()).split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= 100 else sentence[:97] + "..."


def owner_of(path: Path) -> str | None:
    """The user owning `path` (or its nearest existing parent): who a system unit runs as."""
    for candidate in (path, *path.parents):
        try:
            return pwd.getpwuid(candidate.stat().st_uid).pw_name
        except (OSError, KeyError):
            continue
    return None


@dataclasses.dataclass(frozen=True)
class RenderOptions:
    """What the units are rendered with."""

    command: list[str]  # mnemo-ops, absolute
    path_arguments: list[str]  # --db ... --state-dir ... [--config ...] for the plain units
    config_arguments: list[str]  # [--config FILE] for the template units
    user: bool
    run_as: str | None  # User= of system units
    randomized_delay_s: int
    nice: int
    idle_jobs: frozenset[str]
    disabled: frozenset[str]
    job_flags: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The variables the install saw (`invocation.scheduled_environment`); the template units
    leave out the ones naming the home, which their instance names."""


def _service(job: str, manifest: JobManifest, options: RenderOptions, template: bool) -> str:
    arguments = options.config_arguments if template else options.path_arguments
    exec_start = " ".join(
        quote(part)
        for part in [*options.command, *arguments, *job_arguments(job, options.job_flags)]
    )
    what = " for the Hermes home %f" if template else ""
    lines = [
        MARKER,
        "[Unit]",
        f"Description=mnemo-ops {job}{what}: {_first_sentence(manifest.description)}",
        "",
        "[Service]",
        "Type=oneshot",
    ]
    if template:
        # The instance names the Hermes home; the database and state dir are found from it.
        lines += [
            "Environment=HERMES_HOME=%f",
            "UnsetEnvironment=MNEMOSYNE_DATA_DIR MNEMO_OPS_DB MNEMO_OPS_STATE_DIR",
        ]
    lines += [
        environment_line(name, value)
        for name, value in options.environment.items()
        if not (template and name in HOME_VARIABLES)
    ]
    lines += [
        f"ExecStart={exec_start}",
        "# 75: another mnemo-ops writer held the lock; skipped, the next run catches up.",
        "SuccessExitStatus=75",
        f"TimeoutStartSec={manifest.timeout + TIMEOUT_MARGIN_S}",
    ]
    if not options.user and options.run_as:
        lines.append(f"User={options.run_as}")
    if job in options.idle_jobs:
        lines += [f"Nice={options.nice}", "IOSchedulingClass=idle"]
    return "\n".join(lines) + "\n"


def _timer(job: str, manifest: JobManifest, options: RenderOptions, template: bool) -> str:
    what = " for the Hermes home %f" if template else ""
    lines = [
        MARKER,
        "[Unit]",
        f"Description=mnemo-ops {job}{what} (cron: {manifest.schedule})",
        "",
        "[Timer]",
    ]
    lines += [f"OnCalendar={value}" for value in on_calendar(manifest.schedule, job)]
    lines += [
        "# A run missed while the machine was off starts at the next boot.",
        "Persistent=true",
        f"RandomizedDelaySec={options.randomized_delay_s}",
        "",
        "[Install]",
        "WantedBy=timers.target",
    ]
    if job in options.disabled and not template:
        lines.insert(1, "# Disabled in the mnemo-ops config: install leaves this timer disabled.")
    return "\n".join(lines) + "\n"


def render_units(
    manifests: dict[str, JobManifest], options: RenderOptions, plain: bool = True
) -> list[UnitFile]:
    """The unit files of the implemented jobs: the plain pair (when `plain`) and the template pair.

    An expression OnCalendar cannot say faithfully stops the rendering (exit 2, naming the job).
    """
    unknown = sorted(options.idle_jobs - set(JOB_NAMES))
    if unknown:
        raise UsageError(
            f"config key 'scheduling.systemd.idle_jobs': {unknown[0]!r} is not a job; jobs are: "
            + ", ".join(JOB_NAMES)
        )
    units = []
    for job, manifest in manifests.items():
        if not manifest.implemented:
            continue
        for template in (False, True) if plain else (True,):
            stem = f"{UNIT_PREFIX}{job}{'@' if template else ''}"
            units.append(
                UnitFile(
                    f"{stem}.service", job, template, _service(job, manifest, options, template)
                )
            )
            units.append(
                UnitFile(f"{stem}.timer", job, template, _timer(job, manifest, options, template))
            )
    return units


def instance_timer(job: str, hermes_home: Path) -> str:
    """The timer instance of `job` for one Hermes home."""
    return f"{UNIT_PREFIX}{job}@{escape_path(str(hermes_home.absolute()))}.timer"


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file's sections and their ``Key=value`` lines, in order (comments skipped)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        if current is None or "=" not in line:
            raise ValueError(f"line {number}: {raw!r} is neither a section nor Key=value")
        key, _, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return sections


# ----------------------------------------------------------------------------------------------
# Install / uninstall.


@dataclasses.dataclass
class UnitChange:
    """One unit file: created, updated, unchanged or removed."""

    name: str
    action: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"name": self.name, "action": self.action}


@dataclasses.dataclass
class SystemdPlan:
    """What install or uninstall changes: files, and the systemctl calls."""

    directory: Path
    files: list[UnitChange]
    commands: list[list[str]]
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        """True when a file changes (the systemctl calls are made anyway, and are idempotent)."""
        return any(change.action != "unchanged" for change in self.files)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "unit_dir": str(self.directory),
            "changed": self.changed,
            "dry_run": self.dry_run,
            "files": [change.to_dict() for change in self.files],
            "systemctl": [shlex.join(command) for command in self.commands],
        }


def _is_ours(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            return handle.readline().rstrip("\n") == MARKER
    except (OSError, UnicodeDecodeError):
        return False


def our_unit_files(directory: Path) -> list[Path]:
    """The unit files of ours in `directory` (name pattern and marker line; never a symlink)."""
    if not directory.is_dir():
        return []
    return sorted(
        path
        for path in directory.iterdir()
        if _NAME.match(path.name) and not path.is_symlink() and path.is_file() and _is_ours(path)
    )


def enabled_timers(directory: Path) -> list[str]:
    """Timers of ours that are enabled: their links in ``timers.target.wants/``."""
    wants = directory / "timers.target.wants"
    if not wants.is_dir():
        return []
    return sorted(
        path.name
        for path in wants.iterdir()
        if _NAME.match(path.name) and path.name.endswith(".timer") and path.is_symlink()
    )


def systemctl_program() -> list[str]:
    """``systemctl``, or the program named by ``MNEMO_OPS_SYSTEMCTL``."""
    return shlex.split(os.environ.get("MNEMO_OPS_SYSTEMCTL", "systemctl"))


def plan_install(
    directory: Path,
    units: list[UnitFile],
    user: bool,
    enable: list[str],
    disable: list[str],
    use_systemctl: bool,
    keep_plain: bool,
) -> SystemdPlan:
    """What install changes: every rendered file written (a file of that name that is not ours is
    refused), files of ours no longer rendered removed; then daemon-reload, enable and disable."""
    refuse_symlink(directory)
    rendered = {unit.name: unit for unit in units}
    changes = []
    for unit in units:
        path = directory / unit.name
        refuse_symlink(path)
        if path.exists() and not _is_ours(path):
            raise MnemoOpsError(
                f"{path} exists and is not managed by mnemo-ops; move it away first"
            )
        if not path.exists():
            changes.append(UnitChange(unit.name, "create"))
        else:
            same = path.read_text(encoding="utf-8") == unit.text
            changes.append(UnitChange(unit.name, "unchanged" if same else "update"))
    for path in our_unit_files(directory):
        plain_unit = "@" not in path.name
        if path.name not in rendered and not (keep_plain and plain_unit):
            changes.append(UnitChange(path.name, "remove"))
    commands = []
    if use_systemctl:
        base = [*systemctl_program(), *(["--user"] if user else [])]
        commands.append([*base, "daemon-reload"])
        if enable:
            commands.append([*base, "enable", "--now", *enable])
        if disable:
            commands.append([*base, "disable", "--now", *disable])
    return SystemdPlan(directory, changes, commands)


def plan_uninstall(directory: Path, user: bool, use_systemctl: bool) -> SystemdPlan:
    """What uninstall changes: our timers disabled (plain and instances), our files removed."""
    refuse_symlink(directory)
    files = [UnitChange(path.name, "remove") for path in our_unit_files(directory)]
    ours = {path.name for path in our_unit_files(directory)}
    timers = [
        name
        for name in enabled_timers(directory)
        if name in ours or re.sub(r"@.*\.timer$", "@.timer", name) in ours
    ]
    commands = []
    if use_systemctl:
        base = [*systemctl_program(), *(["--user"] if user else [])]
        if timers:
            commands.append([*base, "disable", "--now", *timers])
        commands.append([*base, "daemon-reload"])
    elif timers:
        files += [UnitChange(f"timers.target.wants/{name}", "remove") for name in timers]
    return SystemdPlan(directory, files, commands)


NO_SYSTEMCTL_HINT = (
    "pass --no-systemctl to write (or remove) only the unit files, then run systemctl where "
    "systemd runs for you"
)


def _run(command: list[str], files_written: bool = True) -> None:
    where = "the unit files are in place" if files_written else "nothing was written"
    try:
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise MnemoOpsError(
            f"{command[0]} was not found ({where}): run `{shlex.join(command)}` where systemd "
            f"runs, or {NO_SYSTEMCTL_HINT}"
        ) from None
    if completed.returncode != 0:
        message = (completed.stderr or completed.stdout).strip().splitlines()
        reason = message[-1] if message else completed.returncode
        raise MnemoOpsError(
            f"`{shlex.join(command)}` failed: {reason} ({where}); {NO_SYSTEMCTL_HINT}"
        )


def check_systemctl(plan: SystemdPlan, user: bool) -> None:
    """Before anything is written: can systemctl reach the manager install will talk to?

    Without a user bus (no login session: su, a container, cron) ``systemctl --user`` fails, and
    the units written before it would be left for a manager that never reads them. Asked with a
    read-only call (``show-environment``) so a working manager is not changed by the question.
    """
    if not plan.commands or not user:
        return
    _run([*systemctl_program(), "--user", "show-environment"], files_written=False)


def apply_install(plan: SystemdPlan, units: list[UnitFile]) -> None:
    """Write the files (0644, atomically), remove stale ones of ours, then call systemctl."""
    rendered = {unit.name: unit for unit in units}
    try:
        plan.directory.mkdir(parents=True, exist_ok=True, mode=0o755)
        for change in plan.files:
            path = plan.directory / change.name
            if change.action in ("create", "update"):
                write_atomic(path, rendered[change.name].text.encode("utf-8"))
                os.chmod(path, 0o644)  # systemd reads unit files as the user manager or root
            elif change.action == "remove" and _is_ours(path):
                path.unlink()
        fsync_path(plan.directory)
    except PermissionError as error:
        raise MnemoOpsError(
            f"cannot write {error.filename or plan.directory}: permission denied "
            "(system units need root; --user installs your own)"
        ) from None
    for command in plan.commands:
        _run(command)


def apply_uninstall(plan: SystemdPlan) -> None:
    """Disable our timers, then remove our files (and, without systemctl, their enable links)."""
    disable = [command for command in plan.commands if "disable" in command]
    for command in disable:
        _run(command)
    for change in plan.files:
        path = plan.directory / change.name
        if change.name.startswith("timers.target.wants/"):
            if path.is_symlink():
                path.unlink()
        elif _is_ours(path):
            path.unlink()
    if plan.directory.is_dir():
        fsync_path(plan.directory)
    for command in plan.commands:
        if command not in disable:
            _run(command)
