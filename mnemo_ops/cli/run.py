"""``mnemo-ops run JOB``: run one job through the runner and render its result.

Job options come through one path: ``--option KEY=VALUE`` (or ``--KEY`` for a boolean option, such
as ``--rebuild``), checked against the job's section of the settings schema, exactly like the config
file. An unknown or ill-typed option exits 2 naming the key.
"""

from __future__ import annotations

import typer

from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.cli.render import render_result
from mnemo_ops.core.results import Severity, Status
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.foundation.exit_codes import USAGE
from mnemo_ops.jobs import run_job
from mnemo_ops.settings import JOB_NAMES, JOB_SECTIONS
from mnemo_ops.settings.types import is_run_only


def parse_options(pairs: list[str] | None, flags: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` pairs and ``--flag`` words as raw option values (the schema types them later)."""
    options: dict[str, str] = {}
    for pair in pairs or []:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise UsageError(f"--option takes KEY=VALUE, got {pair!r}")
        options[key.strip()] = value
    for word in flags or []:
        if not word.startswith("--") or "=" in word or len(word) < 3:
            raise UsageError(
                f"unexpected argument {word!r}; job options are --option KEY=VALUE or --FLAG"
            )
        options[word[2:].replace("-", "_")] = "true"
    return options


def _flags_help() -> str:
    """The boolean options each job takes as ``--flag``, for ``run --help``."""
    parts = []
    for job in JOB_NAMES:
        flags = [
            f"--{key.replace('_', '-')}"
            for key, field in JOB_SECTIONS[job].model_fields.items()
            if is_run_only(field) and field.annotation is bool
        ]
        if flags:
            parts.append(f"{job}: {', '.join(flags)}")
    return "; ".join(parts)


@handle_errors
def run_command(
    ctx: typer.Context,
    job: str = typer.Argument(..., help="The job to run.", metavar="JOB"),
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Change nothing; report what would change."
    ),
    force: bool = typer.Option(False, "--force", help="Run even when disabled or not due."),
    wait: float = typer.Option(
        0.0,
        "--wait",
        help="Wait up to SECONDS for the writer lock.",
        metavar="SECONDS",
        min=0,
    ),
    option: list[str] = typer.Option(
        None, "--option", "-o", help="Job option KEY=VALUE (repeatable).", metavar="KEY=VALUE"
    ),
    timeout: int = typer.Option(
        None,
        "--timeout",
        help="Stop the job after SECONDS instead of its own timeout (a scheduler's shorter limit).",
        metavar="SECONDS",
        min=1,
    ),
) -> None:
    """Run one job now and render its result; the exit code is the run's."""
    options = parse_options(option, ctx.args)
    settings = invocation_state().settings
    if timeout is not None and job in JOB_NAMES:
        settings = settings.with_timeout(job, timeout)
    result = run_job(
        settings,
        job,
        dry_run=dry_run,
        force=force,
        wait_s=wait,
        options=options,
        show_progress=invocation_state().show_progress,
    )
    emit(
        result.to_dict(),
        lambda console: render_result(console, result, verbose=invocation_state().verbosity > 0),
    )
    if invocation_state().verbosity < 0 and not invocation_state().json:
        # -q (cron): stdout stays empty; problems still reach stderr, so cron mails only those.
        for warning in result.warnings:
            if warning.severity != Severity.INFO:
                invocation_state().err_console.print(
                    f"mnemo-ops: {result.job}: {warning.severity}: {warning.code}: {warning.message}",
                    markup=False,
                )
        if result.error and result.status == Status.FAILED:
            invocation_state().err_console.print(  # one unwrapped line, whatever the terminal width
                f"mnemo-ops: {result.job} failed: {result.error}", markup=False, soft_wrap=True
            )
    elif result.error and result.exit_code == USAGE and not invocation_state().json:
        # A run refused before it started (exit 2, e.g. the Mnemosyne version check): the same
        # one line on stderr as any other usage or database error, beside the rendered result.
        invocation_state().err_console.print(
            f"mnemo-ops: error: {result.error}", markup=False, soft_wrap=True
        )
    if result.status == Status.INTERRUPTED and not invocation_state().json:
        # Stopped by a signal: one line on stderr, in -q too (cron mails it), exit 130 or 143.
        invocation_state().err_console.print(
            f"mnemo-ops: {result.job} {result.error}", markup=False, soft_wrap=True
        )
    if result.status == Status.SKIPPED and result.error and not invocation_state().json:
        invocation_state().err_console.print(f"mnemo-ops: skipped: {result.error}", markup=False)
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    """Add the ``run`` command."""
    app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        help=(
            f"Run one job now. JOB is one of: {', '.join(JOB_NAMES)}.\n\n"
            "Job options: --option KEY=VALUE (any key of the job's config section, e.g. -o k=5 for "
            f"memory-maintain), or a job's boolean flag ({_flags_help()}).\n\n"
            "Exit codes: 0 ok, 1 failed (or the eval regressed), 2 usage/config/database problem, "
            "75 skipped because another writer holds the lock, 130/143 interrupted by "
            "SIGINT/SIGTERM (stopped at a safe point and recorded).\n\n"
            "Example: mnemo-ops run memory-maintain --dry-run"
        ),
    )(run_command)
