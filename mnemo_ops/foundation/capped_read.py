"""Reading a file someone else put there (a spool item, Hermes' memory block) without trusting it.

The file is opened with ``O_NOFOLLOW`` (a symlink fails with ELOOP instead of leading elsewhere) and
``O_NONBLOCK`` (a FIFO put in its place cannot hang the job waiting for a writer); only a regular
file is read, and never more than a cap: its size is checked first, and the read itself stops one
byte past the cap, so a file that grows while it is read is refused too.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from mnemo_ops.foundation.errors import MnemoOpsError

SYMLINK, NOT_A_FILE, TOO_LARGE, UNREADABLE = "symlink", "not-a-file", "too-large", "unreadable"
CHUNK_BYTES = 1 << 20


class ReadRefused(MnemoOpsError):
    """`read_capped` did not read the file: `reason` is SYMLINK, NOT_A_FILE, TOO_LARGE or UNREADABLE.

    For TOO_LARGE, `size` is the size the file had when opened (None: it grew past the cap while it
    was read); for UNREADABLE, `strerror` is the system's reason.
    """

    def __init__(
        self, path: Path, reason: str, size: int | None = None, strerror: str | None = None
    ):
        detail = {
            SYMLINK: "is a symlink; not followed",
            NOT_A_FILE: "is not a regular file",
            TOO_LARGE: "is over the size cap",
            UNREADABLE: f"cannot be read: {strerror}",
        }[reason]
        super().__init__(f"{path} {detail}")
        self.path, self.reason, self.size, self.strerror = path, reason, size, strerror


def read_capped(path: Path, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file `path` (at most `max_bytes`; ReadRefused otherwise) and the
    status of the very file they were read from (its mode, owner and inode, for a later rewrite)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        # Some systems report a symlink opened with O_NOFOLLOW by another errno than ELOOP.
        if error.errno == errno.ELOOP or os.path.islink(path):
            raise ReadRefused(path, SYMLINK) from None
        raise ReadRefused(path, UNREADABLE, strerror=error.strerror) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ReadRefused(path, NOT_A_FILE)
        if info.st_size > max_bytes:
            raise ReadRefused(path, TOO_LARGE, size=info.st_size)
        chunks, remaining = [], max_bytes + 1  # one byte more tells a file that grew past the cap
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, CHUNK_BYTES))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise ReadRefused(path, TOO_LARGE)
    return data, info
