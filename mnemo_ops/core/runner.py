"""The runner: lock -> checkpoint-before-write hook -> job -> ledger row -> result (rendered by the CLI)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from mnemo_ops.core import database, monitoring, state
from mnemo_ops.core.checkpoints import pre_write_checkpoint
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.errors import LockHeldError, MnemoOpsError
from mnemo_ops.core.exit_codes import OK, USAGE
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.core.manifests import get_manifest
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.core.results import JobResult
from mnemo_ops.jobs import load_job
from mnemo_ops.settings import Settings

log = logging.getLogger("mnemo_ops")


class JobTimeout(MnemoOpsError):
    """The job ran past the timeout of its manifest."""


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
        result.warn("ledger-write-failed", f"could not record the run in {settings.state_db_path}: {error}",
                     severity="error")


def _log_to_syslog(settings: Settings, result: JobResult) -> None:
    """One line per run (and per warning) to the local syslog, when `monitoring.syslog` is on."""
    if result.dry_run or not settings.option("monitoring.syslog"):
        return
    import logging.handlers

    logger = logging.getLogger("mnemo_ops.syslog")
    logger.propagate = False
    if not logger.handlers:
        address = "/dev/log" if os.path.exists("/dev/log") else ("localhost", 514)
        handler = logging.handlers.SysLogHandler(address=address)
        handler.setFormatter(logging.Formatter("mnemo-ops[%(process)d]: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    changes = ", ".join(f"{name}={count}" for name, count in result.changes.items()) or "no changes"
    level = logging.ERROR if result.status == "failed" else logging.INFO
    logger.log(level, "%s %s in %.1fs: %s%s", result.job, result.status, result.duration_s, changes,
               f"; error: {result.error}" if result.error else "")
    for warning in result.warnings:
        logger.log(logging.WARNING if warning.severity != "info" else logging.INFO,
                   "%s %s %s: %s", result.job, warning.severity, warning.code, warning.message)


def _notify(settings: Settings, result: JobResult, suffix: str | None = None) -> None:
    if result.dry_run:
        return
    url = settings.job_option(result.job, "ping_url")
    if suffix is None:  # the final ping, with the outcome, and the textfile
        problem = monitoring.ping(url, monitoring.result_suffix(result), result.error or "")
        try:
            monitoring.write_prometheus(settings.option("monitoring.prometheus_textfile_dir"), result)
        except OSError as error:
            result.warn("prometheus-write-failed", f"could not write the Prometheus textfile: {error}", "info")
    else:
        problem = monitoring.ping(url, suffix)
    if problem:
        result.warn("ping-failed", problem, severity="info")


def run_job(
    settings: Settings,
    name: str,
    dry_run: bool = False,
    force: bool = False,
    wait_s: float = 0.0,
    options: dict[str, Any] | None = None,
    show_progress: bool = True,
) -> JobResult:
    """Run one job under the writer lock and return its finished result.

    Expected problems before the job starts (unknown job, bad database) raise MnemoOpsError with
    exit code 2; a held lock yields a ``skipped`` result (exit 75) with a ledger row.
    """
    manifest = get_manifest(settings, name)
    module = load_job(name)
    result = JobResult(job=name, dry_run=dry_run, db=str(settings.db_path))
    if not settings.job_option(name, "enabled", True) and not force:
        result.status = "skipped"
        result.exit_code_override = OK
        result.warn("job-disabled", f"{name} is disabled in the config file (use --force to run it)", "info")
        return result.finish()
    database.open_memory_db(settings.db_path, readonly=True).close()  # one-line exit 2 when unusable

    lock = None
    if manifest.needs_lock and not dry_run:
        lock = WriterLock(lock_path_for(settings.state_dir, settings.db_path), name, wait_s)
        try:
            lock.acquire()
        except LockHeldError as error:
            result.status = "skipped"
            result.error = error.message
            result.stats["lock_holder"] = error.holder
            result.finish()
            _record(settings, result)
            return result
    try:
        context = JobContext(
            settings=settings, manifest=manifest, dry_run=dry_run, result=result, force=force,
            options=dict(options or {}), progress=ProgressReporter(show_progress),
            checkpoint_hook=pre_write_checkpoint,
        )
        _notify(settings, result, "/start")
        try:
            with _time_limit(manifest.timeout):
                module.run(context)
        except MnemoOpsError as error:
            result.fail(error.message)
            if error.exit_code == USAGE:
                result.exit_code_override = USAGE
        except Exception as error:  # unexpected: one line for the user, the traceback in the log
            log.debug("job %s crashed", name, exc_info=True)
            result.fail(f"{type(error).__name__}: {error}")
        result.finish()
        _notify(settings, result)
        _record(settings, result)
        _log_to_syslog(settings, result)
    finally:
        if lock is not None:
            lock.release()
    return result
