r"""Render the crontab from the job manifests and install it between marker comments.

The user's other crontab lines are never touched: only the block between BEGIN_MARKER and
END_MARKER is replaced (or added, or removed). The ``crontab`` program is called with an argument
list, never through a shell; ``MNEMO_OPS_CRONTAB`` names another program (tests, custom setups).

Each line carries the environment the install saw as shell assignments before the program
(``HERMES_HOME='/srv/a' PATH=... /venv/bin/mnemo-ops ...``), not as crontab ``NAME=value`` lines:
those would also apply to every line of the user's below our block, and cron does not unquote them.
cron hands the command to ``/bin/sh`` after turning each ``%`` into a line break and ``\%`` into
``%``, so every ``%`` of the command is written as ``\%`` (`command_of_line` reads it back).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence

from mnemo_ops.core.manifests import JobManifest
from mnemo_ops.foundation.errors import MnemoOpsError, UsageError
from mnemo_ops.scheduling.invocation import job_arguments, shell_assignments
from mnemo_ops.scheduling.text_diff import unified_diff

BEGIN_MARKER = "# BEGIN mnemo-ops (managed by `mnemo-ops cron install`; edit jobs/*.yaml or the config instead)"
END_MARKER = "# END mnemo-ops"
HEADER = """\
# mnemo-ops schedule, rendered from jobs/*.yaml by `mnemo-ops cron render`.
# Times are in the cron daemon's time zone. Exit code 75 means another mnemo-ops writer held the
# lock: the run was skipped and the next one catches up, so it needs no alarm."""
PORTABLE_NOTE = """\
# Portable form: no paths. cron starts jobs with a bare environment (PATH=/usr/bin:/bin, no
# HERMES_HOME), so put the folder of mnemo-ops on PATH and name your Hermes home in lines above
# this block, e.g. PATH=/home/you/.venv/bin:/usr/bin:/bin and HERMES_HOME=/home/you/.hermes;
# `mnemo-ops cron install` writes both into each line instead."""
"""Said by the portable rendering (crontab.example), which cannot know this machine's paths."""


def _first_sentence(text: str) -> str:
    sentence = " ".join(text.split()).split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= 100 else sentence[:97] + "..."


def cron_command(shell_text: str) -> str:
    """A shell command line as the command part of a crontab line: every ``%`` as ``\\%``.

    cron would end the command at a bare ``%`` (the rest becomes its stdin). A ``\\`` right before
    a ``%`` cannot be said at all (cron reads ``\\\\%`` as a backslash and a bare ``%``), so it is
    refused (exit 2).
    """
    if "\\%" in shell_text:
        raise UsageError(
            f"cannot write {shell_text!r} into a crontab line: cron cannot keep a backslash right "
            "before a '%'; rename the path, or use systemd or Hermes cron"
        )
    return shell_text.replace("%", "\\%")


def command_of_line(line: str) -> str | None:
    r"""The shell command of a crontab line as cron hands it to ``/bin/sh``: ``\%`` read back as
    ``%``, cut at a bare ``%`` (where cron's stdin for the command starts). None for a comment, a
    blank line, a ``NAME=value`` line or a line without a command."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", stripped):
        return None
    fields = stripped.split(None, 1 if stripped.startswith("@") else 5)
    if len(fields) < (2 if stripped.startswith("@") else 6):
        return None
    # What cron does before /bin/sh sees the command: "\\%" becomes "%", a bare "%" ends it.
    command, escaped = [], False
    for character in fields[-1]:
        if escaped:
            if character == "%":
                command[-1] = "%"
            else:
                command.append(character)
            escaped = False
            continue
        if character == "%":
            break
        command.append(character)
        escaped = character == "\\"
    return "".join(command)


def render(
    manifests: dict[str, JobManifest],
    command: str = "mnemo-ops",
    global_args: list[str] | None = None,
    disabled: set[str] | None = None,
    job_flags: Mapping[str, Sequence[str]] | None = None,
    environment: Mapping[str, str] | None = None,
) -> str:
    """The crontab text: a comment and one line per implemented job (disabled jobs commented out).

    `environment` (`invocation.scheduled_environment`) is set for each job by its own line; without
    it (the portable form) a comment says what to set above the block instead. A job whose module
    is not written yet is left out: cron would mail its "not implemented" error at every slot.
    """
    disabled = disabled or set()
    words = [*shell_assignments(environment or {})]
    words += [shlex.quote(part) for part in [command, *(global_args or [])]]
    prefix = " ".join(words)
    lines = [HEADER] if environment else [HEADER, PORTABLE_NOTE]
    lines.append("")
    for name, manifest in manifests.items():
        if not manifest.implemented:
            continue
        lines.append(f"# {name}: {_first_sentence(manifest.description)}")
        run_line = " ".join(shlex.quote(part) for part in job_arguments(name, job_flags))
        entry = f"{manifest.schedule} {cron_command(f'{prefix} {run_line}')}"
        lines.append(f"# (disabled in config) {entry}" if name in disabled else entry)
    return "\n".join(lines) + "\n"


def _crontab_program() -> list[str]:
    return shlex.split(os.environ.get("MNEMO_OPS_CRONTAB", "crontab"))


def read_crontab() -> str:
    """The user's current crontab ("" when they have none)."""
    try:
        completed = subprocess.run(
            [*_crontab_program(), "-l"], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise MnemoOpsError(
            "the crontab program was not found (install cron, or set MNEMO_OPS_CRONTAB)"
        ) from None
    if completed.returncode != 0:
        if "no crontab" in completed.stderr.lower():
            return ""
        raise MnemoOpsError(
            f"crontab -l failed: {completed.stderr.strip() or completed.returncode}"
        )
    return completed.stdout


def write_crontab(text: str) -> None:
    """Replace the user's crontab with `text` (through ``crontab -``)."""
    completed = subprocess.run(
        [*_crontab_program(), "-"], input=text, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise MnemoOpsError(f"crontab - failed: {completed.stderr.strip() or completed.returncode}")


def strip_block(current: str) -> str:
    """`current` without our marked block (and without the blank line we put before it)."""
    lines = current.splitlines()
    output: list[str] = []
    inside = False
    for line in lines:
        if line.strip() == BEGIN_MARKER:
            inside = True
            if output and not output[-1].strip():
                output.pop()
            continue
        if inside:
            if line.strip() == END_MARKER:
                inside = False
            continue
        output.append(line)
    if inside:
        raise MnemoOpsError(
            "the crontab has a mnemo-ops BEGIN marker without its END marker; fix it by hand"
        )
    return "\n".join(output) + ("\n" if output else "")


def with_block(current: str, rendered: str) -> str:
    """`current` with our block replaced by (or appended as) `rendered`."""
    base = strip_block(current)
    block = f"{BEGIN_MARKER}\n{rendered.rstrip()}\n{END_MARKER}\n"
    return f"{base}\n{block}" if base.strip() else block


def diff(before: str, after: str) -> str:
    """A unified diff between two crontab texts ("" when equal)."""
    return unified_diff(before, after, "crontab (current)", "crontab (new)")
