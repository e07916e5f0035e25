"""The ``list`` and ``restore`` commands of what a sleep stage recorded before it changed a memory.

``forgotten`` (archived and closed memories) and ``importance`` (raised importances) are the same
two commands over different records: each names a records module (``recorded``, ``describe``,
``select_for_restore``, ``restore``) and how its lines read, and this module builds the group.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import typer

from mnemo_ops import database
from mnemo_ops.cli.common import command_group, emit, handle_errors, invocation_state
from mnemo_ops.core import folders, state
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.jobs.evening_batch.sleep import store

PREVIEW_CHARS = 80


@dataclasses.dataclass(frozen=True)
class RecordsGroup:
    """One command group over one stage's records."""

    name: str
    """The group's command name (``forgotten``)."""
    help: str
    list_help: str
    """What ``list`` shows (its exit codes and example are added)."""
    list_example: str
    restore_help: str
    """What ``restore`` puts back, up to "of the named memories" (the selection rules are added)."""
    restore_example: str
    records: ModuleType
    """The stage's module: ``recorded``, ``describe``, ``select_for_restore``, ``restore``."""
    json_key: str
    """The list's key in ``--json`` output."""
    nothing: str
    """What ``list`` says when there is nothing (``nothing archived``)."""
    line: Callable[[dict[str, Any]], str]
    """One entry's line, before the start of its text."""
    noun: tuple[str, str]
    """Singular and plural of what a restore puts back, for its summary line."""
    missing: str
    """The error for an id with no record, with ``{ids}``."""

    @property
    def restore_job(self) -> str:
        """The ledger name a real restore is recorded under (``forgotten-restore``)."""
        return f"{self.name}-restore"

    @property
    def counter(self) -> str:
        """The count a real restore records (``memories_restored``)."""
        return f"{self.noun[1]}_restored"


def records_group(ctx: typer.Context) -> RecordsGroup:
    """The records group of the command being run: the ``GROUP`` of the module that adds the group
    the command belongs to (``forgotten``, ``importance``), found by the group's name in the command
    table."""
    from mnemo_ops.cli import COMMANDS

    return importlib.import_module(COMMANDS[ctx.parent.command.name].module).GROUP


@handle_errors
def list_command(
    ctx: typer.Context,
    night: str = typer.Option(None, "--night", help="Only this night (YYYY-MM-DD)."),
    show_all: bool = typer.Option(False, "--all", help="Include those already restored."),
) -> None:
    """List the records of the group's stage: one line each, with the start of the memory's text."""
    spec = records_group(ctx)
    settings = invocation_state().settings
    connection = database.open_memory_db(settings.db_path, readonly=True)
    ledger = state.open_state_readonly(settings.state_db_path)
    try:
        entries = spec.records.describe(
            connection, spec.records.recorded(ledger, night=night, include_restored=show_all)
        )
    finally:
        connection.close()
        if ledger is not None:
            ledger.close()

    def text(console) -> None:
        if not entries:
            console.print(spec.nothing + (f" on the night of {night}" if night else ""))
            return
        for entry in entries:
            preview = (entry["content"] or "").replace("\n", " ")
            if len(preview) > PREVIEW_CHARS:
                preview = preview[: PREVIEW_CHARS - 3] + "..."
            console.print(f"  {spec.line(entry)}  {preview}", markup=False, soft_wrap=True)
        console.print(
            f"Put one back with: mnemo-ops {spec.name} restore MEMORY_ID --dry-run "
            "(or --night NIGHT, or --all)"
        )

    emit({"db": str(settings.db_path), spec.json_key: entries}, text)


@handle_errors
def restore_command(
    ctx: typer.Context,
    memory_ids: list[str] = typer.Argument(None, help="Memory ids to restore.", metavar="ID"),
    night: str = typer.Option(None, "--night", help="Restore everything of this night."),
    everything: bool = typer.Option(False, "--all", help="Restore everything recorded."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Count; change nothing."),
    wait: float = typer.Option(
        0.0, "--wait", help="Wait up to SECONDS for the writer lock.", metavar="SECONDS"
    ),
) -> None:
    """Undo the stage's change of the named memories (IDs, --night or --all), under the writer lock."""
    spec = records_group(ctx)
    settings = invocation_state().settings
    memory_ids = list(memory_ids or [])
    if sum(bool(choice) for choice in (memory_ids, night, everything)) != 1:
        raise UsageError("name the memories to restore: IDs, or --night NIGHT, or --all")
    folders.check_command_writes(settings, dry_run)
    if dry_run:
        counts, entries = _restore(settings, spec, memory_ids, night, everything, True)
    else:
        lock = lock_path_for(settings.state_dir, settings.db_path)
        with WriterLock(lock, spec.restore_job, wait):
            counts, entries = _restore(settings, spec, memory_ids, night, everything, False)
    verb = "would restore" if dry_run else "restored"
    noun = spec.noun[0] if counts["restored"] == 1 else spec.noun[1]
    emit(
        {
            "dry_run": dry_run,
            **counts,
            "memory_ids": [store.split_key(entry["memory_key"])[1] for entry in entries],
        },
        lambda console: console.print(
            f"{verb} {counts['restored']} {noun}; "
            f"{counts['changed_since']} changed since and left alone"
        ),
    )


def register_group(app: typer.Typer, spec: RecordsGroup) -> None:
    """Add `spec`'s ``list`` and ``restore`` commands under its group (`spec` is the ``GROUP`` of the
    command module named `spec.name` in the command table: the commands find it there)."""
    group = command_group(app, spec.name, spec.help, plain_help=True)

    list_help = (
        f"{spec.list_help}\n\nExit codes: 0 listed, 2 no database.\n\nExample: {spec.list_example}"
    )
    restore_help = (
        f"{spec.restore_help}, of one night's (--night), or of all (--all); a memory changed since "
        "is left alone and counted. A restored memory is never changed by the stage again.\n\n"
        "Exit codes: 0 done, 2 nothing named or no such record, 75 another writer holds the lock."
        f"\n\nExample: {spec.restore_example}"
    )

    group.command("list", help=list_help)(list_command)
    group.command("restore", help=restore_help)(restore_command)


def _restore(settings, spec: RecordsGroup, memory_ids, night, everything, dry_run: bool):
    """Select the records and restore them; a real run is recorded in the ledger."""
    connection = database.open_memory_db(settings.db_path, readonly=dry_run)
    ledger = (
        state.open_state_readonly(settings.state_db_path)
        if dry_run
        else state.open_state(settings.state_db_path)
    )
    try:
        entries = spec.records.select_for_restore(ledger, memory_ids, night, everything)
        missing = set(memory_ids) - {store.split_key(entry["memory_key"])[1] for entry in entries}
        if missing:
            raise UsageError(spec.missing.format(ids=", ".join(sorted(missing))))
        result = JobResult(job=spec.restore_job, dry_run=dry_run, db=str(settings.db_path))
        counts = spec.records.restore(connection, ledger, entries, dry_run=dry_run)
        if not dry_run:
            result.count(spec.counter, counts["restored"])
            result.stats["changed_since"] = counts["changed_since"]
            state.record_run(ledger, result.finish())
        return counts, entries
    finally:
        connection.close()
        if ledger is not None:
            ledger.close()
