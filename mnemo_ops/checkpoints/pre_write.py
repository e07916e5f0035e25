"""The checkpoint before a job's first write (manifest ``checkpoint: before-write``).

The runner calls `take_for_job` through ``JobContext.before_write``; a verified checkpoint made within
``backup.reuse_minutes`` (by any job, or the nightly backup) is reused. Retention then runs over
every kind (``checkpoints/retention.py``): pre-write checkpoints keep their own newest
``backup.pre_write_keep``, and each job's rollback points stay.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from mnemo_ops.checkpoints import catalog
from mnemo_ops.checkpoints.worker import create_in_child
from mnemo_ops.core.context import JobContext
from mnemo_ops.foundation.clock import utc_now
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.settings import Settings


def recent_checkpoint(
    settings: Settings, minutes: int, now: datetime | None = None
) -> catalog.CheckpointInfo | None:
    """The newest verified checkpoint of this DB made within the last `minutes`, if any."""
    if minutes <= 0:
        return None
    cutoff = (now or utc_now()) - timedelta(minutes=minutes)
    for info in reversed(catalog.list_checkpoints(settings, include_failed=False)):
        if (
            not info.verified
            or not info.created_at
            or (info.manifest or {}).get("source_db") != str(settings.db_path)
        ):
            continue
        try:
            created = datetime.fromisoformat(info.created_at)
        except ValueError:
            continue
        if created >= cutoff:
            return info
    return None


def take(settings: Settings, job: str) -> str:
    """Take a verified ``pre-<job>`` checkpoint (or reuse a recent one); return its name.

    The copy runs in a child process (``checkpoints/worker.py``): the job's own process may hold
    Mnemosyne's connections, and two SQLite libraries on one file in one process drop each other's
    locks. Raises MnemoOpsError when no verified checkpoint could be made.
    """
    reuse = recent_checkpoint(settings, settings.backup.reuse_minutes)
    if reuse is not None:
        return reuse.name
    outcome = create_in_child(settings, "pre-write", job, utc_now())
    if not outcome.verified:
        raise MnemoOpsError(
            f"checkpoint {outcome.name} failed verification ({outcome.problems[0]}); "
            f"kept aside in {outcome.path}"
        )
    catalog.apply_retention(settings)
    return outcome.name


def take_for_job(ctx: JobContext) -> str:
    """The runner's hook: the job must not write without its safety net, so a failure stops it here."""
    try:
        return take(ctx.settings, ctx.job)
    except MnemoOpsError as error:
        raise MnemoOpsError(
            f"pre-write checkpoint failed, nothing was written: {error.message}"
        ) from None
