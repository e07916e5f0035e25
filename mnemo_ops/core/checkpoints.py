"""The checkpoint-before-write hook the runner hands to jobs whose manifest asks for it."""

from __future__ import annotations

import importlib

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.errors import MnemoOpsError


def pre_write_checkpoint(ctx: JobContext) -> str | None:
    """Take (or reuse a recent) verified ``pre-<job>`` checkpoint; return its name.

    The backup job implements the checkpoint itself; until it exists the job proceeds with a warning
    rather than pretending a checkpoint was made.
    """
    try:
        backup = importlib.import_module("mnemo_ops.jobs.backup")
    except ModuleNotFoundError:
        ctx.warn("checkpoint-unavailable", "no pre-write checkpoint: the backup job is not available",
                 severity="warning")
        return None
    take = getattr(backup, "pre_write_checkpoint", None)
    if take is None:
        ctx.warn("checkpoint-unavailable", "no pre-write checkpoint: the backup job has no pre-write support")
        return None
    try:
        return take(ctx.settings, ctx.job)
    except MnemoOpsError as error:
        # A job must not write without its safety net: fail before the first write.
        raise MnemoOpsError(f"pre-write checkpoint failed, nothing was written: {error.message}") from None
