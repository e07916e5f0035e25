"""The Maildir-style capture spool under ``<state_dir>/queue/``.

Producers write a file into ``tmp/`` and rename it into ``new/`` (a rename is atomic, so the drain never
sees half a file). The drain moves a drained file to ``cur/`` and a rejected one to ``failed/`` with
``<name>.error.json`` beside it. Nothing here ever deletes a file or overwrites one it did not write,
and nothing follows a symlink: an entry of ``new/`` that is a link is rejected and moved as the link
itself, and the spool folders themselves must be real folders.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import stat
import time
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.capped_read import (
    NOT_A_FILE,
    SYMLINK,
    TOO_LARGE,
    ReadRefused,
    read_capped,
)
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.foundation.private_files import fsync_path
from mnemo_ops.jobs.bridge_drain.items import FileRejected, RejectedItem

SUBDIRS = ("tmp", "new", "cur", "failed")
FILE_MODE = 0o600
DIR_MODE = 0o700


def _write_new_file(path: Path, data: bytes) -> None:
    """Create `path` (never replacing anything), write, fsync."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            descriptor = -1
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        if descriptor != -1:
            os.close(descriptor)


def _rejection(refusal: ReadRefused, max_bytes: int) -> str:
    """Why a spool file was not read, as its ``.error.json`` says it."""
    if refusal.reason == SYMLINK:
        return "is a symlink (never followed out of the queue)"
    if refusal.reason == NOT_A_FILE:
        return "is not a regular file"
    if refusal.reason == TOO_LARGE and refusal.size is not None:
        return f"file is {refusal.size} bytes, over the {max_bytes}-byte limit"
    if refusal.reason == TOO_LARGE:
        return f"file is over the {max_bytes}-byte limit"
    return f"cannot be read: {refusal.strerror}"


class Spool:
    """One spool folder (``queue/``) with its four Maildir sub-folders."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def folder(self, name: str) -> Path:
        """``tmp``, ``new``, ``cur`` or ``failed``."""
        return self.root / name

    def exists(self) -> bool:
        """True when the spool has a ``new/`` folder (otherwise there is nothing to drain)."""
        return os.path.lexists(self.folder("new"))

    def check(self) -> None:
        """Refuse a spool whose folders are symlinks or not folders: never follow a link out of it."""
        for path in (self.root, *(self.folder(name) for name in SUBDIRS)):
            if not os.path.lexists(path):
                continue
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise MnemoOpsError(f"the spool folder {path} is a symlink; refusing to follow it")
            if not stat.S_ISDIR(mode):
                raise MnemoOpsError(f"the spool folder {path} is not a folder")

    def ensure(self) -> None:
        """Create the spool folders (0700) that are missing; only for real runs and producers."""
        self.check()
        # The state dir too, when capture runs before any job: mkdir's mode only applies to the last part.
        self.root.parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        self.root.mkdir(exist_ok=True, mode=DIR_MODE)
        for name in SUBDIRS:
            self.folder(name).mkdir(exist_ok=True, mode=DIR_MODE)

    def pending(self) -> list[str]:
        """Names waiting in ``new/``, oldest first (Maildir names start with the delivery time).

        Dot files are a producer's work in progress by convention and are left alone.
        """
        if not self.exists():
            return []
        with os.scandir(self.folder("new")) as entries:
            return sorted(entry.name for entry in entries if not entry.name.startswith("."))

    def read(self, name: str, max_bytes: int) -> bytes:
        """The bytes of ``new/<name>``; FileRejected when it is a symlink, not a regular file, or too big."""
        path = self.folder("new") / name
        try:
            data, _ = read_capped(path, max_bytes)
        except ReadRefused as refusal:
            raise FileRejected(_rejection(refusal, max_bytes)) from None
        return data

    @staticmethod
    def unique_name(suffix: str) -> str:
        """A Maildir-style unique name: ``<time ns>.P<pid>R<random>.<host><suffix>``."""
        host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"
        return f"{time.time_ns()}.P{os.getpid()}R{secrets.token_hex(6)}.{host}{suffix}"

    def deliver(self, data: bytes, suffix: str = ".json") -> Path:
        """Write `data` as a new spool file the Maildir way (tmp/, fsync, rename into new/)."""
        self.ensure()
        name = self.unique_name(suffix)
        temporary = self.folder("tmp") / name
        _write_new_file(temporary, data)
        os.rename(temporary, self.folder("new") / name)
        fsync_path(self.folder("new"))
        return self.folder("new") / name

    def _free_name(self, folder: str, name: str) -> str:
        """`name`, or `name.1`, `name.2`, ... : the first that does not exist in `folder` (never clobber)."""
        candidate, number = name, 0
        # Only the file itself counts: a reason file without its file is our own leftover from a run
        # killed between writing it and moving the file, and is rewritten, not skipped.
        while os.path.lexists(self.folder(folder) / candidate):
            number += 1
            candidate = f"{name}.{number}"
        return candidate

    def _move(self, name: str, folder: str) -> Path:
        target_name = self._free_name(folder, name)
        target = self.folder(folder) / target_name
        os.rename(
            self.folder("new") / name, target
        )  # rename moves a symlink itself, never its target
        fsync_path(self.folder(folder))
        return target

    def mark_drained(self, name: str) -> Path:
        """Move ``new/<name>`` to ``cur/`` (under a free name: an earlier file of that name stays)."""
        return self._move(name, "cur")

    def _write_error(self, target: Path, report: dict[str, Any]) -> None:
        error_path = target.parent / f"{target.name}.error.json"
        temporary = self.folder("tmp") / f".{target.name}.error.json.{os.getpid()}"
        if os.path.lexists(temporary):
            os.unlink(temporary)  # our own leftover from a killed run, never a producer's file
        _write_new_file(
            temporary, (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        )
        os.replace(temporary, error_path)

    def reject_file(self, name: str, reason: str, rejected_at: str) -> Path:
        """Move ``new/<name>`` to ``failed/`` and write ``<name>.error.json`` beside it; return the new path.

        The reason file is written first: a run killed in between leaves the file in ``new/`` and the
        next run writes the same reason file again (same free name) and moves it.
        """
        target = self.folder("failed") / self._free_name("failed", name)
        self._write_error(target, {"file": name, "reason": reason, "rejected_at": rejected_at})
        os.rename(self.folder("new") / name, target)
        fsync_path(self.folder("failed"))
        return target

    def write_rejected_items(
        self, name: str, rejected: list[RejectedItem], rejected_at: str
    ) -> Path:
        """Write the bad items of ``new/<name>`` into a new ``failed/<name>.rejected.jsonl`` with reasons.

        Each line is the item's original text, so a fixed file can be moved back into ``new/``. A run
        killed after this write and before the source moved writes the same bytes again: the existing
        identical file is reused instead of making a second copy.
        """
        data = ("\n".join(item.original for item in rejected) + "\n").encode("utf-8")
        base = f"{name}.rejected.jsonl"
        candidate, number = base, 0
        while os.path.lexists(self.folder("failed") / candidate):
            existing = self.folder("failed") / candidate
            if not existing.is_symlink() and existing.is_file() and existing.read_bytes() == data:
                break
            number += 1
            candidate = f"{base}.{number}"
        target = self.folder("failed") / candidate
        if not os.path.lexists(target):
            temporary = self.folder("tmp") / f".{candidate}.{os.getpid()}"
            if os.path.lexists(temporary):
                os.unlink(temporary)  # our own leftover from a killed run
            _write_new_file(temporary, data)
            os.rename(temporary, target)
        self._write_error(
            target,
            {
                "file": name,
                "rejected_at": rejected_at,
                "items": [
                    {"position": item.position, "reasons": list(item.reasons)} for item in rejected
                ],
            },
        )
        fsync_path(self.folder("failed"))
        return target
