"""``mnemo-ops run JOB``: run one job through the runner and render its result."""

from __future__ import annotations

import typer

from mnemo_ops.commands.common import CURRENT, emit, handle_errors
from mnemo_ops.core.manifests import JOB_NAMES
from mnemo_ops.core.runner import run_job
from mnemo_ops.render import render_result


def _parse_options(pairs: list[str]) -> dict[str, str]:
    from mnemo_ops.core.errors import UsageError

    options = {}
    for pair in pairs or []:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise UsageError(f"--option takes KEY=VALUE, got {pair!r}")
        options[key.strip()] = value
    return options


def register(app: typer.Typer) -> None:
    """Add the ``run`` command."""

    @app.command(
        "run",
        help=(
            f"Run one job now. JOB is one of: {', '.join(JOB_NAMES)}.\n\n"
            "Exit codes: 0 ok, 1 failed (or the eval regressed), 2 usage/config/database problem, "
            "75 skipped because another writer holds the lock.\n\n"
            "Example: mnemo-ops run memory-maintain --dry-run"
        ),
    )
    @handle_errors
    def run_command(
        job: str = typer.Argument(..., help="The job to run.", metavar="JOB"),
        dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Change nothing; report what would change."),
        force: bool = typer.Option(False, "--force", help="Run even when disabled or not due."),
        wait: float = typer.Option(0.0, "--wait", help="Wait up to SECONDS for the writer lock.", metavar="SECONDS"),
        option: list[str] = typer.Option(None, "--option", "-o", help="Job option KEY=VALUE (repeatable).",
                                          metavar="KEY=VALUE"),
        rebuild: bool = typer.Option(False, "--rebuild", help="evening-batch: rebuild the topic map from scratch."),
        vacuum: bool = typer.Option(False, "--vacuum", help="monthly-maintenance: also VACUUM."),
    ) -> None:
        options = _parse_options(option)
        if rebuild:
            options["rebuild"] = True
        if vacuum:
            options["vacuum"] = True
        result = run_job(CURRENT.settings, job, dry_run=dry_run, force=force, wait_s=wait, options=options,
                         show_progress=CURRENT.show_progress)
        emit(result.to_dict(), lambda console: render_result(console, result, verbose=CURRENT.verbosity > 0))
        if CURRENT.verbosity < 0 and not CURRENT.json:
            # -q (cron): stdout stays empty; problems still reach stderr, so cron mails only those.
            for warning in result.warnings:
                if warning.severity != "info":
                    CURRENT.err_console.print(
                        f"mnemo-ops: {result.job}: {warning.severity}: {warning.code}: {warning.message}", markup=False)
            if result.error and result.status == "failed":
                CURRENT.err_console.print(f"mnemo-ops: {result.job} failed: {result.error}", markup=False)
        if result.status == "skipped" and result.error and not CURRENT.json:
            CURRENT.err_console.print(f"mnemo-ops: skipped: {result.error}", markup=False)
        raise typer.Exit(result.exit_code)
