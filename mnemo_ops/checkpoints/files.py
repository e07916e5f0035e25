"""Private files and folders for checkpoints: 0600 / 0700, fsync, streamed sha256, no symlinks.

Checkpoints hold the user's whole memory, so nothing in them may be readable by other users, and
nothing we manage may lead us through a symlink to somewhere else.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from mnemo_ops.core.errors import MnemoOpsError
from mnemo_ops.core.private_files import fsync_path

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
CHUNK_BYTES = 1 << 20
"""Files are streamed in 1 MiB chunks: memory stays flat whatever the file size."""


def refuse_symlink(path: Path) -> None:
    """Raise MnemoOpsError when `path` is a symlink (we never follow one out of a managed folder)."""
    if path.is_symlink():
        raise MnemoOpsError(f"refusing to use {path}: it is a symlink")


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) if needed and make it 0700; refuse a symlink."""
    refuse_symlink(path)
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    os.chmod(path, PRIVATE_DIR_MODE)
    return path


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
