"""Copy a live SQLite database inside ONE read snapshot, and check a copy.

In WAL mode a reader never blocks the live writer. SQLite's backup API copies in steps, and a
backup whose source is written between two steps by another connection restarts from the first
page: under a busy agent a stepped backup may never finish. So the source connection opens one read
transaction first and keeps it for the whole copy: every step reads the same snapshot (nothing
restarts), the row counts recorded in the manifest come from that very snapshot, and the agent keeps
writing to the WAL meanwhile. The steps exist only to drive a progress bar; their size does not
change what is copied.

Memory stays bounded: pages stream through the two connections' small page caches (a few MiB),
never the whole database.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import quote

import apsw

from mnemo_ops import database
from mnemo_ops.checkpoints.files import create_private_file

PAGES_PER_STEP = 4096
"""16 MiB per step at the default 4 KiB page: few enough steps that their overhead is invisible."""

CACHE_KIB = 2048
"""Page cache of each connection during the copy (KiB): bounded memory whatever the DB size; a small
cache copies as fast as a large one, since the copy reads each page once and the operating system's
page cache does the rest (benchmarks/README.md)."""


@dataclasses.dataclass
class SnapshotCopy:
    """What one snapshot copy saw: the row counts of its snapshot and the size of the copy."""

    row_counts: dict[str, int | None]
    page_size: int
    page_count: int
    source_journal_mode: str
    copy_s: float
    counts_s: float


def filesystem_full(directory: Path, reserve_bytes: int = 1 << 20) -> bool:
    """True when `directory`'s filesystem has almost no free bytes, or no free inodes, left."""
    try:
        stats = os.statvfs(directory)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < reserve_bytes or (
        stats.f_files > 0 and stats.f_favail == 0
    )


def open_readonly(path: Path, immutable: bool = False) -> apsw.Connection:
    """Open a SQLite file read-only; `immutable` for files nothing writes (checkpoints): no locks, no -shm."""
    uri = f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")
    connection = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    connection.set_busy_timeout(database.BUSY_TIMEOUT_MS)
    return connection


def copy_in_one_snapshot(
    source_path: Path,
    target_path: Path,
    tables: Iterable[str] = database.MAIN_TABLES,
    pages_per_step: int = PAGES_PER_STEP,
    on_pages: Callable[[int, int], None] | None = None,
) -> SnapshotCopy:
    """Copy `source_path` to a new 0600 file `target_path` from one read snapshot.

    Returns the snapshot's row counts of `tables`. `on_pages(done, total)` is called after each step.
    The copy is left in rollback-journal mode (so checking it later creates no -wal/-shm files).
    Raises apsw errors (apsw.FullError on a full disk, apsw.CorruptError on a damaged source).
    """
    source = open_readonly(source_path)
    create_private_file(target_path)
    target = apsw.Connection(str(target_path))
    try:
        for connection in (source, target):
            connection.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        # The copy is synced once, by the caller, when it is complete: no journal or per-step syncs.
        target.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")
        journal_mode = source.execute("PRAGMA journal_mode").fetchone()[0]
        started = time.perf_counter()
        source.execute("BEGIN")  # deferred: the snapshot is taken by the first read just below
        counts = database.row_counts(source, tables)
        counts_s = time.perf_counter() - started
        started = time.perf_counter()
        with target.backup("main", source, "main") as backup:
            while not backup.step(pages_per_step if pages_per_step > 0 else -1):
                if on_pages is not None:
                    on_pages(backup.page_count - backup.remaining, backup.page_count)
            if on_pages is not None:
                on_pages(backup.page_count, backup.page_count)
        copy_s = time.perf_counter() - started
        source.execute("COMMIT")
        page_size = target.execute("PRAGMA page_size").fetchone()[0]
        page_count = target.execute("PRAGMA page_count").fetchone()[0]
        # The copied header still says WAL (bytes 18-19 come from the source): switch it to rollback
        # mode so the checkpoint is a plain, self-contained file.
        target.execute("PRAGMA journal_mode = DELETE")
    except apsw.Error as error:
        # SQLite reports a full disk as FULL, CANTOPEN or IOERR depending on where it struck; the OS
        # error number tells them apart, so the caller can say "no space left" plainly.
        system_errno = target.system_errno or source.system_errno
        if system_errno in (errno.ENOSPC, errno.EDQUOT) or filesystem_full(target_path.parent):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target_path)) from error
        raise
    finally:
        target.close()
        source.close()
    return SnapshotCopy(
        counts, page_size, page_count, journal_mode, round(copy_s, 3), round(counts_s, 3)
    )


def integrity_check(path: Path, immutable: bool = True) -> str:
    """``PRAGMA integrity_check`` of a file: "ok" or the problems found, joined on one line."""
    try:
        connection = open_readonly(path, immutable=immutable)
    except apsw.Error as error:
        return f"cannot open: {error}"
    try:
        return integrity_of(connection)
    finally:
        connection.close()


def integrity_of(connection: apsw.Connection) -> str:
    """``PRAGMA integrity_check`` on an open connection: "ok" or the problems, on one line."""
    try:
        rows = [row[0] for row in connection.execute("PRAGMA integrity_check(20)")]
    except apsw.Error as error:
        return f"integrity_check failed: {error}"
    return "ok" if rows == ["ok"] else "; ".join(str(row) for row in rows)


def quick_check(path: Path) -> str:
    """``PRAGMA quick_check`` of a live file (read-only, not immutable): "ok" or the problems."""
    try:
        connection = open_readonly(path)
        try:
            rows = [row[0] for row in connection.execute("PRAGMA quick_check(20)")]
        finally:
            connection.close()
    except apsw.Error as error:
        return f"quick_check failed: {error}"
    return "ok" if rows == ["ok"] else "; ".join(str(row) for row in rows)


def counts_of(path: Path, tables: Iterable[str] = database.MAIN_TABLES) -> dict[str, int | None]:
    """Row counts of `tables` in a checkpoint file (opened immutable: nothing is written)."""
    connection = open_readonly(path, immutable=True)
    try:
        return database.row_counts(connection, tables)
    finally:
        connection.close()
