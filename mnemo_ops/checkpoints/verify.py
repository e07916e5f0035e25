"""Verify a checkpoint again: every file's size and sha256, integrity_check, row counts (read-only)."""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath
from typing import Any

import apsw

from mnemo_ops.checkpoints import catalog, sqlite_copy
from mnemo_ops.checkpoints.catalog import CheckpointInfo
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.foundation.private_files import sha256_file


@dataclasses.dataclass
class VerificationReport:
    """The outcome of verifying one checkpoint."""

    name: str
    path: Path
    ok: bool
    problems: list[str]
    integrity_check: str | None
    row_counts: dict[str, int | None]
    files_checked: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``backup verify --json``."""
        return {
            "name": self.name,
            "path": str(self.path),
            "ok": self.ok,
            "problems": self.problems,
            "integrity_check": self.integrity_check,
            "row_counts": self.row_counts,
            "files_checked": self.files_checked,
        }


def _inside(folder: Path, relative: str) -> Path | None:
    """The file `relative` inside `folder`, or None if the name tries to leave it."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
        return None
    return folder.joinpath(*parts)


def verify_checkpoint(
    info: CheckpointInfo, progress: ProgressReporter | None = None
) -> VerificationReport:
    """Check `info` against its manifest without changing a byte (files are opened immutable)."""
    progress = progress or ProgressReporter(False)
    folder, manifest = info.path, info.manifest
    problems: list[str] = []
    if manifest is None:
        return VerificationReport(
            info.name, folder, False, ["manifest.json is missing or unreadable"], None, {}, 0
        )
    files = manifest.get("files") or {}
    if catalog.DATABASE_FILE not in files:
        problems.append("the manifest lists no mnemosyne.db")
    total = sum(int(entry.get("size") or 0) for entry in files.values())
    checked = 0
    with progress.bar(f"hashing {info.name}", total=total) as bar:
        for relative, expected in sorted(files.items()):
            path = _inside(folder, relative)
            if path is None:
                problems.append(f"{relative}: not a path inside the checkpoint")
                continue
            if path.is_symlink() or not path.is_file():
                problems.append(f"{relative}: missing")
                continue
            size = path.stat().st_size
            if size != expected.get("size"):
                problems.append(
                    f"{relative}: size {size:,} bytes, manifest says {expected.get('size')}"
                )
                continue
            if sha256_file(path, on_bytes=bar.advance) != expected.get("sha256"):
                problems.append(f"{relative}: sha256 differs from the manifest")
            checked += 1
    integrity, counts = None, {}
    db_file = folder / catalog.DATABASE_FILE
    if db_file.is_file() and not db_file.is_symlink():
        integrity = sqlite_copy.integrity_check(db_file)
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
        try:
            counts = sqlite_copy.counts_of(db_file)
        except apsw.Error as error:
            problems.append(f"cannot count rows: {error}")
        if counts and counts != manifest.get("row_counts"):
            problems.append(
                f"row counts {counts} differ from the manifest {manifest.get('row_counts')}"
            )
    if info.failed:
        problems.append(
            "this checkpoint failed verification when it was made (it lives in failed/)"
        )
    return VerificationReport(info.name, folder, not problems, problems, integrity, counts, checked)
