"""The one way mnemo-ops takes a lock on a file: a ``flock`` through portalocker's ``Lock``.

Every lock file we hold goes through `FileLock`: the writer lock, Hermes' lock on its memory blocks
and Hermes' lock on its cron jobs file. The kind of lock matters, not only that there is one: Hermes
takes ``fcntl.flock`` on its files, and on Linux a ``flock`` and a ``lockf`` (POSIX record lock) on
the same file do not see each other. portalocker locks with ``fcntl.flock`` on POSIX unless its
module-level ``LOCKER`` is changed, which mnemo-ops never does; tests/foundation/test_flock.py
checks against a raw ``fcntl.flock`` in another process that it still is one.

A flock belongs to the open file, so it ends when the holder closes the file or dies (kill -9
included), and Python opens files non-inheritable, so a child the holder starts never keeps it.
Waiting is portalocker's: one try at once, then one every `poll_seconds` until `wait_seconds` have
passed. A lock file can be opened without following a symlink (``O_NOFOLLOW``), for lock files in
folders someone else can write to.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import portalocker

from mnemo_ops.foundation.errors import MnemoOpsError

DEFAULT_POLL_SECONDS = 0.2


class LockFileBusy(Exception):
    """Another open file holds a conflicting flock on `path` (after the wait, if there was one).

    Callers turn it into their own message (the writer lock names its holder, Hermes' locks say
    that nothing was changed)."""

    def __init__(self, path: Path):
        super().__init__(f"{path} is locked by another process")
        self.path = path


class LockFileError(MnemoOpsError):
    """The lock could not be taken for a reason other than another holder (a file system without
    flock, for example): waiting longer would not help."""


class FileLock:
    """An exclusive (or shared) flock on one file, taken with a bounded wait and released at once.

    Use it as a context manager (the open, locked file is the ``as`` value) or call `acquire` and
    `release`. `mode` is the mode the file is opened in: the default ``"a+"`` creates a missing file
    and never truncates one, so a holder's contents survive another process opening it; ``"r"``
    opens an existing file only.
    """

    def __init__(
        self,
        path: Path,
        *,
        mode: str = "a+",
        shared: bool = False,
        follow_symlinks: bool = True,
        create_mode: int = 0o666,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
    ):
        self.path = Path(path)
        self.mode = mode
        self.shared = shared
        self.follow_symlinks = follow_symlinks
        self.create_mode = create_mode
        self.poll_seconds = poll_seconds
        self._lock: portalocker.Lock | None = None

    def _open(self, path: str, flags: int) -> int:
        """The opener portalocker opens the file with: the creation mode (the umask still applies)
        and, when asked, no symlink followed."""
        if not self.follow_symlinks:
            flags |= os.O_NOFOLLOW
        return os.open(path, flags, self.create_mode)

    def acquire(self, wait_seconds: float | None = 0.0) -> IO[Any]:
        """Take the lock and return the open, locked file.

        `wait_seconds` 0 tries once (a non-blocking try); a positive value keeps trying for that
        long; None waits as long as it takes (a blocking flock). Raises LockFileBusy when another
        process still holds it, LockFileError when the file system refuses the lock, and OSError
        when the file cannot be opened (ELOOP for a symlink when `follow_symlinks` is off).
        """
        if self._lock is not None:
            raise RuntimeError(f"{self.path} is already locked by this FileLock")
        flags = portalocker.LOCK_SH if self.shared else portalocker.LOCK_EX
        if wait_seconds is not None:
            flags |= portalocker.LOCK_NB
        binary = "b" in self.mode
        lock = portalocker.Lock(
            self.path,
            self.mode,
            # With blocking flags the wait happens inside flock itself; portalocker warns when it
            # is also given a timeout, so it gets none.
            timeout=None if wait_seconds is None else max(0.0, wait_seconds),
            check_interval=self.poll_seconds,
            flags=flags,
            raise_on_release_error=True,
            opener=self._open,
            encoding=None if binary else "utf-8",
        )
        try:
            handle = lock.acquire()
        except portalocker.AlreadyLocked:
            raise LockFileBusy(self.path) from None
        except portalocker.LockException as error:
            raise LockFileError(f"cannot lock {self.path}: {error.strerror or error}") from None
        self._lock = lock
        return handle

    def release(self) -> None:
        """Unlock and close the file; nothing happens when it is not held."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._lock is not None

    @property
    def handle(self) -> IO[Any] | None:
        """The open, locked file while the lock is held, else None."""
        return self._lock.fh if self._lock is not None else None

    @contextlib.contextmanager
    def hold(self, wait_seconds: float | None = 0.0) -> Iterator[IO[Any]]:
        """`acquire` with `wait_seconds`, the open file for the block, `release` after it."""
        handle = self.acquire(wait_seconds)
        try:
            yield handle
        finally:
            self.release()

    def __enter__(self) -> IO[Any]:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def is_locked(path: Path) -> bool:
    """Whether some process holds an flock on the existing file `path` now (False when it is
    missing). Opens it read-only, creates nothing, and lets go at once."""
    if not Path(path).exists():
        return False
    try:
        with FileLock(path, mode="r"):
            return False
    except LockFileBusy:
        return True
    except FileNotFoundError:  # removed between the check and the open
        return False
