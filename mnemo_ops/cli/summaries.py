"""``mnemo-ops summaries list|revert``: the summary repairs evening-batch made, and undoing them."""

from __future__ import annotations

import typer

from mnemo_ops import database
from mnemo_ops.cli.common import command_group, emit, handle_errors, invocation_state
from mnemo_ops.core import folders, state
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.jobs.evening_batch.consolidation import summary_repair


@handle_errors
def list_command(
    show_all: bool = typer.Option(False, "--all", help="Include repairs already reverted."),
) -> None:
    """List the recorded summary repairs."""
    settings = invocation_state().settings
    ledger = state.open_state_readonly(settings.state_db_path)
    try:
        entries = summary_repair.recorded(ledger, str(settings.db_path), include_reverted=show_all)
    finally:
        if ledger is not None:
            ledger.close()

    def text(console) -> None:
        if not entries:
            console.print("no summary repairs recorded")
            return
        for entry in entries:
            reverted = f"  reverted {entry['reverted_at']}" if entry.get("reverted_at") else ""
            console.print(
                f"  {entry['episodic_id']}  tier {entry['tier_before']} -> {entry['tier_after']}  "
                f"timestamp {entry['timestamp_before']} -> {entry['timestamp_after']}{reverted}",
                markup=False,
                soft_wrap=True,
            )
        console.print("Undo them with: mnemo-ops summaries revert --dry-run")

    emit({"db": str(settings.db_path), "repairs": entries}, text)


@handle_errors
def revert_command(
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Count; change nothing."),
    wait: float = typer.Option(
        0.0, "--wait", help="Wait up to SECONDS for the writer lock.", metavar="SECONDS"
    ),
) -> None:
    """Put back each repaired summary's original tier and timestamp."""
    settings = invocation_state().settings
    folders.check_command_writes(settings, dry_run)
    if dry_run:
        connection = database.open_memory_db(settings.db_path, readonly=True)
        ledger = state.open_state_readonly(settings.state_db_path)
        try:
            counts = summary_repair.revert(connection, ledger, str(settings.db_path), dry_run=True)
        finally:
            connection.close()
            if ledger is not None:
                ledger.close()
    else:
        with WriterLock(
            lock_path_for(settings.state_dir, settings.db_path), "summaries-revert", wait
        ):
            connection = database.open_memory_db(settings.db_path)
            ledger = state.open_state(settings.state_db_path)
            try:
                counts = summary_repair.revert(
                    connection, ledger, str(settings.db_path), dry_run=False
                )
            finally:
                connection.close()
                ledger.close()
    verb = "would revert" if dry_run else "reverted"
    emit(
        {"dry_run": dry_run, **counts},
        lambda console: console.print(
            f"{verb} {counts['reverted']} summar{'y' if counts['reverted'] == 1 else 'ies'}; "
            f"{counts['changed_since']} changed since and left alone"
        ),
    )


def register(app: typer.Typer) -> None:
    """Add the ``summaries`` command group."""
    group = command_group(
        app,
        "summaries",
        "Episodic summaries evening-batch repaired (tier and timestamp), and putting the "
        "originals back.\n\nExample: mnemo-ops summaries list",
        plain_help=True,
    )

    group.command(
        "list",
        help="The recorded repairs: summary id, tier and timestamp before and after.\n\n"
        "Example: mnemo-ops --json summaries list",
    )(list_command)

    group.command(
        "revert",
        help="Put back each repaired summary's original tier and timestamp (a summary changed since "
        "is left alone and counted). Turn the repair off first (evening_batch.summary_repair: false), "
        "or the next evening-batch repairs them again.\n\n"
        "Exit codes: 0 done, 2 no database, 75 another writer holds the lock.\n\n"
        "Example: mnemo-ops summaries revert --dry-run",
    )(revert_command)
