"""``mnemo-ops forgotten list|restore``: what the sleep stages archived or closed, and undoing it."""

from __future__ import annotations

import typer

from mnemo_ops.cli.sleep_records import RecordsGroup, register_group
from mnemo_ops.jobs.evening_batch.sleep import forgetting

GROUP = RecordsGroup(
    name="forgotten",
    help="Memories the sleep stages archived (forgetting) or closed (a proven contradiction), "
    "and restoring them.\n\nExample: mnemo-ops forgotten list",
    list_help="Archived and superseded memories: id, night, why (and by which rule: chatter, or a "
    "duplicate whose facts a current row holds), prominence and utility, whether our stamp is "
    "still there, and the start of the text.",
    list_example="mnemo-ops --json forgotten list --night 2026-05-04",
    restore_help="Clear the sleep stages' stamp (valid_until, and superseded_by for a "
    "contradiction) of the named memories",
    restore_example="mnemo-ops forgotten restore --night 2026-05-04 --dry-run",
    records=forgetting,
    json_key="forgotten",
    nothing="nothing archived",
    line=lambda entry: (
        f"{entry['night']}  {entry['memory_id']}  {entry['reason']:<12} "
        f"{entry.get('rule') or '-':<9} {entry['status']:<13} "
        f"prominence {entry['prominence'] or 0:.3f}  utility {entry['utility'] or 0:.3f}"
    ),
    noun=("memory", "memories"),
    missing="no archived memory with id {ids} (mnemo-ops forgotten list shows them)",
)


def register(app: typer.Typer) -> None:
    """Add the ``forgotten`` command group."""
    register_group(app, GROUP)
