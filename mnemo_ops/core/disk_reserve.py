"""The free-space reserve for the live agent.

The agent writes to the database whenever it likes; if a checkpoint or a job of ours fills the
filesystem, the agent's next write fails with "database or disk is full" (on a nearly full
filesystem the pre-write checkpoint alone can take as much room as the database, and the job's
edges and WAL the rest). So every checkpoint and every writing job leaves a
reserve free on the database's filesystem: ``disk.reserve_factor`` times the database plus its WAL
(default 2x: room for the WAL to grow by the database's size and for SQLite's temporary files),
never less than ``disk.reserve_floor_mb``. Below it:

- a checkpoint is refused (``checkpoints.create.check_free_space``; a deduplicated one is also
  stopped while it writes its new pages, by the chunk store's own check);
- a writing job does not start, nor does its dry run (`check_free_space`, which the runner calls
  before the writer lock, with the writability checks: exit 2, no ledger row);
- the morning report warns before the reserve is reached (``jobs/nightly_selfcare/audits/database_health``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.foundation.exit_codes import USAGE
from mnemo_ops.settings import Settings

if TYPE_CHECKING:  # the manifests module is for the annotation alone: the checkpoint child skips it
    from mnemo_ops.core.manifests import JobManifest

MEBIBYTE = 1024 * 1024


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def nearest_existing(folder: Path) -> Path:
    """`folder`, or its nearest existing parent (a state dir not created yet lives on its parent's disk)."""
    folder = Path(folder)
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def database_bytes(settings: Settings) -> int:
    """The database file plus its WAL."""
    return _size(settings.db_path) + _size(Path(f"{settings.db_path}-wal"))


def reserve_bytes(settings: Settings) -> int:
    """The free space kept for the agent: factor x (database + WAL), at least the floor."""
    factor = settings.disk.reserve_factor
    floor = settings.disk.reserve_floor_mb * MEBIBYTE
    return max(floor, int(factor * database_bytes(settings)))


def same_filesystem(first: Path, second: Path) -> bool:
    """True when both paths (or their nearest existing parents) are on one device."""
    return os.stat(nearest_existing(first)).st_dev == os.stat(nearest_existing(second)).st_dev


@dataclasses.dataclass(frozen=True)
class FreeSpace:
    """Free space at a folder against the reserve, after `needed` more bytes are written there."""

    folder: Path
    free: int
    needed: int
    reserve: int

    @property
    def left(self) -> int:
        """What would be free after writing `needed` bytes."""
        return self.free - self.needed

    @property
    def enough(self) -> bool:
        """True when writing `needed` bytes still leaves the reserve free."""
        return self.left >= self.reserve

    def describe(self) -> str:
        """``12 MiB free at /data, below the 256 MiB reserve kept for the live agent``-style text."""
        after = f" ({self.needed / MEBIBYTE:,.0f} MiB needed)" if self.needed else ""
        return (
            f"{self.free / MEBIBYTE:,.0f} MiB free at {self.folder}{after}, "
            f"{'below' if not self.enough else 'above'} the {self.reserve / MEBIBYTE:,.0f} MiB "
            "reserve kept for the live agent"
        )


def free_space(settings: Settings, folder: Path | None = None, needed: int = 0) -> FreeSpace:
    """Free space at `folder` (default: the database's folder) against the reserve."""
    folder = nearest_existing(folder or settings.db_path.parent)
    return FreeSpace(
        folder=folder,
        free=shutil.disk_usage(folder).free,
        needed=needed,
        reserve=reserve_bytes(settings),
    )


def check_free_space(settings: Settings, manifest: JobManifest) -> None:
    """Before the writer lock: a job that writes the database does not start below the reserve.

    Dry runs are refused too, so they report what the real run would meet; jobs that do not write
    the database are not checked. Raises MnemoOpsError (exit 2: the disk needs room before any run
    can help) with one line naming the folder, the free space and the reserve.
    """
    if "database" not in manifest.writes:
        return
    space = free_space(settings)
    if not space.enough:
        raise MnemoOpsError(
            f"not starting {manifest.name}: {space.describe()} "
            f"({settings.disk.reserve_factor:g}x the database and its WAL, at least "
            f"{settings.disk.reserve_floor_mb} MiB: disk.reserve_factor, "
            "disk.reserve_floor_mb); free some space first",
            exit_code=USAGE,
        )
