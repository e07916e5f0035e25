"""``mnemo-ops forgotten list|restore``: what the sleep stages archived or closed, and undoing it."""

from __future__ import annotations

import typer

from mnemo_ops.commands.sleep_records import RecordsGroup, register_group
from mnemo_ops.sleep import forgetting
from mnemo_ops.sleep.counters import RESTORE_JOB

GROUP = RecordsGroup(
    name="forgotten",
    help="Memories the sleep stages archived (forgetting) or closed (a proven contradiction), "
    "and restoring them.\n\nExample: mnemo-ops forgotten list",
    list_help="Archived and superseded memories: id, night, why, prominence and utility, whether "
    "our stamp is still there, and the start of the text.\n\n"
    "Exit codes: 0 listed, 2 no database.\n\n"
    "Example: mnemo-ops --json forgotten list --night 2026-05-04",
    restore_help="Clear the sleep stages' stamp (valid_until, and superseded_by for a "
    "contradiction) of the named memories, of one night's (--night), or of all (--all); a memory "
    "changed since is left alone and counted. A restored memory is never archived again.\n\n"
    "Exit codes: 0 done, 2 nothing named or no such record, 75 another writer holds the lock.\n\n"
    "Example: mnemo-ops forgotten restore --night 2026-05-04 --dry-run",
    records=forgetting,
    json_key="forgotten",
    nothing="nothing archived",
    line=lambda entry: (
        f"{entry['night']}  {entry['memory_id']}  {entry['reason']:<12} {entry['status']:<13} "
        f"prominence {entry['prominence'] or 0:.3f}  utility {entry['utility'] or 0:.3f}"
    ),
    restore_job=RESTORE_JOB,
    counter="memories_restored",
    noun=("memory", "memories"),
    missing="no archived memory with id {ids} (mnemo-ops forgotten list shows them)",
)


def register(app: typer.Typer) -> None:
    """Add the ``forgotten`` command group."""
    register_group(app, GROUP)
