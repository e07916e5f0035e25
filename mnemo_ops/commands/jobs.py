"""``mnemo-ops jobs``: each job's schedule, last run, status and next run."""

from __future__ import annotations

import typer
from rich.table import Table

from mnemo_ops.commands.common import CURRENT, emit, handle_errors
from mnemo_ops.scheduling.job_table import job_table


def register(app: typer.Typer) -> None:
    """Add the ``jobs`` command."""

    @app.command(
        "jobs",
        help="List the jobs with schedule, last run, status and next run.\n\nExample: mnemo-ops jobs",
    )
    @handle_errors
    def jobs_command() -> None:
        rows = job_table(CURRENT.settings)

        def text(console) -> None:
            table = Table(title="mnemo-ops jobs")
            for column in ("job", "schedule", "last run", "status", "next run"):
                table.add_column(column)
            for row in rows:
                status = row["last_status"] or "-"
                if not row["implemented"]:
                    status = "not implemented"
                elif not row["enabled"]:
                    status = "disabled"
                elif row["overdue"]:
                    status += " (overdue)"
                table.add_row(
                    row["job"], row["schedule"], row["last_run"] or "never", status, row["next_run"]
                )
            console.print(table)

        emit({"jobs": rows}, text)
