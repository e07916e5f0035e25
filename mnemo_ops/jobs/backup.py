"""The backup job (02:00 daily): one verified checkpoint of the memory DB, memory blocks and state.db.

The checkpoints themselves (create, verify, retain) live in ``mnemo_ops.checkpoints``.
"""

from __future__ import annotations

from mnemo_ops.checkpoints import catalog
from mnemo_ops.checkpoints.create import (
    CheckpointError,
    CheckpointOutcome,
    create_checkpoint,
    estimated_size,
)
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.clock import utc_now


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


def run(ctx: JobContext) -> JobResult:
    """Make today's checkpoint, verify it, then apply retention (``backup.keep``)."""
    settings = ctx.settings
    removals = catalog.planned_removals(settings, "daily")
    ctx.count("checkpoints_created", 1)
    ctx.count("checkpoints_removed", len(removals))
    if ctx.dry_run:
        ctx.result.stats.update(
            {
                "would_create": catalog.checkpoint_name("daily", None, utc_now()),
                "would_remove": [info.name for info in removals],
                "estimated_size_bytes": estimated_size(settings),
                "backups_dir": str(settings.backups_dir),
            }
        )
        return ctx.result
    try:
        outcome = create_checkpoint(settings, "daily", progress=ctx.progress)
    except CheckpointError as error:
        ctx.warn(error.code, error.message, severity=error.severity)
        ctx.result.changes.clear()
        raise
    ctx.result.stats.update(outcome.stats)
    if not outcome.verified:
        ctx.result.changes = {
            "checkpoints_created": 0,
            "checkpoints_removed": 0,
            "checkpoints_failed": 1,
        }
        catalog.remove_checkpoints(
            catalog.failed_plan(settings, catalog.keep_count(settings, "daily"))
        )
        _report_failure(ctx, outcome)
        return ctx.result
    ctx.result.checkpoint = outcome.name
    removed = catalog.apply_retention(settings, "daily")
    ctx.result.changes["checkpoints_removed"] = len(
        [name for name in removed if name.startswith("daily-")]
    )
    ctx.result.stats["removed"] = removed
    if "state_db_problem" in outcome.stats:
        ctx.warn(
            "state-db-damaged",
            f"{settings.state_db_path} fails integrity_check: {outcome.stats['state_db_problem']}",
            severity="error",
        )
    return ctx.result
