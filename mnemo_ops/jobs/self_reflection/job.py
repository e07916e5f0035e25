"""self-reflection (Sunday 23:00, once per ISO week): the week's sessions become lessons of four kinds,
stored as the assistant's own notes (``mnemo_ops/jobs/self_reflection``).

Options: the ``self_reflection`` section of the settings schema (and ``models`` for the model layer),
also as ``--option KEY=VALUE`` for one run.
"""

from __future__ import annotations

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.guard.recall_guard import mark_not_needed
from mnemo_ops.jobs.self_reflection.run import already_done, run_reflection


def preflight(ctx: JobContext) -> None:
    """This week done already (and no --force): the recall guard makes no trial of a run that will
    change nothing."""
    reason = already_done(ctx)
    if reason:
        mark_not_needed(ctx, reason)


def run(ctx: JobContext) -> JobResult:
    """Reflect on the sessions that went idle since last week's run; store each lesson once."""
    run_reflection(ctx)
    return ctx.result
