"""The lock every writer of Hermes' ``cron/jobs.json`` holds: ``fcntl.flock`` on ``cron/.jobs.lock``."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator

from mnemo_ops.foundation.errors import LockHeldError
from mnemo_ops.foundation.private_files import refuse_symlink
from mnemo_ops.scheduling.hermes.paths import HermesPaths


@contextlib.contextmanager
def jobs_lock(paths: HermesPaths, wait_s: float) -> Iterator[None]:
    """Hold ``fcntl.flock(LOCK_EX)`` on ``cron/.jobs.lock`` as Hermes' writers do; wait up to
    `wait_s`, then LockHeldError (exit 75): another writer is in the middle of its change."""
    refuse_symlink(paths.cron_dir)
    paths.cron_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    refuse_symlink(paths.lock_file)
    # "a+" as Hermes opens it: never truncates, creates it when missing.
    handle = open(paths.lock_file, "a+", encoding="utf-8")  # noqa: SIM115 (held until the end)
    deadline = time.monotonic() + max(0.0, wait_s)
    try:
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise LockHeldError(
                        f"{paths.lock_file} is held by another writer of Hermes' cron jobs for "
                        f"more than {wait_s:g} s; nothing was written, try again"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        handle.close()  # closing releases the flock
