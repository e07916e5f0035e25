"""Verify a checkpoint again: every file's size and sha256, integrity_check, row counts (read-only)."""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.checkpoints import catalog, chunk_store, sqlite_copy
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
    deduplicated = is_deduplicated(manifest)
    if deduplicated and chunk_store.INDEX_FILE not in files:
        problems.append(f"the manifest lists no {chunk_store.INDEX_FILE}")
    elif not deduplicated and catalog.DATABASE_FILE not in files:
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
    if deduplicated:
        integrity, counts = _check_reassembled(info, problems, progress)
    else:
        integrity, counts = _check_database(folder / catalog.DATABASE_FILE, manifest, problems)
    if info.failed:
        problems.append(
            "this checkpoint failed verification when it was made (it lives in failed/)"
        )
    return VerificationReport(info.name, folder, not problems, problems, integrity, counts, checked)


def is_deduplicated(manifest: dict[str, Any] | None) -> bool:
    """True for a checkpoint whose database lives in the chunk store (older ones hold a full copy)."""
    return (manifest or {}).get("layout") == "deduplicated"


def database_chunks(info: CheckpointInfo) -> tuple[chunk_store.ChunkStore, chunk_store.Index]:
    """The store and index of a deduplicated checkpoint, the index checked against the manifest's
    size and tree hash (ChunkError naming the index otherwise)."""
    entry = (info.manifest or {}).get("database") or {}
    path = info.path / chunk_store.INDEX_FILE
    index = chunk_store.read_index(path)
    if index.size != entry.get("size") or index.tree_sha256() != entry.get("tree_sha256"):
        raise chunk_store.ChunkError(f"index {path} does not match its manifest")
    # The checkpoint lives in <backups>/<name>/ or <backups>/failed/<name>/.
    backups = info.path.parent.parent if info.failed else info.path.parent
    return chunk_store.ChunkStore(backups), index


def reassemble_database(info: CheckpointInfo, target: Path, progress: ProgressReporter) -> None:
    """Write a deduplicated checkpoint's database into the new file `target`, checked end to end:
    every chunk against its sha256 while read, then the written file's tree hash against the
    manifest (ChunkError naming the file at the first problem)."""
    store, index = database_chunks(info)
    with progress.bar(f"reassembling {info.name}", total=index.size) as bar:
        chunk_store.reassemble(store, index, target, bar.advance)
    if chunk_store.file_tree_sha256(target, index.chunk_bytes) != index.tree_sha256():
        target.unlink(missing_ok=True)
        raise chunk_store.ChunkError(f"the reassembled {target} does not match its manifest hash")


def _check_reassembled(
    info: CheckpointInfo, problems: list[str], progress: ProgressReporter
) -> tuple[str | None, dict]:
    """Check a deduplicated checkpoint without writing a byte: every chunk against its sha256 (and
    the index against the manifest's hash), then integrity_check and the row counts on the database
    read straight from the store."""
    try:
        store, index = database_chunks(info)
        with progress.bar(f"hashing the chunks of {info.name}", total=index.size) as bar:
            chunk_store.check_chunks(store, index, bar.advance)
        with chunk_store.ChunkedDatabase(store, index) as connection:
            integrity = sqlite_copy.integrity_of(connection)
            if integrity != "ok":
                problems.append(f"integrity_check: {integrity}")
            counts = database.row_counts(connection)
    except chunk_store.ChunkError as error:
        problems.append(str(error))
        return None, {}
    except apsw.Error as error:
        problems.append(f"cannot read the database from the store: {error}")
        return None, {}
    if counts != (info.manifest or {}).get("row_counts"):
        problems.append(
            f"row counts {counts} differ from the manifest {(info.manifest or {}).get('row_counts')}"
        )
    return integrity, counts


def _check_database(
    db_file: Path, manifest: dict[str, Any], problems: list[str]
) -> tuple[str | None, dict]:
    integrity, counts = None, {}
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
    return integrity, counts
