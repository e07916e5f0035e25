"""The backup job (02:00 daily): one verified checkpoint of the memory DB, memory blocks and state.db.

The first backup of a UTC day is that day's daily; later ones the same day are manual ones, kept by
their own count (``checkpoints/retention.py``), so backups made by hand never push out a daily or a
job's rollback point.

The checkpoints themselves (create, verify, retain) live in ``mnemo_ops.checkpoints``.
"""

from __future__ import annotations

from mnemo_ops.checkpoints import catalog, chunk_store, compaction, retention
from mnemo_ops.checkpoints.create import (
    CheckpointError,
    CheckpointOutcome,
    check_free_space,
    create_checkpoint,
    estimated_size,
)
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.clock import utc_now
from mnemo_ops.settings import Settings


def _report_failure(ctx: JobContext, outcome: CheckpointOutcome) -> None:
    where = f"kept aside in {outcome.path}"
    if outcome.source_corrupt:
        ctx.warn(
            "source-db-corrupt",
            f"{ctx.settings.db_path} is damaged: {outcome.problems[-1]}; the checkpoint "
            f"was {where} and no good checkpoint was replaced",
            severity="critical",
            fix="mnemo-ops backup list  # then: mnemo-ops backup restore NAME",
        )
    ctx.warn(
        "checkpoint-verification-failed",
        f"checkpoint {outcome.name} failed verification ({outcome.problems[0]}); {where}",
        severity="error",
    )
    ctx.result.fail(
        f"checkpoint {outcome.name} failed verification; {where}; earlier checkpoints are intact"
    )


def _would(ctx: JobContext, kind: str, moment) -> JobResult:
    """A dry run: the checkpoint it would make and what retention would then remove."""
    settings = ctx.settings
    name = catalog.checkpoint_name(kind, None, moment)
    incoming = retention.Checkpoint(name, kind, moment, verified=True)
    removals = [
        other for other in catalog.plan_retention(settings, incoming).removals() if other != name
    ]
    ctx.count("checkpoints_created", 1)
    ctx.count("checkpoints_removed", len(removals))
    ctx.result.stats.update(
        {
            "would_create": name,
            "kind": kind,
            "would_remove": removals,
            "estimated_size_bytes": estimated_size(settings),
            "backups_dir": str(settings.backups_dir),
        }
    )
    if _compacts(settings):
        # What compaction would take now; the new checkpoint and retention may change it a little.
        ctx.result.stats["would_compact"] = compaction.plan(
            settings, settings.backup.compact_dead_share
        ).to_dict()
    return ctx.result


def _compacts(settings: Settings) -> bool:
    return settings.backup.layout == "deduplicated" and settings.backup.compact_dead_share < 1


def _compact(ctx: JobContext) -> None:
    """Compact the store's mostly unused packs (after retention: it is what makes them unused).

    A failure here loses nothing (the old packs stay until every index names the new one) and
    leaves the new checkpoint good, so it is a warning, not a failed run.
    """
    settings = ctx.settings
    try:
        keep_free = check_free_space(settings, shares_previous=True)
        with ctx.progress.bar("compacting the checkpoint store") as bar:
            done = compaction.compact(
                settings,
                settings.backup.compact_dead_share,
                keep_free,
                on_bytes=bar.advance,
                on_plan=lambda chosen: bar.update(total=chosen.bytes_written),
            )
    except (CheckpointError, chunk_store.ChunkError, OSError) as error:
        corrupt = isinstance(error, chunk_store.ChunkError) and "corrupt" in str(error)
        ctx.warn(
            "pack-compaction-failed",
            f"the checkpoint store was not compacted: {error}",
            severity="error" if corrupt else "warning",
            fix="mnemo-ops backup list  # then: mnemo-ops backup verify NAME" if corrupt else None,
        )
        return
    if done.pack is not None:
        ctx.count("packs_compacted", len(done.plan.packs))
        ctx.result.stats["compaction"] = {
            **done.plan.to_dict(),
            "pack": done.pack,
            "checkpoints_rewritten": done.rewritten,
            "bytes_removed": done.removed_bytes,
        }


def run(ctx: JobContext) -> JobResult:
    """Make a verified checkpoint (the day's daily, or a manual one), then apply retention.

    Changes are counted once they are made: a run that fails part-way reports only what it did.
    """
    settings = ctx.settings
    moment = utc_now()
    kind = catalog.backup_kind(settings, moment)
    if ctx.dry_run:
        return _would(ctx, kind, moment)
    try:
        outcome = create_checkpoint(settings, kind, progress=ctx.progress, moment=moment)
    except CheckpointError as error:
        ctx.warn(error.code, error.message, severity=error.severity)
        raise
    ctx.result.stats.update(outcome.stats)
    ctx.result.stats["kind"] = kind
    if not outcome.verified:
        # A bad night pushes out no good checkpoint: only old failed ones are pruned.
        plan = catalog.plan_retention(settings)
        doomed = {
            decision.name
            for decision in plan.decisions
            if not decision.keep and decision.role == retention.FAILED
        }
        removed = catalog.remove_checkpoints(
            [info for info in catalog.list_checkpoints(settings) if info.name in doomed]
        )
        catalog.collect_chunks(settings)  # the packs only those failed ones named
        ctx.count("checkpoints_created", 0)
        ctx.count("checkpoints_removed", len(removed))
        ctx.count("checkpoints_failed", 1)
        _report_failure(ctx, outcome)
        return ctx.result
    ctx.count("checkpoints_created", 1)
    ctx.result.checkpoint = outcome.name
    removed = catalog.apply_retention(settings)
    ctx.count("checkpoints_removed", len(removed))
    ctx.result.stats["removed"] = removed
    if _compacts(settings):
        _compact(ctx)
    if outcome.state_db_problem is not None:
        ctx.warn(
            "state-db-damaged",
            f"{settings.state_db_path} fails integrity_check: {outcome.state_db_problem}",
            severity="error",
        )
    return ctx.result
