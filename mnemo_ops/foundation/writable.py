"""Whether a folder we are about to write can be written, asked without writing anything.

A dry run must find the problem the real run would meet, and must leave no trace, so nothing is
created or probed here: the folder (or, when it does not exist yet, the nearest folder above it that
does) is looked at with ``os.access``, which the kernel answers for this user, including what
permission bits do not show (an immutable folder, a read-only mount; root included).

A path whose mode grants nobody write permission (``chmod a-w``: a file at 0444, a folder at 0555)
is refused too, even when ``os.access`` says yes. Only root gets that yes, and someone made the path
read-only on purpose: the agent, running as its own user, could no longer write what we changed,
and root writing it anyway would leave files the agent cannot use. So the refusal is the same for
every user, root included.
"""

from __future__ import annotations

import errno
import getpass
import os
import stat
from pathlib import Path

from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.foundation.exit_codes import USAGE


class FolderError(MnemoOpsError):
    """A folder mnemo-ops must write is missing its way in: not a folder, or not writable (exit 2:
    the paths or their permissions need fixing, not the job)."""

    exit_code = USAGE


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers): the uid says it
        return f"uid {os.getuid()}"


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _marked_read_only(path: Path) -> str | None:
    """``"it is read-only (mode 0444)"`` when no one has write permission on `path`, else None."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    if mode & 0o222:
        return None
    return f"it is read-only (mode {mode:04o})"


def unwritable_reason(folder: Path) -> tuple[Path, str] | None:
    """(the path at fault, why) when files cannot be made in `folder`, else None.

    A folder that does not exist yet is fine when the nearest existing folder above it is writable
    (it will be created). A path on the way that is a file, a symlink to nothing or a folder this
    user cannot write is at fault.
    """
    folder = Path(folder)
    for candidate in (folder, *folder.parents):
        if candidate.is_symlink() and not candidate.exists():
            return candidate, "it is a symlink to nothing"
        if not candidate.exists():
            continue
        if not candidate.is_dir():
            return candidate, "it is a file, not a folder"
        if os.access(candidate, os.W_OK | os.X_OK):
            marked = _marked_read_only(candidate)
            return None if marked is None else (candidate, marked)
        if _read_only(candidate):
            return candidate, "it is on a read-only filesystem"
        return candidate, f"it is not writable by {_user()}"
    return folder, "no folder on its path exists"


def require_writable(folder: Path, purpose: str, fix: str) -> None:
    """Raise FolderError, one line naming the path, the reason, what needs it and what to do,
    when `folder` cannot be written; `purpose` says what is written there."""
    problem = unwritable_reason(folder)
    if problem is None:
        return
    path, reason = problem
    where = str(path) if path == Path(folder) else f"{path} (on the way to {folder})"
    raise FolderError(f"cannot write {purpose}: {where}: {reason}; {fix}")


def unwritable_file_reason(path: Path) -> str | None:
    """Why the existing file `path` cannot be written in place, else None (also None when it does
    not exist: the folder's check covers making it)."""
    path = Path(path)
    if not path.exists():
        return None
    if path.is_dir():
        return "it is a folder, not a file"
    if not os.access(path, os.W_OK):
        if _read_only(path):
            return "it is on a read-only filesystem"
        return f"it is not writable by {_user()}"
    return _marked_read_only(path)


def require_writable_file(path: Path, purpose: str, fix: str) -> None:
    """Raise FolderError, one line naming the file, the reason, what needs it and what to do,
    when the existing file `path` cannot be written in place."""
    reason = unwritable_file_reason(path)
    if reason is not None:
        raise FolderError(f"cannot write {purpose}: {path}: {reason}; {fix}")


def describe_os_error(error: OSError) -> str:
    """One line for an OSError met while writing our files: what failed, where, and what to do."""
    path = error.filename or ""
    reason = error.strerror or str(error)
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = f"make it writable by {_user()}, or choose other paths (--state-dir, --db)"
    elif error.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        fix = "a file stands where a folder should be (or the other way round): move it away"
    elif error.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some space there"
    else:
        fix = "check the path and its permissions"
    return f"{reason}: {path}; {fix}" if path else f"{reason}; {fix}"
