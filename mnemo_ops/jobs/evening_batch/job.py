"""evening-batch: episodic consolidation, the summary repair, the sleep stages, then the maps.

The steps run in order. A failing step is recorded with its error and the later steps still run;
the job then fails (exit 1) with every step's error collected, as borgmatic does, so monitoring sees
it. The sleep stages (``mnemo_ops/jobs/evening_batch/sleep``: reinforcement, importance, prominence, forgetting,
edges) run after the summary repair, so they see the new episodic rows, then NREM fuses clusters
into summaries and REM adds associations (``sleep/nrem.py``, ``sleep/rem.py``), all before the maps, so the maps
see what they changed.

With ``--if-needed`` (or ``evening_batch.scheduled_if_needed`` for the scheduled run) the batch
runs only when an adaptive trigger holds (``sleep.triggers``); that is decided in `preflight`,
before the recall guard's trial, so a night that needs no sleep costs no copy of the database.
"""

from __future__ import annotations

from mnemo_ops.core import state
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult, Severity
from mnemo_ops.foundation.clock import local_now, utc_now
from mnemo_ops.guard.recall_guard import is_marked_not_needed, mark_not_needed
from mnemo_ops.jobs.evening_batch.consolidation import steps as memory_steps
from mnemo_ops.jobs.evening_batch.consolidation.batch import Step, run_steps
from mnemo_ops.jobs.evening_batch.sleep import dream_steps, triggers
from mnemo_ops.jobs.evening_batch.sleep import steps as sleep_steps
from mnemo_ops.jobs.evening_batch.sleep.night import TRIGGERS_KEY
from mnemo_ops.jobs.evening_batch.topics import steps as map_steps

STEPS: tuple[Step, ...] = (
    Step("consolidation", memory_steps.consolidation_step),
    Step("summary-repair", memory_steps.summary_repair_step),
    Step("reinforcement", sleep_steps.reinforcement_step),
    Step("importance", sleep_steps.importance_step),
    Step("prominence", sleep_steps.prominence_step),
    Step("forgetting", sleep_steps.forgetting_step),
    Step("edges", sleep_steps.edges_step),
    Step("nrem", dream_steps.nrem_step),
    Step("rem", dream_steps.rem_step),
    Step("topic-map", map_steps.topic_map_step),
    Step("seed-map", map_steps.seed_map_step),
    Step("freshness", map_steps.freshness_step),
)


def preflight(ctx: JobContext) -> None:
    """Decide the adaptive triggers (before the recall guard's trial) and record the decision.

    ``stats.sleep_triggers`` records it for the output and the ledger (where later nights read the
    last sleep); a night without sleep is passed on to `run` and the guard as the not-needed mark
    (``ctx.not_needed``), never read back from the stats."""
    connection = ctx.open_db(readonly=True)
    ledger = state.open_state_readonly(ctx.settings.state_db_path)
    try:
        decision = triggers.decide(
            connection,
            ledger,
            ctx.settings.sleep,
            tuple(ctx.settings.monthly_maintenance.multi_valued_predicates),
            if_needed=ctx.options.if_needed,
            force=ctx.force,
            now_local=local_now(),
            now_utc=utc_now(),
        )
    finally:
        connection.close()
        if ledger is not None:
            ledger.close()
    ctx.result.stats[TRIGGERS_KEY] = decision.to_stats()
    if decision.checked:
        ctx.warn("sleep-triggers", decision.summary(), Severity.INFO)
    if not decision.sleep:
        mark_not_needed(ctx, "no adaptive trigger fired")


def run(ctx: JobContext) -> JobResult:
    """Run the evening batch (see the module docstring)."""
    if is_marked_not_needed(ctx):
        return ctx.result  # --if-needed and no trigger fired: nothing to do, nothing written
    return run_steps(ctx, STEPS)
