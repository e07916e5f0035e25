"""The jobs: one thin module per job, each with ``run(ctx) -> JobResult``, and the wiring that runs them.

This package is where the application is put together: the runner of ``mnemo_ops.core`` gets the
job's function, the pre-write checkpoint of ``mnemo_ops.checkpoints`` and the monitoring hooks, so
the core never imports a job or a domain package. Commands call `run_job` here.

Preflight: `database.versions.preflight` refuses (exit 2) a job that uses Mnemosyne when the
installed Mnemosyne must not open the database (a newer one wrote it, or this one would upgrade its
schema beside the live agent), before the lock's holder writes anything.

Usage: a job module's ``check_usage(ctx)``, when it has one, checks what this run was given (files
its flags name) before the lock, the monitors and the ledger; a refusal there exits 2 and is not
recorded as a run.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from mnemo_ops import database
from mnemo_ops.checkpoints import pre_write
from mnemo_ops.core import monitoring, runner
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.manifests import load_manifests
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.core.results import JobResult, Severity
from mnemo_ops.database import transactions
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.guard.recall_guard import RecallGuard
from mnemo_ops.mnemosyne import versions
from mnemo_ops.settings import JOB_NAMES, Settings

HOOKS = runner.RunHooks(
    checkpoint=pre_write.take_for_job,
    monitors=monitoring.HOOKS,
    guards={"recall": RecallGuard()},
    # The Mnemosyne line is checked first (the free-space reserve and the writable paths are the
    # runner's own checks, before the lock).
    preflight=(versions.preflight,),
)


def metered(job: Callable[[JobContext], Any]) -> Callable[[JobContext], Any]:
    """`job` with every write transaction on the memory DB timed (``database.transactions``).

    The run gets the ``transactions`` settings (target, bound, the agent's share), and its result
    ``stats.transactions`` (so the ledger row too) holds the count, the longest transaction and the
    pauses; a transaction past the bound is a warning, since a long one can cost the live agent
    every write until it restarts.
    """

    def run(ctx: JobContext) -> Any:
        policy = transactions.Policy.of(ctx.settings.transactions)
        with transactions.metered(policy) as meter:
            try:
                return job(ctx)
            finally:
                ctx.result.stats["transactions"] = meter.to_stats()
                if meter.over_bound:
                    ctx.warn(
                        "write-transaction-long",
                        f"{meter.over_bound} write transaction(s) held the database longer than "
                        f"{policy.max_s * 1000:.0f} ms (longest {meter.longest_s * 1000:.0f} ms, "
                        f"{meter.longest_label or 'unlabelled'}); the live agent may have waited",
                        severity=Severity.WARNING,
                    )

    return run


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
    progress: ProgressReporter | None = None,
) -> JobResult:
    """Run job `name` now through the runner (see ``mnemo_ops.core.runner.run_job``); `progress`
    replaces the reporter `show_progress` would make (a test's console)."""
    module = load_job(name)
    # A job may check the live database before anything else (the recall guard's trial included).
    own = getattr(module, "preflight", None)
    hooks = dataclasses.replace(HOOKS, preflight=(*HOOKS.preflight, own)) if own else HOOKS
    # And what this run was given, before anything is recorded: a typo is not a failed run.
    usage = getattr(module, "check_usage", None)
    hooks = dataclasses.replace(hooks, usage=(*hooks.usage, usage)) if usage else hooks
    # A dry run changes no byte and leaves no file: not even the -wal and -shm files a read-only
    # connection makes beside a database nobody has open (database.connect, `untouched`).
    with database.untouched_reads(dry_run):
        return runner.run_job(
            settings,
            name,
            metered(module.run),
            dry_run=dry_run,
            force=force,
            wait_s=wait_s,
            options=options,
            show_progress=show_progress,
            hooks=hooks,
            progress=progress,
        )
