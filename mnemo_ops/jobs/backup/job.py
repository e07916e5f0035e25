"""The backup job (02:00 daily): one verified checkpoint of the memory DB, memory blocks and state.db.

The first backup of a UTC day is that day's daily; later ones the same day are manual ones, kept by
their own count (``checkpoints/retention.py``), so backups made by hand never push out a daily or a
job's rollback point.

With ``backup.copy_to`` each verified backup is also copied to a second place (another disk, or
another machine through rsync or rclone), verified there, and kept by that place's own count; the
copy runs after the writer lock is let go, and a failed copy is a warning: the local backup stands.

The checkpoints themselves (create, verify, retain, copy) live in ``mnemo_ops.checkpoints``.
"""

from __future__ import annotations

from mnemo_ops.checkpoints import catalog, chunk_store, compaction, retention, second_copy
from mnemo_ops.checkpoints.create import (
    CheckpointError,
    CheckpointOutcome,
    check_free_space,
    create_checkpoint,
    estimated_size,
)
from mnemo_ops.checkpoints.files import remove_tree
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.clock import utc_now
from mnemo_ops.settings import Settings

COPY_FAILED = "backup-copy-failed"
COPY_FIX = "mnemo-ops run backup  # after fixing the target; the local checkpoint stands"


def preflight(ctx: JobContext) -> None:
    """Refuse a run whose ``backup.copy_to`` names rsync or rclone when that tool is not on
    PATH (exit 2, one line, dry runs too), before anything is written."""
    target = second_copy.configured_target(ctx.settings)
    if target is not None:
        second_copy.require_tool(target)


def _would_copy(settings: Settings, name: str) -> dict | None:
    """What a dry run says of the second copy: where it would go, how much, what the target's
    retention would then remove (folders only). Reads only."""
    target = second_copy.configured_target(settings)
    if target is None:
        return None
    plan: dict = {"target": target.describe(), "name": name, "kind": target.kind}
    if target.kind == "folder":
        root = target.folder
        plan["target_exists"] = root.is_dir() and not root.is_symlink()
        if plan["target_exists"]:
            doomed = second_copy.copy_retention_plan(root, settings.backup.copy_keep - 1)
            plan["would_remove"] = [info.name for info in doomed]
    return plan


def _copy(ctx: JobContext, info: catalog.CheckpointInfo) -> None:
    """Stage the new checkpoint under the lock, let go of the lock, copy and verify it there.

    A failure is a warning, never a failed run: the local checkpoint is verified and stands.
    """
    settings = ctx.settings
    target = second_copy.configured_target(settings)
    if target is None:
        return
    staged = None
    try:
        second_copy.remove_stale_stagings(settings, older_than_s=ctx.manifest.timeout)
        staged = second_copy.stage(settings, info)
        # Everything the copy reads is staged (hard links): the lock is not needed for a copy
        # that may take as long as the disk or the network makes it.
        ctx.release_lock()
        with ctx.progress.bar(f"copying {info.name} to {target.describe()}"):
            outcome = second_copy.copy(staged, info.name, target, settings.backup.copy_keep)
    except (second_copy.CopyError, chunk_store.ChunkError, OSError) as error:
        ctx.warn(
            COPY_FAILED,
            f"the second copy of {info.name} to {target.describe()} failed: {error}",
            severity="warning",
            fix=COPY_FIX,
        )
        ctx.count("checkpoints_copied", 0)
        return
    finally:
        if staged is not None:
            remove_tree(staged)
    ctx.count("checkpoints_copied", 1)
    ctx.result.stats["copy"] = outcome.to_dict()
    lines = [f"{info.name} -> {outcome.target} (verified there)"]
    if outcome.removed:
        lines.append("removed there: " + ", ".join(outcome.removed))
    ctx.result.stats["listing"] = {"title": "copied", "lines": lines}


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
    would_copy = _would_copy(settings, name)
    if would_copy is not None:
        ctx.count("checkpoints_copied", 1)
        ctx.result.stats["would_copy"] = would_copy
        lines = [f"{name} -> {would_copy['target']}"]
        if would_copy.get("target_exists") is False:
            lines.append(f"{would_copy['target']} does not exist: the copy would fail")
        if would_copy.get("would_remove"):
            lines.append("then removed there: " + ", ".join(would_copy["would_remove"]))
        ctx.result.stats["listing"] = {"title": "would copy", "lines": lines}
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
    copied = next(
        (info for info in catalog.list_checkpoints(settings) if info.name == outcome.name), None
    )
    if copied is not None:
        _copy(ctx, copied)
    return ctx.result
