"""``mnemo-ops importance list|restore``: what the sleep stages' importance stage raised, and undoing it."""

from __future__ import annotations

import typer

from mnemo_ops.cli.sleep_records import RecordsGroup, register_group
from mnemo_ops.jobs.evening_batch.sleep import importance

GROUP = RecordsGroup(
    name="importance",
    help="User statements whose importance the sleep stages raised past the Hermes plugin's cut, "
    "and putting the old values back.\n\nExample: mnemo-ops importance list",
    list_help="Raised importances: id, night, why, the value before and after, whether ours is "
    "still there, and the start of the text.",
    list_example="mnemo-ops --json importance list --night 2026-05-04",
    restore_help="Put back the importance the sleep stages raised to its value before, for the "
    "named memories",
    restore_example="mnemo-ops importance restore --all --dry-run",
    records=importance,
    json_key="raised",
    nothing="nothing raised",
    line=lambda entry: (
        f"{entry['night']}  {entry['memory_id']}  {entry['reason']:<13} {entry['status']:<13} "
        f"{entry['importance_before']} -> {entry['importance_after']}"
    ),
    noun=("importance", "importances"),
    missing="no raised importance for memory id {ids} (mnemo-ops importance list shows them)",
)


def register(app: typer.Typer) -> None:
    """Add the ``importance`` command group."""
    register_group(app, GROUP)
