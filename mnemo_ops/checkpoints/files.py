"""Checkpoint folders: new 0600 files, streamed copies, fsync of a whole tree, removal, sizes.

Checkpoints hold the user's whole memory, so nothing in them may be readable by other users, and
nothing we manage may lead us through a symlink to somewhere else.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mnemo_ops.foundation.private_files import (
    CHUNK_BYTES,
    PRIVATE_FILE_MODE,
    fsync_path,
    refuse_symlink,
)


def create_private_file(path: Path) -> None:
    """Create a new empty file with mode 0600 (fails if it exists), so no other user ever sees it."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    os.close(descriptor)
    os.chmod(path, PRIVATE_FILE_MODE)


def fsync_tree(root: Path) -> None:
    """fsync every file and folder under `root` (and `root` itself), deepest first."""
    for directory, _folders, files in os.walk(root, topdown=False):
        for name in files:
            fsync_path(Path(directory) / name)
        fsync_path(Path(directory))


def copy_private_file(source: Path, target: Path) -> int:
    """Copy a regular file into a new 0600 file (streamed, fsynced); return the bytes copied."""
    refuse_symlink(source)
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    copied = 0
    with os.fdopen(descriptor, "wb") as out, source.open("rb") as handle:
        while True:
            block = handle.read(CHUNK_BYTES)
            if not block:
                break
            out.write(block)
            copied += len(block)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(target, PRIVATE_FILE_MODE)
    return copied


def remove_tree(path: Path) -> None:
    """Remove a folder we created (never through a symlink); missing is fine."""
    if path.is_symlink():
        path.unlink()
        return
    if path.exists():
        shutil.rmtree(path)


def tree_size(path: Path) -> int:
    """Total bytes of the regular files under `path` (symlinks are not followed)."""
    total = 0
    for directory, _folders, files in os.walk(path):
        for name in files:
            entry = Path(directory) / name
            if not entry.is_symlink():
                total += entry.stat().st_size
    return total
