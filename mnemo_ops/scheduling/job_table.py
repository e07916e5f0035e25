"""The schedule view: for each job its schedule, last run and status, next run and whether it is overdue.

The same rows serve ``mnemo-ops jobs``, the overdue-jobs audit and the morning report.
"""

from __future__ import annotations

from typing import Any

from mnemo_ops.core import state
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.foundation.clock import isoformat, utc_now
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
        overdue = bool(
            manifest.implemented
            and settings.job(name).enabled
            and last
            and (last_success is None or last_success < isoformat(previous_slot))
        )
        rows.append(
            {
                "job": name,
                "schedule": manifest.schedule,
                "implemented": manifest.implemented,
                "enabled": settings.job(name).enabled,
                "last_run": info.get("started_at"),
                "last_status": info.get("status"),
                "last_success": last_success,
                "next_run": isoformat(manifest.next_run(now)),
                "overdue": overdue,
                "description": manifest.description,
            }
        )
    return rows
