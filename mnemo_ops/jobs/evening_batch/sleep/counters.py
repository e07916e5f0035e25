"""The self-model counters: what mnemo-ops has done to the agent's memory, read from the run ledger.

Computed from state.db ``runs`` (the results of real runs; dry runs are never recorded there), never
written into the agent's memory: runs per job and how they ended, sleeps (evening-batch runs that ran
the sleep stages on the live database), and the sums of what those runs changed: memories archived,
memories closed by a proven contradiction, confirmations, edges strengthened; memories restored are
the ``forgotten restore`` runs, which the command records in the ledger as ``forgotten-restore``.
"""

from __future__ import annotations

import json
from typing import Any

from mnemo_ops.jobs.evening_batch.sleep.night import JOB, was_a_sleep

RESTORE_JOB = "forgotten-restore"
"""The ledger name of ``mnemo-ops forgotten restore`` (a command, recorded like a run)."""

SUMMED = {
    "memories_archived": (JOB, "memories_archived"),
    "memories_superseded": (JOB, "memories_superseded"),
    "confirmations": (JOB, "confirmations"),
    "edges_strengthened": (JOB, "edges_strengthened"),
    "edges_downscaled": (JOB, "edges_downscaled"),
    "memories_restored": (RESTORE_JOB, "memories_restored"),
}


def self_model(ledger) -> dict[str, Any]:
    """The counters (module docstring); zeros when there is no ledger yet."""
    counters: dict[str, Any] = {"runs": {}, "sleeps": 0, "last_sleep": None}
    counters.update({name: 0 for name in SUMMED})
    if ledger is None or "runs" not in ledger.table_names():
        return counters
    for row in ledger.query(
        "SELECT job, status, count(*) AS runs FROM runs WHERE dry_run = 0 GROUP BY job, status "
        "ORDER BY job, status"
    ):
        per_job = counters["runs"].setdefault(row["job"], {"total": 0})
        per_job[row["status"]] = row["runs"]
        per_job["total"] += row["runs"]
    for row in ledger.query(
        "SELECT job, started_at, result_json FROM runs WHERE dry_run = 0 AND job IN (?, ?) "
        "ORDER BY id",
        [JOB, RESTORE_JOB],
    ):
        try:
            result = json.loads(row["result_json"] or "{}")
        except ValueError:
            continue
        changes = result.get("changes") or {}
        for name, (job, key) in SUMMED.items():
            if row["job"] == job:
                counters[name] += int(changes.get(key) or 0)
        slept = (result.get("stats") or {}).get("sleep") or {}
        if row["job"] == JOB and slept.get("night") and was_a_sleep(result):
            counters["sleeps"] += 1
            counters["last_sleep"] = row["started_at"]
    return counters
