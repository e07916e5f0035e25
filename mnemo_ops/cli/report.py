"""``mnemo-ops report``: print the morning report and write ``reports/YYYY-MM-DD.md``."""

from __future__ import annotations

import json
import sys

import typer

from mnemo_ops import database
from mnemo_ops.cli.common import handle_errors, invocation_state
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.foundation.writable import require_writable
from mnemo_ops.jobs.nightly_selfcare import report as morning_report
from mnemo_ops.jobs.nightly_selfcare import report_render


@handle_errors
def report_command(
    since: str = typer.Option(
        "24h", "--since", help="The period: 24h, 90m, 7d, 2w.", metavar="PERIOD"
    ),
    output_format: str = typer.Option(
        "text", "--format", help="text, markdown or json.", metavar="FORMAT"
    ),
    quiet_if_ok: bool = typer.Option(
        False, "--quiet-if-ok", help="Print nothing when nothing is at warning or above."
    ),
    no_write: bool = typer.Option(False, "--no-write", help="Do not write reports/YYYY-MM-DD.md."),
) -> None:
    """Print the morning report and write reports/YYYY-MM-DD.md."""
    if output_format not in report_render.FORMATS:
        raise UsageError(
            f"--format must be one of {', '.join(report_render.FORMATS)}, got {output_format!r}"
        )
    period = morning_report.parse_period(since)
    settings = invocation_state().settings
    # A missing or non-Mnemosyne database is exit 2 with one line, as for every job.
    database.open_memory_db(settings.db_path, readonly=True).close()
    if not no_write:
        require_writable(
            settings.reports_dir,
            "the morning report",
            "make it writable, point --state-dir at a writable folder, or pass --no-write",
        )
    built = morning_report.build_report(settings, since=period)
    written = None if no_write else report_render.write_report_file(settings, built)
    if quiet_if_ok and not built.needs_attention:
        raise typer.Exit(built.exit_code)
    if invocation_state().json:
        data = built.to_dict()
        data["written"] = str(written) if written else None
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    elif invocation_state().verbosity >= 0 or built.needs_attention:
        sys.stdout.write(report_render.render(built, output_format))
    sys.stdout.flush()
    raise typer.Exit(built.exit_code)


def register(app: typer.Typer) -> None:
    """Add the ``report`` command."""
    app.command(
        "report",
        help=(
            "Print the morning report: runs in the period (ok, failed, skipped), overdue jobs, every open "
            "warning by severity with the command that fixes it, backup status, the eval trend and memory "
            "growth per table against a week ago. Also writes <state_dir>/reports/YYYY-MM-DD.md.\n\n"
            "Exit codes: 0 nothing at error or above, 1 something at error or above, 2 usage or "
            "config error, a missing or non-Mnemosyne database, or an unwritable reports folder.\n\n"
            "Example, as a Hermes no_agent cron job (empty stdout is a silent tick):\n"
            "mnemo-ops report --since 24h --format markdown --quiet-if-ok"
        ),
    )(report_command)
