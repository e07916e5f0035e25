"""The evening batch's memory steps: Mnemosyne's consolidation (bounded), then the summary repair."""

from __future__ import annotations

import dataclasses
from typing import Any

from mnemo_ops import database
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import Severity
from mnemo_ops.core.state import StateTable
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.jobs.evening_batch.consolidation import episodic, summary_repair
from mnemo_ops.jobs.evening_batch.consolidation.batch import BatchState

# --- step 1: consolidation -------------------------------------------------------------------------

SLEEP_FIGURES = (
    "status",
    "model",
    "methods",
    "sessions_scanned",
    "sessions_consolidated",
    "sessions_deferred",
    "sessions_unchanged",
    "llm_used",
    "model_refresh",
    "cycles",
    "sleep_batch",
)
"""What ``stats.consolidation`` keeps of the summary of Mnemosyne's sleep."""


@dataclasses.dataclass
class Consolidation:
    """What the consolidation step found and did (``stats.consolidation``).

    - `cutoff`: the age cut-off of Mnemosyne's sleep (``episodic.sleep_cutoff``);
    - `pending`: the work before the sleep (``episodic.pending_work``: ``eligible``, ``orphan_claims``);
    - `sleep`: the summary Mnemosyne's sleep returned, None while it has not (nothing pending, or
      it failed).
    """

    cutoff: str
    pending: dict[str, int]
    sleep: dict[str, Any] | None = None

    def to_stats(self) -> dict[str, Any]:
        """``stats.consolidation``: the cut-off and the pending work, then the sleep's figures."""
        stats: dict[str, Any] = {"cutoff": self.cutoff, **self.pending}
        if self.sleep is not None:
            stats.update({key: self.sleep.get(key) for key in SLEEP_FIGURES})
        return stats


LEFT_OVER = StateTable(
    "sleep_left_over",
    {"session_id": str, "eligible": int, "slept_at": str},
    pk="session_id",
)
"""Sessions a night's sleep visited and left rows in that it did not take (Mnemosyne's own sleep
has filters of its own), with how many were left. While a session's count of rows to take stays
the same, nothing changed there since, and the next nights skip it: it would otherwise be slept
again every night, and with the nightly quota, oldest first, a few such sessions could take every
place in the quota."""


def _left_over(ctx: JobContext) -> dict[str, int]:
    """The sessions skipped tonight unless their rows changed (empty before the first night)."""
    ledger = ctx.open_state()
    if ledger is None:
        return {}
    try:
        if LEFT_OVER.name not in ledger.table_names():
            return {}
        return {row["session_id"]: row["eligible"] for row in ledger[LEFT_OVER.name].rows}
    finally:
        ledger.close()


def _record_left_over(ctx: JobContext, sessions: list[dict]) -> None:
    """Remember the sessions slept tonight that kept rows to take; forget the ones finished."""
    ledger = ctx.open_state()
    try:
        LEFT_OVER.ensure(ledger)
        table = ledger[LEFT_OVER.name]
        now = isoformat(utc_now())
        for entry in sessions:
            left = int(entry.get("eligible") or 0) - int(entry.get("items") or 0)
            if left > 0:
                table.upsert(
                    {"session_id": entry["session_id"], "eligible": left, "slept_at": now},
                    pk="session_id",
                )
            else:
                table.delete_where("session_id = ?", [entry["session_id"]])
    finally:
        ledger.close()


def consolidation_step(ctx: JobContext, batch: BatchState) -> None:
    """Mnemosyne's own sleep, session by session (``reclaim_orphans`` first), counts into `changes`."""
    stale_seconds = ctx.options.reclaim_stale_seconds
    connection = ctx.open_db(readonly=True)
    try:
        pending = episodic.pending_work(connection, stale_seconds)
    finally:
        connection.close()
    done = Consolidation(cutoff=episodic.sleep_cutoff(), pending=pending)
    # Recorded now, so a sleep that fails leaves what was pending; completed once it has run.
    ctx.result.stats["consolidation"] = done.to_stats()
    if not pending["eligible"] and not pending["orphan_claims"]:
        ctx.count("items_consolidated", 0)
        ctx.count("summaries_created", 0)
        return
    if not ctx.dry_run:
        ctx.before_write()
    summary = episodic.run_sleep(
        ctx.settings.db_path,
        ctx.settings.hermes_home,
        dry_run=ctx.dry_run,
        model=ctx.options.consolidation_model,
        reclaim_stale_seconds=stale_seconds,
        timeout_s=ctx.manifest.timeout,
        max_rows_per_summary=ctx.options.max_rows_per_summary,
        pending_rows=pending["eligible"] + pending["orphan_claims"],
        max_sessions=ctx.options.max_sessions_per_night,
        left_over=_left_over(ctx),
        inspect_snapshot=(lambda path: _planned_repairs(ctx, path)) if ctx.dry_run else None,
    )
    if ctx.dry_run and summary.get("inspection") is not None:
        batch.repairs_after_consolidation = summary["inspection"]
    if not ctx.dry_run:
        _record_left_over(ctx, summary.get("sessions") or [])
    for name in (
        "items_consolidated",
        "summaries_created",
        "claims_reclaimed",
        "conflicts_resolved",
        "episodic_degraded",
    ):
        ctx.count(name, int(summary.get(name, 0) or 0))
    done.sleep = summary
    ctx.result.stats["consolidation"] = done.to_stats()
    if summary.get("sessions_deferred"):
        ctx.warn(
            "consolidation-sessions-deferred",
            f"{summary['sessions_deferred']} session(s) with rows to consolidate wait for the next "
            f"night (evening_batch.max_sessions_per_night: {ctx.options.max_sessions_per_night}; "
            "the oldest sleep first)",
            Severity.INFO,
        )
    if summary.get("errors"):
        details = "; ".join(
            f"{item.get('session_id')}: {item.get('error')}" for item in summary["errors"]
        )
        raise MnemoOpsError(
            f"Mnemosyne sleep failed for {len(summary['errors'])} session(s): {details}"
        )


# --- step 2: summary repair ------------------------------------------------------------------------


def _planned_repairs(ctx: JobContext, db_path) -> int | None:
    """How many summaries the repair would change in the database at `db_path` (None: repair off)."""
    if not ctx.options.summary_repair:
        return None
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return len(summary_repair.plan(connection, ctx.options.summary_tier))
    finally:
        connection.close()


def summary_repair_step(ctx: JobContext, batch: BatchState) -> None:
    """Every summary, ours or Mnemosyne's auto-sleep's, at the summary tier with its sources' time."""
    tier = ctx.options.summary_tier
    if not ctx.options.summary_repair:
        ctx.result.stats["summary_repair"] = {"enabled": False}
        ctx.warn(
            "summary-repair-off",
            "summary repair is off (evening_batch.summary_repair: false): summaries written at tier 1 "
            "with the time of the sleep can hide their sources from recall",
            Severity.INFO,
        )
        return
    if ctx.dry_run:
        if batch.repairs_after_consolidation is not None:
            planned = batch.repairs_after_consolidation
        else:
            planned = _planned_repairs(ctx, ctx.settings.db_path) or 0
        ctx.result.stats["summary_repair"] = {"tier": tier, "planned": planned}
        ctx.count("summaries_repaired", planned)
        return
    connection = ctx.open_db()
    try:
        repairs = summary_repair.plan(connection, tier)
        ctx.result.stats["summary_repair"] = {"tier": tier, "planned": len(repairs)}
        if not repairs:
            ctx.count("summaries_repaired", 0)
            return
        ctx.before_write()
        state_db = ctx.open_state()
        try:
            changed = summary_repair.apply(connection, state_db, ctx.settings.database_key, repairs)
        finally:
            state_db.close()
    finally:
        connection.close()
    ctx.count("summaries_repaired", changed)
