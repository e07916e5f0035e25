"""Private files and folders of our own (checkpoints, reports, quarantine, baselines): 0600 files,
0700 folders, written atomically (temp file in the same folder, fsync, rename) so a crash never
leaves half a file, and never reached through a symlink (nothing we manage may lead elsewhere)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.errors import MnemoOpsError

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
CHUNK_BYTES = 1 << 20
"""Files are streamed in 1 MiB chunks: memory stays flat whatever the file size."""


def refuse_symlink(path: Path) -> None:
    """Raise MnemoOpsError when `path` is a symlink (we never follow one out of a managed folder)."""
    if path.is_symlink():
        raise MnemoOpsError(f"refusing to use {path}: it is a symlink")


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) as 0700 folders; tighten an existing one; refuse a symlink."""
    refuse_symlink(path)
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    os.chmod(path, PRIVATE_DIR_MODE)
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
        os.fchmod(handle, PRIVATE_FILE_MODE)
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


def write_new_private(path: Path, data: bytes) -> None:
    """Write `data` into the new 0600 file `path` and fsync it (refused if `path` exists, a
    symlink included: nothing is followed)."""
    descriptor = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE
    )
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_json_atomic(path: Path, data: Any) -> None:
    """`write_atomic` for a JSON document (indented, keys sorted, newline-terminated)."""
    write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def sha256_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """The sha256 of a file, read in 1 MiB chunks; `on_bytes(n)` after each chunk (progress)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while True:
            block = handle.read(CHUNK_BYTES)
            if not block:
                break
            digest.update(block)
            if on_bytes is not None:
                on_bytes(len(block))
    return digest.hexdigest()
