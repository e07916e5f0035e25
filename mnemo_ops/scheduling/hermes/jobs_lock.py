"""The lock every writer of Hermes' ``cron/jobs.json`` holds: ``fcntl.flock`` on ``cron/.jobs.lock``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mnemo_ops.foundation.errors import LockHeldError
from mnemo_ops.foundation.flock import FileLock, LockFileBusy
from mnemo_ops.foundation.private_files import refuse_symlink
from mnemo_ops.scheduling.hermes.paths import HermesPaths

POLL_SECONDS = 0.05


@contextlib.contextmanager
def jobs_lock(paths: HermesPaths, wait_s: float) -> Iterator[None]:
    """Hold ``fcntl.flock(LOCK_EX)`` on ``cron/.jobs.lock`` as Hermes' writers do; wait up to
    `wait_s`, then LockHeldError (exit 75): another writer is in the middle of its change."""
    refuse_symlink(paths.cron_dir)
    paths.cron_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    refuse_symlink(paths.lock_file)
    # "a+" as Hermes opens it: never truncates, creates it when missing (with the umask's mode).
    # No symlink is followed even if one appears between the check above and the open.
    lock = FileLock(paths.lock_file, mode="a+", follow_symlinks=False, poll_seconds=POLL_SECONDS)
    try:
        lock.acquire(wait_s)
    except LockFileBusy:
        raise LockHeldError(
            f"{paths.lock_file} is held by another writer of Hermes' cron jobs for "
            f"more than {wait_s:g} s; nothing was written, try again"
        ) from None
    try:
        yield
    finally:
        lock.release()
