"""self-reflection (Sunday 23:00, once per ISO week): the week's sessions become lessons of four kinds,
stored as the assistant's own notes (``mnemo_ops/reflection``).

Options: the ``self_reflection`` section of the settings schema (and ``models`` for the model layer),
also as ``--option KEY=VALUE`` for one run.
"""

from __future__ import annotations

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.reflection.run import already_done, run_reflection


def nothing_to_do(ctx: JobContext) -> str | None:
    """Why the recall guard's trial can be skipped (the run will change nothing), or None."""
    return already_done(ctx)


def run(ctx: JobContext) -> JobResult:
    """Reflect on the sessions that went idle since last week's run; store each lesson once."""
    run_reflection(ctx)
    return ctx.result
