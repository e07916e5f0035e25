"""The backup job (02:00 daily): one verified checkpoint of the memory DB, memory blocks and state.db.

Also home of ``pre_write_checkpoint``, which the runner's hook (``core/checkpoints.py``) calls before
the first write of every job whose manifest says ``checkpoint: before-write``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from mnemo_ops.checkpoints import catalog
from mnemo_ops.checkpoints.create import CheckpointError, CheckpointOutcome, create_checkpoint, estimated_size
from mnemo_ops.checkpoints.worker import create_in_child
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.errors import MnemoOpsError
from mnemo_ops.core.results import JobResult, utc_now
from mnemo_ops.settings import Settings

DEFAULT_KEEP = 7
DEFAULT_REUSE_MINUTES = 10


def _keep(settings: Settings, kind: str) -> int:
    key = "backup.keep" if kind == "daily" else "backup.pre_write_keep"
    return int(settings.option(key, DEFAULT_KEEP))


def _plan_removals(settings: Settings, kind: str) -> list[catalog.CheckpointInfo]:
    """What retention will remove once one more verified checkpoint of `kind` exists."""
    keep = _keep(settings, kind)
    return catalog.retention_plan(settings, kind, keep - 1) if keep > 1 else \
        [info for info in catalog.list_checkpoints(settings, include_failed=False)
         if info.kind == kind and info.verified]


def apply_retention(settings: Settings, kind: str) -> list[str]:
    """Remove verified checkpoints of `kind` beyond the newest `keep`, and old failed ones; return names."""
    keep = _keep(settings, kind)
    removed = catalog.remove_checkpoints(catalog.retention_plan(settings, kind, keep))
    removed += catalog.remove_checkpoints(catalog.failed_plan(settings, _keep(settings, "daily")))
    return removed


def _report_failure(ctx: JobContext, outcome: CheckpointOutcome) -> None:
    where = f"kept aside in {outcome.path}"
    if outcome.source_corrupt:
        ctx.warn("source-db-corrupt", f"{ctx.settings.db_path} is damaged: {outcome.problems[-1]}; the checkpoint "
                 f"was {where} and no good checkpoint was replaced", severity="critical",
                 fix="mnemo-ops backup list  # then: mnemo-ops backup restore NAME")
    ctx.warn("checkpoint-verification-failed", f"checkpoint {outcome.name} failed verification "
             f"({outcome.problems[0]}); {where}", severity="error")
    ctx.result.fail(f"checkpoint {outcome.name} failed verification; {where}; earlier checkpoints are intact")


def run(ctx: JobContext) -> JobResult:
    """Make today's checkpoint, verify it, then apply retention (``backup.keep``)."""
    settings = ctx.settings
    removals = _plan_removals(settings, "daily")
    ctx.count("checkpoints_created", 1)
    ctx.count("checkpoints_removed", len(removals))
    if ctx.dry_run:
        ctx.result.stats.update({
            "would_create": catalog.checkpoint_name("daily", None, utc_now()),
            "would_remove": [info.name for info in removals],
            "estimated_size_bytes": estimated_size(settings),
            "backups_dir": str(settings.backups_dir),
        })
        return ctx.result
    try:
        outcome = create_checkpoint(settings, "daily", progress=ctx.progress)
    except CheckpointError as error:
        ctx.warn(error.code, error.message, severity=error.severity)
        ctx.result.changes.clear()
        raise
    ctx.result.stats.update(outcome.stats)
    if not outcome.verified:
        ctx.result.changes = {"checkpoints_created": 0, "checkpoints_removed": 0, "checkpoints_failed": 1}
        catalog.remove_checkpoints(catalog.failed_plan(settings, _keep(settings, "daily")))
        _report_failure(ctx, outcome)
        return ctx.result
    ctx.result.checkpoint = outcome.name
    removed = apply_retention(settings, "daily")
    ctx.result.changes["checkpoints_removed"] = len([name for name in removed if name.startswith("daily-")])
    ctx.result.stats["removed"] = removed
    if "state_db_problem" in outcome.stats:
        ctx.warn("state-db-damaged", f"{settings.state_db_path} fails integrity_check: "
                 f"{outcome.stats['state_db_problem']}", severity="error")
    return ctx.result


def recent_checkpoint(settings: Settings, minutes: int, now: datetime | None = None) -> catalog.CheckpointInfo | None:
    """The newest verified checkpoint of this DB made within the last `minutes`, if any."""
    if minutes <= 0:
        return None
    cutoff = (now or utc_now()) - timedelta(minutes=minutes)
    for info in reversed(catalog.list_checkpoints(settings, include_failed=False)):
        if not info.verified or not info.created_at or (info.manifest or {}).get("source_db") != str(settings.db_path):
            continue
        try:
            created = datetime.fromisoformat(info.created_at)
        except ValueError:
            continue
        if created >= cutoff:
            return info
    return None


def pre_write_checkpoint(settings: Settings, job: str) -> str:
    """Take a verified ``pre-<job>`` checkpoint (or reuse one made within ``backup.reuse_minutes``); return its name.

    The copy runs in a child process (``checkpoints/worker.py``): the job's own process may hold
    Mnemosyne's connections, and two SQLite libraries on one file in one process drop each other's locks.
    Raises MnemoOpsError when no verified checkpoint could be made: the job must not write without it.
    """
    reuse = recent_checkpoint(settings, int(settings.option("backup.reuse_minutes", DEFAULT_REUSE_MINUTES)))
    if reuse is not None:
        return reuse.name
    outcome = create_in_child(settings, "pre-write", job, utc_now())
    if not outcome.verified:
        raise MnemoOpsError(f"checkpoint {outcome.name} failed verification ({outcome.problems[0]}); "
                            f"kept aside in {outcome.path}")
    apply_retention(settings, "pre-write")
    return outcome.name
