"""The evening batch's NREM and REM steps, after the four sleep steps of ``steps``.

Both share the run's `SleepRun` (``steps.sleep_run``) and one model layer (``mnemo_ops.models``), opened
by the first of them and closed when the batch ends; ``stats.model`` holds the layer's figures
(``tasks.summary`` for NREM, ``tasks.judgement`` for REM).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from mnemo_ops.core import state
from mnemo_ops.core.context import JobContext
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.jobs.evening_batch.consolidation.batch import BatchState
from mnemo_ops.jobs.evening_batch.sleep import edges, nrem, rem, store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.jobs.evening_batch.sleep.steps import sleep_run
from mnemo_ops.models import ModelLayer

LAYER_KEY = "models.layer"


def model_layer(ctx: JobContext, batch: BatchState, run: SleepRun) -> ModelLayer:
    """The run's model layer (opened once; its state.db connection closed when the batch ends)."""
    layer = run.carry.get(LAYER_KEY)
    if layer is None:
        state_db = None if ctx.dry_run else state.open_state(run.state_db_path)
        if state_db is not None:
            batch.cleanups.append(state_db.close)
        layer = ModelLayer.open(
            ctx.settings,
            state_db,
            job=ctx.job,
            dry_run=ctx.dry_run,
            warn=lambda code, message: ctx.warn(code, message, fix="llm models"),
        )
        run.carry[LAYER_KEY] = layer
    return layer


def nrem_step(ctx: JobContext, batch: BatchState) -> None:
    """Fuse tonight's clusters into bounded summaries (``sleep.nrem``)."""
    run = sleep_run(ctx, batch)
    if run is None:
        return
    # The tier is the summary repair's, so both rules agree on where a summary ranks.
    tier = ctx.settings.evening_batch.summary_tier
    _dream(
        ctx,
        batch,
        run,
        "nrem",
        ctx.settings.sleep.nrem,
        "summaries_fused",
        lambda sleep_run, layer: nrem.fuse(sleep_run, layer, tier),
    )


def rem_step(ctx: JobContext, batch: BatchState) -> None:
    """Add tonight's associations as extends edges (``sleep.rem``)."""
    run = sleep_run(ctx, batch)
    if run is None:
        return
    _dream(
        ctx,
        batch,
        run,
        "rem",
        ctx.settings.sleep.rem,
        "extends_edges_created",
        lambda sleep_run, layer: rem.associate(sleep_run, sleep_run.options, layer),
    )


def _dream(
    ctx: JobContext,
    batch: BatchState,
    run: SleepRun,
    stage: str,
    enabled: bool,
    count: str,
    work: Callable[[SleepRun, ModelLayer], dict[str, Any]],
) -> None:
    """Run one dream stage (`work` calls ``nrem.fuse`` or ``rem.associate``) with the run's model
    layer; a disabled stage records ``{"enabled": False}`` under `stage` and a count of 0."""
    if not enabled:
        run.stats[stage] = {"enabled": False}
        ctx.count(count, 0)
        return
    layer = model_layer(ctx, batch, run)
    run.stats[stage] = work(_settling_edge_pass(run), layer)
    ctx.result.stats["model"] = layer.stats()


def _settling_edge_pass(run: SleepRun) -> SleepRun:
    """`run` whose first write first records tonight's edge pass as done, when it ran in this run.

    Edges written tonight after the edges stage must not be downscaled tonight by a later run. The
    edges stage marks its night done only when it had work; when it ran in this run and found none,
    this marks it right before NREM or REM writes, so a second run that night (or one started again
    after a kill) leaves the new edges at their first weight, as the uninterrupted night does.
    """
    edge_pass = run.edge_pass
    if edge_pass is None or edge_pass.planned != 0 or edge_pass.done_before:
        return run
    first_write = run.before_write

    def before_write() -> None:
        first_write()
        state_db = run.open_state()
        try:
            if not store.stage_done(state_db, run.night.key, edges.STAGE):
                store.mark_stage_done(state_db, run.night.key, edges.STAGE, isoformat(utc_now()))
        finally:
            state_db.close()

    return dataclasses.replace(run, before_write=before_write)
