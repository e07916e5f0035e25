"""``mnemo-ops jobs``: each job's schedule, last run, status and next run."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from mnemo_ops.commands.common import CURRENT, emit, handle_errors
from mnemo_ops.core import state
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.core.results import isoformat, utc_now
from mnemo_ops.jobs import is_implemented
from mnemo_ops.settings import Settings


def job_table(settings: Settings) -> list[dict[str, Any]]:
    """One row per job: name, schedule, implemented, enabled, last run, status, next run, overdue."""
    ledger = state.open_state_readonly(settings.state_db_path)
    last = state.last_runs(ledger)
    if ledger is not None:
        ledger.close()
    now = utc_now().astimezone()
    rows = []
    for name, manifest in effective_manifests(settings).items():
        previous_slot = manifest.previous_run(now)
        info = last.get(name, {})
        last_success = info.get("last_success")
        overdue = bool(is_implemented(name) and settings.job_option(name, "enabled", True) and last
                       and (last_success is None or last_success < isoformat(previous_slot)))
        rows.append({
            "job": name,
            "schedule": manifest.schedule,
            "implemented": is_implemented(name),
            "enabled": settings.job_option(name, "enabled", True),
            "last_run": info.get("started_at"),
            "last_status": info.get("status"),
            "last_success": last_success,
            "next_run": isoformat(manifest.next_run(now)),
            "overdue": overdue,
            "description": manifest.description,
        })
    return rows


def register(app: typer.Typer) -> None:
    """Add the ``jobs`` command."""

    @app.command("jobs", help="List the jobs with schedule, last run, status and next run.\n\nExample: mnemo-ops jobs")
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
                table.add_row(row["job"], row["schedule"], row["last_run"] or "never", status, row["next_run"])
            console.print(table)

        emit({"jobs": rows}, text)
