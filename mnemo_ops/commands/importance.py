"""``mnemo-ops importance list|restore``: what the sleep stages' importance stage raised, and undoing it."""

from __future__ import annotations

import typer

from mnemo_ops import database
from mnemo_ops.commands.common import CURRENT, command_group, emit, handle_errors
from mnemo_ops.commands.forgotten import restore_records
from mnemo_ops.core import state
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.sleep import importance, store

RESTORE_JOB = "importance-restore"
"""The ledger name of ``mnemo-ops importance restore`` (a command, recorded like a run)."""
PREVIEW_CHARS = 80


def register(app: typer.Typer) -> None:
    """Add the ``importance`` command group."""
    group = command_group(
        app,
        "importance",
        "User statements whose importance the sleep stages raised past the Hermes plugin's cut, "
        "and putting the old values back.\n\nExample: mnemo-ops importance list",
        plain_help=True,
    )

    @group.command(
        "list",
        help="Raised importances: id, night, why, the value before and after, whether ours is still "
        "there, and the start of the text.\n\n"
        "Exit codes: 0 listed, 2 no database.\n\n"
        "Example: mnemo-ops --json importance list --night 2026-05-04",
    )
    @handle_errors
    def list_command(
        night: str = typer.Option(None, "--night", help="Only this night (YYYY-MM-DD)."),
        show_all: bool = typer.Option(False, "--all", help="Include those already restored."),
    ) -> None:
        settings = CURRENT.settings
        connection = database.open_memory_db(settings.db_path, readonly=True)
        ledger = state.open_state_readonly(settings.state_db_path)
        try:
            entries = importance.describe(
                connection, importance.recorded(ledger, night=night, include_restored=show_all)
            )
        finally:
            connection.close()
            if ledger is not None:
                ledger.close()

        def text(console) -> None:
            if not entries:
                console.print("nothing raised" + (f" on the night of {night}" if night else ""))
                return
            for entry in entries:
                preview = (entry["content"] or "").replace("\n", " ")
                if len(preview) > PREVIEW_CHARS:
                    preview = preview[: PREVIEW_CHARS - 3] + "..."
                console.print(
                    f"  {entry['night']}  {entry['memory_id']}  {entry['reason']:<13} "
                    f"{entry['status']:<13} {entry['importance_before']} -> "
                    f"{entry['importance_after']}  {preview}",
                    markup=False,
                    soft_wrap=True,
                )
            console.print(
                "Put one back with: mnemo-ops importance restore MEMORY_ID --dry-run "
                "(or --night NIGHT, or --all)"
            )

        emit({"db": str(settings.db_path), "raised": entries}, text)

    @group.command(
        "restore",
        help="Put back the importance the named memories had before the sleep stages raised it, "
        "of one night's (--night), or of all (--all); a memory changed since is left alone and "
        "counted. A restored memory is never raised again.\n\n"
        "Exit codes: 0 done, 2 nothing named or no such record, 75 another writer holds the lock.\n\n"
        "Example: mnemo-ops importance restore --all --dry-run",
    )
    @handle_errors
    def restore_command(
        memory_ids: list[str] = typer.Argument(None, help="Memory ids to restore.", metavar="ID"),
        night: str = typer.Option(None, "--night", help="Restore everything of this night."),
        everything: bool = typer.Option(False, "--all", help="Restore everything raised."),
        dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Count; change nothing."),
        wait: float = typer.Option(
            0.0, "--wait", help="Wait up to SECONDS for the writer lock.", metavar="SECONDS"
        ),
    ) -> None:
        settings = CURRENT.settings
        memory_ids = list(memory_ids or [])
        if sum(bool(choice) for choice in (memory_ids, night, everything)) != 1:
            raise UsageError("name the memories to restore: IDs, or --night NIGHT, or --all")

        def restore(really: bool):
            return restore_records(
                settings,
                importance,
                RESTORE_JOB,
                "importances_restored",
                memory_ids,
                night,
                everything,
                dry_run=not really,
                missing_hint="no raised importance for memory id {ids} "
                "(mnemo-ops importance list shows them)",
            )

        if dry_run:
            counts, entries = restore(really=False)
        else:
            with WriterLock(lock_path_for(settings.state_dir, settings.db_path), RESTORE_JOB, wait):
                counts, entries = restore(really=True)
        verb = "would restore" if dry_run else "restored"
        emit(
            {
                "dry_run": dry_run,
                **counts,
                "memory_ids": [store.split_key(entry["memory_key"])[1] for entry in entries],
            },
            lambda console: console.print(
                f"{verb} {counts['restored']} importance{'' if counts['restored'] == 1 else 's'}; "
                f"{counts['changed_since']} changed since and left alone"
            ),
        )
