"""The files and folders a job run writes, checked before it starts, in real and dry runs alike.

A run that meets an unwritable folder part-way has already done (or counted) part of its work, and
its error is a raw exception; checked first, it is one line naming the path and what to do, and
a dry run reports the same problem the real run would meet. The runner checks them before the
writer lock and the pre-write checkpoint (``check_writes``): a refusal here is not a run, so it
exits 2 and leaves no ledger row, as a usage error does.
"""

from __future__ import annotations

from pathlib import Path

from mnemo_ops.core.manifests import JobManifest
from mnemo_ops.foundation.writable import require_writable, require_writable_file
from mnemo_ops.settings import Settings

STATE_FIX = "make it writable, or point --state-dir (MNEMO_OPS_STATE_DIR) at a writable folder"
FOLDER_FIX = "make the database's folder writable (SQLite writes its -wal and -shm there)"
DATABASE_FIX = (
    "make it writable by the user the jobs run as (chmod u+w), or point --db at a writable copy"
)


def check_state_dir(settings: Settings) -> None:
    """Every real run writes its ledger row into the state dir, and a writer takes its lock there."""
    require_writable(settings.state_dir, "the run ledger (state.db)", STATE_FIX)
    require_writable_file(settings.state_db_path, "the run ledger", STATE_FIX)
    require_writable(settings.state_dir / "locks", "the writer lock", STATE_FIX)


def check_database_writable(settings: Settings, purpose: str = "the memory database") -> None:
    """The database file (and its -wal and -shm, when there) must be writable in place, and its
    folder too (SQLite makes its journal there): FolderError (exit 2, one line naming the path)."""
    for path in (
        settings.db_path,
        settings.db_path.with_name(f"{settings.db_path.name}-wal"),
        settings.db_path.with_name(f"{settings.db_path.name}-shm"),
    ):
        require_writable_file(path, purpose, DATABASE_FIX)
    require_writable(settings.db_path.parent, f"{purpose}'s journal and WAL beside it", FOLDER_FIX)


def check_command_writes(settings: Settings, dry_run: bool) -> None:
    """For a command that writes the memory database under the writer lock (``trigger install``,
    ``summaries revert``, ``forgotten restore``...): refuse, before the lock, a database or state
    dir it could not write, with exit 2 and one line naming the path; a dry run is refused alike,
    as the real run would be. A missing database is left to the command's own open, which names it.
    """
    if not settings.db_path.exists():
        return
    check_database_writable(settings)
    if not dry_run:
        check_state_dir(settings)


def scope_folders(settings: Settings, manifest: JobManifest) -> list[tuple[Path, str, str]]:
    """(folder, what is written there, what to do) for each scope the manifest writes."""
    wanted = set(manifest.writes)
    if manifest.checkpoint == "before-write":
        wanted.add("checkpoints")
    folders = {
        "checkpoints": (settings.backups_dir, "checkpoints", STATE_FIX),
        "reports": (settings.reports_dir, "reports", STATE_FIX),
        "queue": (settings.queue_dir, "the bridge spool", STATE_FIX),
        "quarantine": (settings.quarantine_dir, "quarantined files", STATE_FIX),
        "memory_blocks": (
            settings.memory_blocks_dir,
            "the memory blocks",
            "make it writable, or set memory_blocks_dir in the config file",
        ),
        "database": (
            settings.db_path.parent,
            "the database's journal and WAL beside it",
            FOLDER_FIX,
        ),
    }
    return [folders[scope] for scope in sorted(wanted) if scope in folders]


def check_scopes(settings: Settings, manifest: JobManifest) -> None:
    """FolderError (exit 2, one line) for the first folder the job writes that it cannot write."""
    for folder, purpose, fix in scope_folders(settings, manifest):
        require_writable(folder, f"{purpose} of {manifest.name}", fix)


def check_writes(settings: Settings, manifest: JobManifest) -> None:
    """What a run of `manifest`'s job will write: the database file itself first (when the job
    writes the database), then every folder of its scopes. FolderError (exit 2) names the path."""
    if "database" in manifest.writes:
        check_database_writable(settings, f"the memory database of {manifest.name}")
    check_scopes(settings, manifest)
