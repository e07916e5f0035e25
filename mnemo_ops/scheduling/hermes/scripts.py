"""The bash script Hermes runs for each of our jobs, ``$HERMES_HOME/scripts/mnemo-ops/<job>.sh``.

Hermes runs a ``.sh`` script under bash (cwd = its folder) and delivers its trimmed stdout: empty
stdout is a silent success, a non-zero exit or a timeout is an alert. So the script runs mnemo-ops
with ``-q`` (healthy runs print nothing), maps exit 75 (lock held: skipped, the next slot catches up)
to a silent success and turns a failure into one line; nightly-selfcare's script then prints the
morning report with ``--quiet-if-ok``, so the user hears from it only when something needs them.
Before both, the script exports the environment the install saw (HERMES_HOME, MNEMOSYNE_DATA_DIR,
MNEMO_OPS_CONFIG, PATH), shell-quoted: a gateway started from another shell runs the same home.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Mapping, Sequence

from mnemo_ops.scheduling.hermes.entries import NAME_PREFIX
from mnemo_ops.scheduling.hermes.paths import HermesPaths
from mnemo_ops.scheduling.invocation import job_arguments, shell_assignments, shell_line

SCRIPT_MARKER = "# Installed by `mnemo-ops hermes install`"
"""The line that marks a script as ours (a script without it is never overwritten or removed)."""
REPORT_JOB = "nightly-selfcare"
"""The job that writes the morning report; its script also delivers ``report --quiet-if-ok``."""
_RUN_PREFIX = "errors=$("
_RUN_SUFFIX = " 2>&1 >/dev/null)"
"""The script's run line is ``errors=$(<command> 2>&1 >/dev/null)``; `script_command` reads it back."""


def render_script(
    job: str,
    command: list[str],
    report_since: str,
    job_flags: Mapping[str, Sequence[str]] | None = None,
    environment: Mapping[str, str] | None = None,
) -> str:
    """The bash script Hermes runs for `job`; `command` is mnemo-ops with its global path options,
    run with `environment` (`invocation.scheduled_environment`) exported."""
    run_line = shell_line([*command, *job_arguments(job, job_flags)])
    lines = [
        "#!/usr/bin/env bash",
        f'{SCRIPT_MARKER} for the Hermes cron job "{NAME_PREFIX}{job}".',
        "# Reinstall to change it (edit jobs/*.yaml or the mnemo-ops config, not this file).",
        "# Hermes delivers this script's stdout: a healthy run prints nothing; a failure prints one",
        "# line and exits non-zero, which Hermes delivers as an alert. Exit 75 means another mnemo-ops",
        "# writer held the lock: the run was skipped and the next slot catches up, so it stays silent.",
        "set -u",
        *(f"export {assignment}" for assignment in shell_assignments(environment or {})),
        "",
        f"{_RUN_PREFIX}{run_line}{_RUN_SUFFIX}",
        "status=$?",
        'if [ "$status" -ne 0 ] && [ "$status" -ne 75 ]; then',
        "    line=$(printf '%s\\n' \"$errors\" | grep '^mnemo-ops: ' | tail -n 1)",
        f'    printf \'%s (exit %s)\\n\' "${{line:-mnemo-ops: {job} failed}}" "$status"',
    ]
    if job != REPORT_JOB:
        lines += ['    exit "$status"', "fi", "exit 0", ""]
        return "\n".join(lines)
    report_line = shell_line(
        [*command, "report", "--since", report_since, "--format", "markdown", "--quiet-if-ok"]
    )
    lines += [
        "fi",
        "# The morning report: printed (and so delivered) only when something needs the user;",
        "# its stdout goes out as it is, its stderr is kept for a one-line error (exit 2).",
        f"{{ report_errors=$({report_line} 2>&1 1>&3 3>&-); }} 3>&1",
        "report_status=$?",
        'if [ "$report_status" -gt 1 ]; then',
        "    line=$(printf '%s\\n' \"$report_errors\" | grep '^mnemo-ops: ' | tail -n 1)",
        '    printf \'%s (exit %s)\\n\' "${line:-mnemo-ops: report failed}" "$report_status"',
        "fi",
        'if [ "$status" -ne 0 ] && [ "$status" -ne 75 ]; then',
        '    exit "$status"',
        "fi",
        'exit "$report_status"',
        "",
    ]
    return "\n".join(lines)


def script_command(paths: HermesPaths, job: str) -> list[str] | None:
    """The mnemo-ops command line in `job`'s installed script (None when there is no script of ours)."""
    path = paths.script_path(job)
    if path.is_symlink():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith(_RUN_PREFIX) and line.endswith(_RUN_SUFFIX):
            with contextlib.suppress(ValueError):
                return shlex.split(line[len(_RUN_PREFIX) : -len(_RUN_SUFFIX)])
    return None
