"""Jobs: overdue against their schedule (croniter, with a grace period), failing, always skipped, or
installed in no scheduler (one info line, not one warning per job: nothing is late on day one).

Built on `mnemo_ops.scheduling.job_table.job_table` (the same view as ``mnemo-ops jobs``), with a grace
period so a job whose slot has just passed, and which may still be running, is not called overdue.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from mnemo_ops.core import state
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.jobs.nightly_selfcare.audits.outcome import AuditOutcome
from mnemo_ops.scheduling import install_times
from mnemo_ops.scheduling.job_table import is_overdue, job_table
from mnemo_ops.settings import Settings

CODE_PREFIXES = ("job-",)
SKIPPED_RUNS_ALARM = 3
"""A job skipped (lock held) this many times in a row is flagged: it may never get its turn."""


def _recent_statuses(settings: Settings, job: str, limit: int) -> list[str]:
    ledger = state.open_state_readonly(settings.state_db_path)
    if ledger is None or "runs" not in ledger.table_names():
        return []
    try:
        return [
            row["status"]
            for row in ledger.query(
                "SELECT status FROM runs WHERE job = ? AND dry_run = 0 ORDER BY id DESC LIMIT ?",
                [job, limit],
            )
        ]
    finally:
        ledger.close()


def overdue_jobs(settings: Settings, now: datetime, rows: list[dict] | None = None) -> list[dict]:
    """The rows of `job_table` that are overdue even after the grace period."""
    grace = timedelta(minutes=settings.nightly_selfcare.overdue_grace_minutes)
    manifests = effective_manifests(settings)
    overdue = []
    for row in job_table(settings) if rows is None else rows:
        if not row["overdue"]:
            continue
        slot = manifests[row["job"]].previous_run((now - grace).astimezone())
        since = install_times.parse(row["installed_since"])
        if is_overdue(slot, row["scheduled"], since, row["last_success"]):
            overdue.append({**row, "missed_slot": isoformat(slot)})
    return overdue


def not_scheduled(rows: list[dict]) -> list[str]:
    """Implemented, enabled jobs that no scheduler runs for this database."""
    return [
        row["job"] for row in rows if row["implemented"] and row["enabled"] and not row["scheduled"]
    ]


def audit(settings: Settings, now: datetime) -> AuditOutcome:
    """Flag overdue, failing and repeatedly skipped jobs."""
    outcome = AuditOutcome("jobs")
    rows = job_table(settings)
    overdue = overdue_jobs(settings, now, rows)
    unscheduled = not_scheduled(rows)
    if unscheduled:
        # One line, not one per job: on a fresh install nothing is late, it is just not scheduled.
        everything = len(unscheduled) == sum(
            1 for row in rows if row["implemented"] and row["enabled"]
        )
        outcome.warn(
            "job-not-installed",
            "info",
            (
                "no job is installed in a scheduler yet, so none runs on its own"
                if everything
                else f"not installed in any scheduler: {', '.join(unscheduled)}"
            ),
            fix="mnemo-ops cron install  # or: mnemo-ops hermes install, mnemo-ops systemd install --user",
        )
    for row in overdue:
        last = row["last_success"] or "never"
        outcome.warn(
            "job-overdue",
            "warning",
            f"{row['job']} missed its {row['missed_slot']} slot (schedule {row['schedule']}, "
            f"last success {last})",
            fix=f"mnemo-ops run {row['job']}",
        )
    for row in rows:
        if not row["enabled"] or row["last_status"] is None:  # a ledger row means it ran here
            continue
        statuses = _recent_statuses(settings, row["job"], 20)
        if row["last_status"] == "failed":
            streak = next(
                (index for index, status in enumerate(statuses) if status != "failed"),
                len(statuses),
            )
            outcome.warn(
                "job-failing",
                "error",
                f"{row['job']} failed on its last {streak} run(s); latest at {row['last_run']}",
                fix=f"mnemo-ops -v run {row['job']}",
            )
        elif statuses[:SKIPPED_RUNS_ALARM] == ["skipped"] * SKIPPED_RUNS_ALARM:
            outcome.warn(
                "job-skipped-repeatedly",
                "warning",
                f"{row['job']} was skipped on its last {SKIPPED_RUNS_ALARM} runs (another writer held the lock)",
                fix="mnemo-ops status",
            )
    outcome.stats.update(
        {
            "overdue": [row["job"] for row in overdue],
            "not_installed": unscheduled,
            "implemented": sum(1 for row in rows if row["implemented"]),
        }
    )
    return outcome
