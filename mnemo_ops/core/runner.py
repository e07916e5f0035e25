"""The runner: options -> lock -> job (with the checkpoint-before-write hook) -> monitors -> ledger.

The runner knows the job lifecycle only. What a job does, how a checkpoint is made and where
monitoring goes are handed to it (`run_job`'s `job` and `hooks`) by the layer that wires the
application (``mnemo_ops.jobs``), so the core imports no job and no domain package.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from mnemo_ops import database
from mnemo_ops.core import disk_reserve, folders, state
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.core.manifests import get_manifest
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.core.results import JobResult, Severity, Status
from mnemo_ops.foundation import interrupts
from mnemo_ops.foundation.errors import JobTimeout, LockHeldError, MnemoOpsError
from mnemo_ops.foundation.exit_codes import OK, USAGE
from mnemo_ops.foundation.writable import describe_os_error
from mnemo_ops.settings import Settings

log = logging.getLogger("mnemo_ops")


class Guard(Protocol):
    """A guard named by manifests (``guard: recall``): it decides whether the job's change may be made."""

    def trial(self, ctx: JobContext, job: Callable[[JobContext], Any]) -> bool:
        """Try `job` without touching the live files; True when the real run may go ahead (on False
        the guard has failed ``ctx.result`` with its reasons)."""


class Monitor(Protocol):
    """A monitoring hook: a plain module with a warning code and ``notify``."""

    WARNING_CODE: str

    def notify(self, settings: Settings, result: JobResult, phase: str) -> str | None:
        """React to ``phase`` ("start" or "finish"); return a one-line problem or None."""


@dataclasses.dataclass(frozen=True)
class RunHooks:
    """What the runner calls around a job; supplied by ``mnemo_ops.jobs``.

    - `checkpoint(ctx) -> name`: the pre-write checkpoint, taken through ``ctx.before_write()``.
    - `usage`: each ``check(ctx)`` runs before the lock, the monitors and the ledger, and checks what
      was given for this run (a file a flag names, say). A MnemoOpsError raised there is the
      caller's mistake, not a run: it propagates (exit 2, one line) and nothing is recorded, so a
      typo never reaches the morning report as a failed job.
    - `monitors`: told when the job starts and finishes.
    - `preflight`: each ``check(ctx)`` runs after the lock is taken and before the job; raising
      MnemoOpsError refuses the run with that error (and its exit code) before anything is written.
      A check sees ``ctx.dry_run`` and ``ctx.manifest`` and decides whether it applies.
    - `guards`: by name; a real run of a job whose manifest names one goes ahead only when the
      guard's ``trial`` accepts it. Dry runs change nothing and are not guarded.
    """

    checkpoint: Callable[[JobContext], str | None] | None = None
    usage: Sequence[Callable[[JobContext], None]] = ()
    monitors: Sequence[Monitor] = ()
    preflight: Sequence[Callable[[JobContext], None]] = ()
    guards: Mapping[str, Guard] = dataclasses.field(default_factory=dict)


@contextmanager
def _time_limit(seconds: int | None) -> Iterator[None]:
    """Raise JobTimeout in the job after `seconds` (main thread only; elsewhere no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expire(signum, frame):
        raise JobTimeout(f"timed out after {seconds} s (manifest timeout)")

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _record(settings: Settings, result: JobResult) -> None:
    """Append the ledger row (never for dry runs: a dry run leaves the state dir untouched)."""
    if result.dry_run:
        return
    try:
        ledger = state.open_state(settings.state_db_path)
        state.record_run(ledger, result)
        ledger.close()
    except Exception as error:  # the ledger must never hide the job's own outcome
        result.warn(
            "ledger-write-failed",
            f"could not record the run in {settings.state_db_path}: {error}",
            severity=Severity.ERROR,
        )


def _notify(settings: Settings, result: JobResult, monitors: Sequence[Monitor], phase: str) -> None:
    """Call every monitor; a problem becomes an info warning, never a failure (skipped in dry runs)."""
    if result.dry_run:
        return
    for monitor in monitors:
        try:
            problem = monitor.notify(settings, result, phase)
        except Exception as error:  # a broken monitor must not fail the job it watches
            problem = f"{type(error).__name__}: {error}"
        if problem:
            result.warn(monitor.WARNING_CODE, problem, severity=Severity.INFO)


def run_job(
    settings: Settings,
    name: str,
    job: Callable[[JobContext], Any],
    *,
    dry_run: bool = False,
    force: bool = False,
    wait_s: float = 0.0,
    options: dict[str, Any] | None = None,
    show_progress: bool = True,
    hooks: RunHooks = RunHooks(),
    progress: ProgressReporter | None = None,
) -> JobResult:
    """Run `job` (the job's ``run(ctx)``) under the writer lock and return its finished result.

    Expected problems before the job starts (unknown job or option, a file named for this run that
    is not there or not usable, bad database, a database, folder or state dir that cannot be
    written, the disk below the agent's reserve) raise MnemoOpsError with exit code 2 and leave no
    ledger row; a held lock yields a ``skipped`` result (exit 75) with a ledger row.
    """
    manifest = get_manifest(settings, name)
    settings, section, run_options = settings.check_run_options(name, options or {})
    result = JobResult(job=name, dry_run=dry_run, db=str(settings.db_path))
    if not settings.job(name).enabled and not force:
        result.status = Status.SKIPPED
        result.exit_code_override = OK
        result.warn(
            "job-disabled",
            f"{name} is disabled in the config file (use --force to run it)",
            Severity.INFO,
        )
        return result.finish()
    database.open_memory_db(
        settings.db_path, readonly=True
    ).close()  # one-line exit 2 when unusable
    # The ledger and the lock live in the state dir: without it nothing can even be recorded, so
    # it refuses the run before it starts (dry runs too: they report what the real run would meet).
    folders.check_state_dir(settings)
    # Then everything the job writes (the database file, its folder, the checkpoints' folder...)
    # and the agent's free-space reserve: a read-only file met after the checkpoint would leave a
    # checkpoint behind and fail with no path named, so these refuse the run before the lock, the
    # checkpoint or any write, and like the checks above they are not a run (no ledger row).
    folders.check_writes(settings, manifest)
    disk_reserve.check_free_space(settings, manifest)
    context = JobContext(
        settings=settings,
        manifest=manifest,
        dry_run=dry_run,
        result=result,
        force=force,
        options=section,
        run_options=run_options,
        progress=progress or ProgressReporter(show_progress),
        checkpoint_hook=hooks.checkpoint,
    )
    # Usage: what this run was given. Before the lock, the monitors and the ledger: a refusal here
    # is not a run (docs/contracts.md, "The runner").
    for check in hooks.usage:
        check(context)

    lock = None
    if manifest.needs_lock and not dry_run:
        lock = WriterLock(lock_path_for(settings.state_dir, settings.db_path), name, wait_s)
        try:
            lock.acquire()
        except LockHeldError as error:
            result.status = Status.SKIPPED
            result.error = error.message
            result.stats["lock_holder"] = error.holder
            result.finish()
            _record(settings, result)
            return result
    try:
        # From here a SIGINT or SIGTERM asks for a stop at the next safe point, so the run is
        # recorded as interrupted and the lock released (``foundation/interrupts``).
        with interrupts.safe_points():
            _run_with_lock(settings, name, job, context, hooks, lock)
    finally:
        if lock is not None:
            lock.release()
    return result


def _run_with_lock(
    settings: Settings,
    name: str,
    job: Callable[[JobContext], Any],
    context: JobContext,
    hooks: RunHooks,
    lock: WriterLock | None,
) -> None:
    """The run proper, the lock held: preflight, guard, job, then the monitors and the ledger."""
    manifest, result, dry_run = context.manifest, context.result, context.dry_run
    # The lock is held from here: a job may release it early for slow work after its writes.
    context.lock_release = lock.release if lock is not None else None
    _notify(settings, result, hooks.monitors, "start")
    try:
        context.stage = "preflight"
        for check in hooks.preflight:
            check(context)
        guard = hooks.guards.get(manifest.guard) if manifest.guard and not dry_run else None
        if manifest.guard and not dry_run and guard is None:
            raise MnemoOpsError(
                f"{name} must run under the {manifest.guard} guard, which is not available"
            )
        with _time_limit(manifest.timeout):
            context.stage = "recall-guard trial" if guard is not None else "run"
            if guard is None or guard.trial(context, job):
                context.stage = "run"
                job(context)
    except interrupts.Interrupted as interruption:
        log.debug("job %s interrupted during %s", name, context.stage)
        result.interrupt(interruption.signal.name, interruption.exit_code, context.stage)
    except MnemoOpsError as error:
        result.fail(error.message)
        if error.exit_code == USAGE:
            result.exit_code_override = USAGE
    except OSError as error:  # a file or folder of ours: what failed, where, and what to do
        log.debug("job %s met an OS error", name, exc_info=True)
        result.fail(describe_os_error(error))
    except Exception as error:  # unexpected: one line for the user, the traceback in the log
        log.debug("job %s crashed", name, exc_info=True)
        result.fail(f"{type(error).__name__}: {error}")
    result.finish()
    _notify(settings, result, hooks.monitors, "finish")
    _record(settings, result)
