"""``mnemo-ops jobs``: each job's schedule, last run, status, next run, and where it is installed."""

from __future__ import annotations

import typer

from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.cli.common import table as results_table
from mnemo_ops.scheduling.installations import UNINSTALL, duplicates, installations
from mnemo_ops.scheduling.job_table import job_table


def _twice_warning(job: str, places: list) -> dict:
    schedulers = sorted({place.scheduler for place in places})
    names = ", ".join(place.where for place in places)
    fix = " or ".join(f"`{UNINSTALL[name]}`" for name in schedulers)
    return {
        "code": "job-installed-twice",
        "severity": "warning",
        "job": job,
        "message": (
            f"{job} is installed {len(places)} times for this database ({names}): the schedulers "
            f"race for the writer lock at every slot; keep one ({fix})"
        ),
    }


@handle_errors
def jobs_command() -> None:
    """List each job's schedule, last run, status, next run and where it is installed."""
    settings = invocation_state().settings
    found = installations(settings)
    rows = job_table(settings, found)
    for row in rows:
        row["installed"] = [item.to_dict() for item in found if item.job == row["job"]]
    warnings = [_twice_warning(job, places) for job, places in duplicates(found).items()]

    def text(console) -> None:
        table = results_table(title="mnemo-ops jobs")
        for column in ("job", "schedule", "last run", "status", "next run", "installed"):
            table.add_column(column)
        for row in rows:
            status = row["last_status"] or "-"
            if not row["implemented"]:
                status = "not implemented"
            elif not row["enabled"]:
                status = "disabled"
            elif row["overdue"]:
                status += " (overdue)"
            places = [
                item["scheduler"] + ("" if item["active"] else " (off)")
                for item in row["installed"]
            ]
            table.add_row(
                row["job"],
                row["schedule"],
                row["last_run"] or "never",
                status,
                row["next_run"],
                ", ".join(places) or "-",
            )
        console.print(table)
        for warning in warnings:
            invocation_state().err_console.print(
                f"mnemo-ops: warning: {warning['message']}", markup=False
            )

    emit({"jobs": rows, "warnings": warnings}, text)


def register(app: typer.Typer) -> None:
    """Add the ``jobs`` command."""
    app.command(
        "jobs",
        help="List the jobs with schedule, last run, status, next run and where each is installed "
        "(crontab, Hermes cron, systemd); warns when a job is installed twice for one database.\n\n"
        "Example: mnemo-ops jobs",
    )(jobs_command)
