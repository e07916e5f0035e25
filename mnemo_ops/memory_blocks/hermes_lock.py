"""Hermes' write convention for a memory block, followed exactly so the agent and we never lose each
other's writes.

Hermes' memory tool holds ``fcntl.flock(LOCK_EX)`` on ``<file>.lock`` (``MEMORY.md.lock``, a separate
file, so the block itself can be replaced by rename), re-reads the block under it, writes a temp file
in the same folder, fsyncs it and renames it into place. We take the same lock, re-read under it,
write the same way (keeping the file's mode and owner) and let go at once: nothing slow ever runs
while it is held. The lock is a real ``flock``, the kind Hermes takes (`foundation.flock`). The lock
file is opened without following a symlink (a symlinked lock file could point anywhere), and
waiting for it is bounded (the agent holds it for milliseconds).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.foundation.flock import FileLock, LockFileBusy
from mnemo_ops.foundation.private_files import fsync_path

POLL_S = 0.02
TEMPORARY_PREFIX = ".mnemo-ops-"
TEMPORARY_SUFFIX = ".tmp"


class BlockLockTimeout(MnemoOpsError):
    """Hermes' lock on a block was not free within the wait; the block was not touched."""


def lock_path(path: Path) -> Path:
    """``<file>.lock`` beside the block, as Hermes names it."""
    return path.with_name(f"{path.name}.lock")


@contextlib.contextmanager
def block_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold Hermes' exclusive flock on ``<path>.lock`` (created 0600 when missing).

    Raises BlockLockTimeout when the agent keeps it longer than `timeout_s`, and MnemoOpsError when
    the lock file is a symlink.
    """
    lock = lock_path(path)
    file_lock = FileLock(
        lock, mode="ab", follow_symlinks=False, create_mode=0o600, poll_seconds=POLL_S
    )
    try:
        file_lock.acquire(timeout_s)
    except LockFileBusy:
        raise BlockLockTimeout(
            f"{lock} stayed locked by another process for {timeout_s:g} s; "
            f"{path.name} was not changed"
        ) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise MnemoOpsError(f"{lock} is a symlink; {path.name} is left as it is") from None
        raise MnemoOpsError(f"cannot open {lock}: {error.strerror}") from None
    try:
        yield
    finally:
        file_lock.release()


def replace_block(path: Path, text: str, mode: int, uid: int, gid: int) -> None:
    """Replace the block at `path` with `text`: temp file in the same folder, the old file's mode
    (and owner, when we may set it), fsync, rename, fsync of the folder. Call it under `block_lock`."""
    descriptor, temporary = tempfile.mkstemp(
        prefix=f"{TEMPORARY_PREFIX}{path.name}.", suffix=TEMPORARY_SUFFIX, dir=path.parent
    )
    try:
        os.fchmod(descriptor, mode)
        if os.geteuid() == 0 and (uid, gid) != (0, 0):
            os.fchown(descriptor, uid, gid)  # root runs the job: the file stays the agent's
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(text.encode("utf-8"))
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    fsync_path(path.parent)


def remove_stale_temporaries(folder: Path) -> list[str]:
    """Remove temp files a killed rewrite of ours left in `folder` (never anything else).

    They are partial copies made from a block that was still in place (and in quarantine), so
    nothing is lost; only regular files with our own prefix are touched, symlinks never.
    """
    removed = []
    if not folder.is_dir() or folder.is_symlink():
        return removed
    for entry in os.scandir(folder):
        if (
            entry.name.startswith(TEMPORARY_PREFIX)
            and entry.name.endswith(TEMPORARY_SUFFIX)
            and entry.is_file(follow_symlinks=False)
        ):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(entry.name)
    return removed
