"""The evening batch's step runner: steps in order, a failing step recorded, the later steps run.

A step is a function of (job context, batch state); the state carries what one step hands on to the
next within one run. A failing step is recorded (``stats.steps``, a ``step-failed`` error warning) and
the run fails at the end with every step's error collected, as borgmatic does, so monitoring sees it.
Between two steps is a safe point: a stop asked by SIGINT or SIGTERM ends the batch there, the
step it stopped in (or the next one) named in ``stats.steps`` and in the ledger.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult, Severity
from mnemo_ops.foundation import interrupts
from mnemo_ops.foundation.errors import JobTimeout


@dataclasses.dataclass
class BatchState:
    """What steps hand on to later steps within one run."""

    # Set by the map steps (``topics.steps``): the map as this run left it, what changed, and the live
    # memories loaded for it. Typed loosely so this runner does not depend on the topics package.
    topic_map: Any = None
    changes: Any = None
    memories: dict[str, Any] | None = None
    repairs_after_consolidation: int | None = None
    """In a dry run: the summary repairs the consolidated snapshot would need (None: not known)."""
    sleep: Any = None
    """The sleep stages' shared run (``sleep.context.SleepRun``), built by the first of them."""
    cleanups: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    """Called once the batch ends, whatever happened (e.g. removing a dry run's private copies)."""

    def close(self) -> None:
        """Run the cleanups, newest first; a failing cleanup never hides the batch's own outcome."""
        while self.cleanups:
            try:
                self.cleanups.pop()()
            except Exception:  # noqa: BLE001 - cleanup is best effort by design
                pass


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the batch: a name and a function of (context, batch state)."""

    name: str
    function: Callable[[JobContext, BatchState], None]


def run_steps(ctx: JobContext, steps: tuple[Step, ...]) -> JobResult:
    """Run `steps` in order, collecting failures; fail the result (exit 1) if any step failed."""
    batch = BatchState()
    try:
        return _run(ctx, steps, batch)
    finally:
        batch.close()


def _run(ctx: JobContext, steps: tuple[Step, ...], batch: BatchState) -> JobResult:
    outcomes: list[dict[str, Any]] = []
    errors: list[str] = []
    for step in steps:
        started = time.monotonic()
        outcome: dict[str, Any] = {"name": step.name, "status": "ok", "error": None}
        ctx.enter_stage(step.name)
        try:
            interrupts.check()
            # Each step is one named row on a terminal, so no step passes in silence.
            with ctx.progress.spinner(f"evening-batch: {step.name}"):
                step.function(ctx, batch)
        except interrupts.Interrupted as interruption:
            outcome.update(status="interrupted", error=str(interruption))
            outcomes.append(outcome)
            ctx.result.stats["steps"] = outcomes
            raise
        except JobTimeout:
            outcome.update(status="failed", error="timed out")
            outcomes.append(outcome)
            ctx.result.stats["steps"] = outcomes
            raise
        except Exception as error:  # collected, not raised: the later steps still run
            message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
            outcome.update(status="failed", error=message)
            errors.append(f"{step.name}: {message}")
            ctx.warn("step-failed", f"step {step.name} failed: {message}", severity=Severity.ERROR)
        outcome["duration_s"] = round(time.monotonic() - started, 3)
        outcomes.append(outcome)
    ctx.result.stats["steps"] = outcomes
    if errors:
        ctx.result.fail(f"{len(errors)} of {len(steps)} steps failed: " + "; ".join(errors))
    return ctx.result
