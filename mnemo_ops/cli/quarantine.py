"""``mnemo-ops quarantine list|restore``: files staged instead of deleted, and putting them back."""

from __future__ import annotations

import typer

from mnemo_ops.cli.common import command_group, emit, handle_errors, invocation_state
from mnemo_ops.jobs.nightly_selfcare import quarantine


@handle_errors
def list_command(
    show_all: bool = typer.Option(
        False,
        "--all",
        help="Include entries already restored, and entries of "
        "an interrupted run whose file never moved.",
    ),
) -> None:
    """List the quarantine entries (staged ones, or all with --all)."""
    entries = [
        entry
        for entry in quarantine.list_entries(invocation_state().settings)
        if show_all or entry["status"] == "staged"
    ]

    def text(console) -> None:
        if not entries:
            console.print(f"quarantine is empty ({invocation_state().settings.quarantine_dir})")
            return
        # Plain lines, not a table: the ID must never be wrapped, it is what the user copies.
        console.print(
            f"quarantine {invocation_state().settings.quarantine_dir}",
            markup=False,
            highlight=False,
        )
        for entry in entries:
            console.print(
                f"  {entry['id']}  {entry['status']:<10} {entry.get('rule', '-'):<16} "
                f"{entry.get('size', 0):>10,} B  staged {entry.get('staged_at', '-')}  "
                f"{entry['original_path']}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        console.print("Put one back with: mnemo-ops quarantine restore ID")

    emit(
        {"quarantine_dir": str(invocation_state().settings.quarantine_dir), "entries": entries},
        text,
    )


@handle_errors
def restore_command(
    entry_id: str = typer.Argument(..., help="The ID shown by 'quarantine list'.", metavar="ID"),
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Check and say what would happen; move nothing."
    ),
    replace: bool = typer.Option(
        False,
        "--replace",
        help="Replace the file now at the original path, keeping it in quarantine first.",
    ),
) -> None:
    """Move a quarantined file back to its original path."""
    entry = quarantine.restore(
        invocation_state().settings, entry_id, dry_run=dry_run, replace=replace
    )
    verb = "would restore" if dry_run else "restored"

    def text(console) -> None:
        console.print(
            f"{verb} {entry['id']} -> {entry['original_path']}", markup=False, highlight=False
        )
        if entry.get("would_replace"):
            console.print("  would keep the file there in quarantine first", markup=False)
        if entry.get("replaced_by_entry"):
            console.print(
                f"  the file it replaced is in quarantine as {entry['replaced_by_entry']}",
                markup=False,
            )

    emit({"restored": not dry_run, "dry_run": dry_run, "entry": entry}, text)


def register(app: typer.Typer) -> None:
    """Add the ``quarantine`` command group."""
    group = command_group(
        app,
        "quarantine",
        "Files staged instead of deleted (by nightly-selfcare): list, restore.\n\n"
        "Example: mnemo-ops quarantine list",
        plain_help=True,
    )

    group.command(
        "list",
        help="List quarantine entries: ID, state, original path, size, when staged.\n\n"
        "Example: mnemo-ops quarantine list --all",
    )(list_command)

    group.command(
        "restore",
        help="Move a quarantined file back to its original path, with its mode and "
        "mtime. Refuses when that path exists again, unless --replace: then the file there "
        "goes into quarantine first (for a memory block, under Hermes' MEMORY.md.lock).\n\n"
        "Example: mnemo-ops quarantine restore 20261130-1a2b3c4d --replace",
    )(restore_command)
