"""The evening batch's NREM and REM steps, after the four sleep steps of ``steps``.

Both share the run's `SleepRun` (``steps.sleep_run``) and one model layer (``mnemo_ops.models``), opened
by the first of them and closed when the batch ends; ``stats.model`` holds the layer's figures
(``tasks.summary`` for NREM, ``tasks.judgement`` for REM).
"""

from __future__ import annotations

from mnemo_ops.consolidation.batch import BatchState
from mnemo_ops.core import state
from mnemo_ops.core.context import JobContext
from mnemo_ops.models import ModelLayer
from mnemo_ops.sleep import nrem, rem
from mnemo_ops.sleep.context import SleepRun
from mnemo_ops.sleep.steps import sleep_run

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
    options = nrem.NremOptions.from_settings(ctx.settings)
    if not options.enabled:
        run.stats["nrem"] = {"enabled": False}
        ctx.count("summaries_fused", 0)
        return
    layer = model_layer(ctx, batch, run)
    run.stats["nrem"] = nrem.fuse(run, options, layer)
    ctx.result.stats["model"] = layer.stats()


def rem_step(ctx: JobContext, batch: BatchState) -> None:
    """Add tonight's associations as extends edges (``sleep.rem``)."""
    run = sleep_run(ctx, batch)
    if run is None:
        return
    options = rem.RemOptions.from_settings(ctx.settings)
    if not options.enabled:
        run.stats["rem"] = {"enabled": False}
        ctx.count("extends_edges_created", 0)
        return
    layer = model_layer(ctx, batch, run)
    run.stats["rem"] = rem.associate(run, options, layer)
    ctx.result.stats["model"] = layer.stats()
