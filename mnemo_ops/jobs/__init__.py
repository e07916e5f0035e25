"""The jobs: one thin module per job, each with ``run(ctx) -> JobResult``, and the wiring that runs them.

This package is where the application is put together: the runner of ``mnemo_ops.core`` gets the
job's function, the pre-write checkpoint of ``mnemo_ops.checkpoints`` and the monitoring hooks, so
the core never imports a job or a domain package. Commands call `run_job` here.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType
from typing import Any

from mnemo_ops import monitoring
from mnemo_ops.checkpoints import pre_write
from mnemo_ops.core import runner
from mnemo_ops.core.errors import UsageError
from mnemo_ops.core.manifests import load_manifests
from mnemo_ops.core.results import JobResult
from mnemo_ops.guard.recall_guard import RecallGuard
from mnemo_ops.settings import JOB_NAMES, Settings

HOOKS = runner.RunHooks(
    checkpoint=pre_write.take_for_job,
    monitors=monitoring.HOOKS,
    guards={"recall": RecallGuard()},
)


class _TrialUnlessNothingToDo:
    """A guard that skips its trial when the job says it will change nothing (its module's
    ``nothing_to_do(ctx)`` gives the reason): a trial of a run without writes only costs time."""

    def __init__(self, guard, nothing_to_do):
        self.guard = guard
        self.nothing_to_do = nothing_to_do

    def trial(self, ctx, job) -> bool:
        """The wrapped guard's trial, unless the job has nothing to do."""
        reason = self.nothing_to_do(ctx)
        if reason:
            ctx.result.stats["guard"] = {"verdict": "not-needed", "reason": reason}
            return True
        return self.guard.trial(ctx, job)


def is_implemented(job: str) -> bool:
    """True when `job` has a module."""
    return job in JOB_NAMES and load_manifests()[job].implemented


def implemented_jobs() -> list[str]:
    """The jobs that have a module, in schedule order."""
    return [name for name, manifest in load_manifests().items() if manifest.implemented]


def load_job(job: str) -> ModuleType:
    """Import the job's module; UsageError (exit 2) when it is unknown or not written yet."""
    if job not in JOB_NAMES:
        raise UsageError(f"unknown job {job!r}; jobs are: {', '.join(JOB_NAMES)}")
    manifest = load_manifests()[job]
    if not manifest.implemented:
        raise UsageError(f"job {job!r} is not implemented yet in this version of mnemo-ops")
    return importlib.import_module(manifest.module)


def run_job(
    settings: Settings,
    name: str,
    *,
    dry_run: bool = False,
    force: bool = False,
    wait_s: float = 0.0,
    options: dict[str, Any] | None = None,
    show_progress: bool = True,
) -> JobResult:
    """Run job `name` now through the runner (see ``mnemo_ops.core.runner.run_job``)."""
    module = load_job(name)
    # A job may check the live database before anything else (the recall guard's trial included).
    own = getattr(module, "preflight", None)
    hooks = dataclasses.replace(HOOKS, preflight=(*HOOKS.preflight, own)) if own else HOOKS
    nothing_to_do = getattr(module, "nothing_to_do", None)
    if nothing_to_do is not None:
        guards = {
            name: _TrialUnlessNothingToDo(guard, nothing_to_do)
            for name, guard in hooks.guards.items()
        }
        hooks = dataclasses.replace(hooks, guards=guards)
    return runner.run_job(
        settings,
        name,
        module.run,
        dry_run=dry_run,
        force=force,
        wait_s=wait_s,
        options=options,
        show_progress=show_progress,
        hooks=hooks,
    )
