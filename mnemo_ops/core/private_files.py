"""Private files and folders of our own (reports, quarantine manifests): 0600 files, 0700 folders,
written atomically (temp file in the same folder, fsync, rename) so a crash never leaves half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) as 0700 folders; tighten an existing folder to 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def fsync_path(path: Path) -> None:
    """Flush a file's data (or a folder's entries, e.g. after a rename into it) to disk."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0)
    descriptor = os.open(path, flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically, as a 0600 file (its folder must exist)."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(handle, 0o600)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    fsync_path(path.parent)


def write_json_atomic(path: Path, data: Any) -> None:
    """`write_atomic` for a JSON document (indented, keys sorted, newline-terminated)."""
    write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))
