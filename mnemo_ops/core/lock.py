"""The single-writer lock: one flock'd file per database in the state dir (`foundation.flock`).

We never lock (or even open) the database file itself for this: a process that opens and closes the
DB file outside SQLite drops SQLite's own POSIX locks on it. The lock file holds the holder's
metadata (pid, job, since, host) so a skipped run can say who has it. Python opens files
non-inheritable, so processes a job starts never keep the lock alive after the job dies.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import LockHeldError, UsageError
from mnemo_ops.foundation.flock import FileLock, LockFileBusy, is_locked


def lock_path_for(state_dir: Path, db_path: Path) -> Path:
    """The lock file for `db_path`: ``<state_dir>/locks/writer-<hash of the DB's real path>.lock``."""
    digest = hashlib.sha256(str(Path(db_path).resolve()).encode()).hexdigest()[:16]
    return state_dir / "locks" / f"writer-{digest}.lock"


def read_holder(lock_path: Path) -> dict[str, Any]:
    """The metadata the current (or last) holder wrote into the lock file; {} when unreadable."""
    try:
        return json.loads(lock_path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}


def describe_holder(holder: dict[str, Any]) -> str:
    """A short human description such as ``job backup (pid 123) since 2026-11-30T02:00:00+00:00``."""
    if not holder:
        return "another process"
    return f"job {holder.get('job', '?')} (pid {holder.get('pid', '?')}) since {holder.get('since', '?')}"


class WriterLock:
    """A non-blocking (or bounded-wait) exclusive lock; use as a context manager."""

    def __init__(self, lock_path: Path, job: str, wait_s: float = 0.0):
        self.lock_path = lock_path
        self.job = job
        self.wait_s = max(0.0, wait_s)
        # "a+" so opening never truncates the metadata of a process that holds the lock; never
        # through a symlink, since the holder's metadata is written into the file opened.
        self._lock = FileLock(lock_path, mode="a+", follow_symlinks=False)

    def acquire(self) -> None:
        """Take the lock or raise LockHeldError naming the holder (after waiting `wait_s` at most)."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            handle = self._lock.acquire(self.wait_s)
        except OSError as error:
            if error.errno != errno.ELOOP:
                raise
            raise UsageError(
                f"the writer lock {self.lock_path} is a symlink: mnemo-ops never writes through "
                f"a symlink in its state folder; remove it (nothing holds a lock there)"
            ) from None
        except LockFileBusy:
            holder = read_holder(self.lock_path)
            raise LockHeldError(
                f"another mnemo-ops writer holds the lock: {describe_holder(holder)}", holder
            ) from None
        os.chmod(self.lock_path, 0o600)
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "job": self.job,
                    "since": isoformat(utc_now()),
                    "host": socket.gethostname(),
                }
            )
        )
        handle.flush()

    def release(self) -> None:
        """Release the lock (the metadata stays, describing the last holder)."""
        self._lock.release()

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._lock.held

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def probe_holder(lock_path: Path) -> dict[str, Any] | None:
    """Return the holder's metadata if some process holds the lock now, else None (read-only)."""
    if not is_locked(lock_path):
        return None
    return read_holder(lock_path) or {"job": "?"}
