"""``mnemo-ops graduated list|restore``: the global rows the sleep stages' graduation stage wrote, and
closing them."""

from __future__ import annotations

import typer

from mnemo_ops.cli.sleep_records import RecordsGroup, register_group
from mnemo_ops.jobs.evening_batch.sleep import graduation

GROUP = RecordsGroup(
    name="graduated",
    help="What the owner said that the sleep stages made global rows every later conversation "
    "receives, and closing them.\n\nExample: mnemo-ops graduated list",
    list_help="Graduated rows: id, night, whether it is still live, how it was made, the rows it "
    "comes from, and the start of the text.",
    list_example="mnemo-ops --json graduated list --night 2026-05-04",
    restore_help="Close the global rows the sleep stages graduated (valid_until now; nothing is "
    "deleted, the source rows are untouched), for the named memories",
    restore_example="mnemo-ops graduated restore --all --dry-run",
    records=graduation,
    json_key="graduated",
    nothing="nothing graduated",
    line=lambda entry: (
        f"{entry['night']}  {entry['memory_id']}  {entry['status']:<10} {entry['method']:<12} "
        f"from {','.join(entry['derived_from'])}"
    ),
    noun=("graduated row", "graduated rows"),
    missing="no graduated row with memory id {ids} (mnemo-ops graduated list shows them)",
)


def register(app: typer.Typer) -> None:
    """Add the ``graduated`` command group."""
    register_group(app, GROUP)
