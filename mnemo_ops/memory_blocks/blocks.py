"""The memory block format, as Hermes' memory tool reads and writes it, and a safe read of a block.

Hermes splits a file on ``"\\n§\\n"``, strips each entry, drops empty ones and keeps the first of
duplicates; it writes the entries joined by that delimiter (no trailing newline) and counts
``len("\\n§\\n".join(entries))`` characters against the block's limit.

A block is read without following a symlink (``O_NOFOLLOW``; a symlinked file is reported, never
read or rewritten), as strict UTF-8 (invalid bytes are reported with their offset), and only up to a
size cap: a file far over its limit (`OVERSIZE_FACTOR` times) is not a memory block Hermes could have
written, so it is reported and left alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from pathlib import Path

from mnemo_ops.foundation.capped_read import (
    NOT_A_FILE,
    SYMLINK,
    TOO_LARGE,
    ReadRefused,
    read_capped,
)

ENTRY_DELIMITER = "\n§\n"
MEMORY_BLOCK = "MEMORY.md"
USER_BLOCK = "USER.md"
BLOCK_NAMES = (MEMORY_BLOCK, USER_BLOCK)
OVERSIZE_FACTOR = 10
"""A block holding more than this many times its limit is reported and left byte-identical."""
MAX_UTF8_BYTES_PER_CHARACTER = 4


def parse_entries(text: str) -> list[str]:
    """The entries of a block, as Hermes reads them: split, stripped, empty ones and repeats dropped."""
    if not text.strip():
        return []
    entries = [part.strip() for part in text.split(ENTRY_DELIMITER)]
    return list(dict.fromkeys(entry for entry in entries if entry))


def render_entries(entries: list[str]) -> str:
    """The file text Hermes writes for `entries` (joined by the delimiter, nothing after the last)."""
    return ENTRY_DELIMITER.join(entries)


def usage(entries: list[str]) -> int:
    """Characters as Hermes counts them against the limit."""
    return len(ENTRY_DELIMITER.join(entries)) if entries else 0


def entry_key(block: str, entry: str) -> str:
    """A stable identity of one entry of one block (its idempotency key in the database)."""
    return hashlib.sha256(f"memory-block\0{block}\0{entry}".encode()).hexdigest()[:32]


def preview(entry: str, width: int = 60) -> str:
    """The entry on one line, cut to `width` characters (for reports; the full text is in the DB)."""
    flat = " ".join(entry.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@dataclasses.dataclass(frozen=True)
class Block:
    """One block as read: its bytes, text, entries and the file's owner, mode and modification time."""

    name: str
    path: Path
    data: bytes
    text: str
    entries: list[str]
    mode: int
    uid: int
    gid: int
    mtime: float

    @property
    def chars(self) -> int:
        """Characters as Hermes counts them."""
        return usage(self.entries)


@dataclasses.dataclass(frozen=True)
class BlockProblem:
    """Why a block was not read: ``symlink``, ``not-a-file``, ``invalid-utf8``, ``oversize`` or
    ``unreadable``; the file is left exactly as it is."""

    name: str
    path: Path
    code: str
    message: str


def read_block(path: Path, limit: int) -> Block | BlockProblem | None:
    """Read the block at `path` (None when it does not exist: Hermes creates it on first use).

    Never follows a symlink, never reads more than `OVERSIZE_FACTOR` times the limit's bytes.
    """
    name = path.name
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return BlockProblem(name, path, "unreadable", f"cannot read {path}: {error.strerror}")
    if stat.S_ISLNK(info.st_mode):
        return BlockProblem(
            name, path, "symlink", f"{path} is a symlink; it is not followed and left as it is"
        )
    if not stat.S_ISREG(info.st_mode):
        return BlockProblem(name, path, "not-a-file", f"{path} is not a regular file")
    cap = OVERSIZE_FACTOR * limit * MAX_UTF8_BYTES_PER_CHARACTER
    try:
        data, opened = read_capped(path, cap)
    except ReadRefused as refusal:
        return _refused(name, path, limit, cap, refusal)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return BlockProblem(
            name,
            path,
            "invalid-utf8",
            f"{path} is not valid UTF-8 (byte {error.start}: {error.reason}); left as it is",
        )
    entries = parse_entries(text)
    if usage(entries) > OVERSIZE_FACTOR * limit:
        return _oversize(name, path, limit, f"{usage(entries):,} characters")
    return Block(
        name=name,
        path=path,
        data=data,
        text=text,
        entries=entries,
        mode=stat.S_IMODE(opened.st_mode),
        uid=opened.st_uid,
        gid=opened.st_gid,
        mtime=opened.st_mtime,
    )


def _refused(name: str, path: Path, limit: int, cap: int, refusal: ReadRefused) -> BlockProblem:
    """The problem of a block `read_capped` did not read (too large, or changed since the lstat)."""
    if refusal.reason == SYMLINK:
        return BlockProblem(name, path, "symlink", f"{path} is a symlink; not followed")
    if refusal.reason == NOT_A_FILE:
        return BlockProblem(name, path, "not-a-file", f"{path} is not a regular file")
    if refusal.reason == TOO_LARGE and refusal.size is not None:
        return _oversize(name, path, limit, f"{refusal.size:,} bytes")
    if refusal.reason == TOO_LARGE:  # grew while we read it
        return _oversize(name, path, limit, f"over {cap:,} bytes")
    return BlockProblem(name, path, "unreadable", f"cannot read {path}: {refusal.strerror}")


def _oversize(name: str, path: Path, limit: int, size: str) -> BlockProblem:
    return BlockProblem(
        name,
        path,
        "oversize",
        f"{path} holds {size}, more than {OVERSIZE_FACTOR}x its limit of {limit:,} characters; "
        "not a block Hermes wrote, left as it is",
    )


def folder_problem(folder: Path) -> str | None:
    """Why the memory blocks folder cannot be worked in (a symlink is never followed), or None."""
    if folder.is_symlink():
        return f"{folder} is a symlink; memory blocks are not read or written through it"
    if folder.exists() and not folder.is_dir():
        return f"{folder} is not a folder"
    return None
