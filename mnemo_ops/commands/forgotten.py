"""``mnemo-ops forgotten list|restore``: what the sleep stages archived or closed, and undoing it."""

from __future__ import annotations

import typer

from mnemo_ops import database
from mnemo_ops.commands.common import CURRENT, command_group, emit, handle_errors
from mnemo_ops.core import state
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.sleep import forgetting, store
from mnemo_ops.sleep.counters import RESTORE_JOB

PREVIEW_CHARS = 80


def register(app: typer.Typer) -> None:
    """Add the ``forgotten`` command group."""
    group = command_group(
        app,
        "forgotten",
        "Memories the sleep stages archived (forgetting) or closed (a proven contradiction), "
        "and restoring them.\n\nExample: mnemo-ops forgotten list",
        plain_help=True,
    )

    @group.command(
        "list",
        help="Archived and superseded memories: id, night, why, prominence and utility, whether our "
        "stamp is still there, and the start of the text.\n\n"
        "Exit codes: 0 listed, 2 no database.\n\n"
        "Example: mnemo-ops --json forgotten list --night 2026-05-04",
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
            entries = forgetting.describe(
                connection, forgetting.recorded(ledger, night=night, include_restored=show_all)
            )
        finally:
            connection.close()
            if ledger is not None:
                ledger.close()

        def text(console) -> None:
            if not entries:
                console.print("nothing archived" + (f" on the night of {night}" if night else ""))
                return
            for entry in entries:
                preview = (entry["content"] or "").replace("\n", " ")
                if len(preview) > PREVIEW_CHARS:
                    preview = preview[: PREVIEW_CHARS - 3] + "..."
                console.print(
                    f"  {entry['night']}  {entry['memory_id']}  {entry['reason']:<12} "
                    f"{entry['status']:<13} prominence {entry['prominence'] or 0:.3f}  "
                    f"utility {entry['utility'] or 0:.3f}  {preview}",
                    markup=False,
                    soft_wrap=True,
                )
            console.print(
                "Restore one with: mnemo-ops forgotten restore MEMORY_ID --dry-run "
                "(or --night NIGHT, or --all)"
            )

        emit({"db": str(settings.db_path), "forgotten": entries}, text)

    @group.command(
        "restore",
        help="Clear the sleep stages' stamp (valid_until, and superseded_by for a contradiction) "
        "of the named memories, of one night's (--night), or of all (--all); a memory changed since "
        "is left alone and counted. A restored memory is never archived again.\n\n"
        "Exit codes: 0 done, 2 nothing named or no such record, 75 another writer holds the lock.\n\n"
        "Example: mnemo-ops forgotten restore --night 2026-05-04 --dry-run",
    )
    @handle_errors
    def restore_command(
        memory_ids: list[str] = typer.Argument(None, help="Memory ids to restore.", metavar="ID"),
        night: str = typer.Option(None, "--night", help="Restore everything of this night."),
        everything: bool = typer.Option(False, "--all", help="Restore everything archived."),
        dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Count; change nothing."),
        wait: float = typer.Option(
            0.0, "--wait", help="Wait up to SECONDS for the writer lock.", metavar="SECONDS"
        ),
    ) -> None:
        settings = CURRENT.settings
        memory_ids = list(memory_ids or [])
        if sum(bool(choice) for choice in (memory_ids, night, everything)) != 1:
            raise UsageError("name the memories to restore: IDs, or --night NIGHT, or --all")
        if dry_run:
            counts, entries = _restore(settings, memory_ids, night, everything, dry_run=True)
        else:
            with WriterLock(lock_path_for(settings.state_dir, settings.db_path), RESTORE_JOB, wait):
                counts, entries = _restore(settings, memory_ids, night, everything, dry_run=False)
        verb = "would restore" if dry_run else "restored"
        emit(
            {
                "dry_run": dry_run,
                **counts,
                "memory_ids": [store.split_key(entry["memory_key"])[1] for entry in entries],
            },
            lambda console: console.print(
                f"{verb} {counts['restored']} memor{'y' if counts['restored'] == 1 else 'ies'}; "
                f"{counts['changed_since']} changed since and left alone"
            ),
        )


def _restore(settings, memory_ids, night, everything, dry_run: bool):
    """Select the archive records and restore them (a real run is recorded in the ledger)."""
    return restore_records(
        settings,
        forgetting,
        RESTORE_JOB,
        "memories_restored",
        memory_ids,
        night,
        everything,
        dry_run,
        missing_hint="no archived memory with id {ids} (mnemo-ops forgotten list shows them)",
    )


def restore_records(
    settings,
    records,
    job: str,
    counter: str,
    memory_ids,
    night,
    everything,
    dry_run: bool,
    missing_hint: str,
):
    """Select records through `records` (a module with ``select_for_restore`` and ``restore``) and
    restore them; a real run is recorded in the ledger as `job`, counting `counter`."""
    connection = database.open_memory_db(settings.db_path, readonly=dry_run)
    ledger = (
        state.open_state_readonly(settings.state_db_path)
        if dry_run
        else state.open_state(settings.state_db_path)
    )
    try:
        entries = records.select_for_restore(ledger, memory_ids, night, everything)
        missing = set(memory_ids) - {store.split_key(entry["memory_key"])[1] for entry in entries}
        if missing:
            raise UsageError(missing_hint.format(ids=", ".join(sorted(missing))))
        result = JobResult(job=job, dry_run=dry_run, db=str(settings.db_path))
        counts = records.restore(connection, ledger, entries, dry_run=dry_run)
        if not dry_run:
            result.count(counter, counts["restored"])
            result.stats["changed_since"] = counts["changed_since"]
            state.record_run(ledger, result.finish())
        return counts, entries
    finally:
        connection.close()
        if ledger is not None:
            ledger.close()
