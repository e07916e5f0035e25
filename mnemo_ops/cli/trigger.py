"""``mnemo-ops trigger install|uninstall|status``: the canonical promotion trigger (sql/)."""

from __future__ import annotations

from typing import Any

import typer

from mnemo_ops import database
from mnemo_ops.cli.common import command_group, emit, handle_errors, invocation_state
from mnemo_ops.core import folders
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.jobs.memory_maintain import trigger

RULES = (
    "Rows inserted into working_memory with source 'user' or 'fact', veracity 'stated' and importance "
    ">= 0.7 get a canonical fact in the slot (owner, 'auto:<memory_type>', '<working id>') with source "
    "'auto:<working id>'. A content change closes the current version and adds version + 1; a row that "
    "is closed, superseded or forgotten closes its lineage."
)


def _lineage_counts(connection, owner: str | None) -> dict[str, int]:
    if owner is None:
        return {"current_auto_facts": 0, "closed_auto_facts": 0}
    current, closed = connection.execute(
        "SELECT count(*) FILTER (WHERE valid_until IS NULL), count(*) FILTER (WHERE valid_until IS NOT NULL) "
        "FROM canonical_facts WHERE owner_id = ? AND source LIKE 'auto:%'",
        (owner,),
    ).fetchone()
    return {"current_auto_facts": current, "closed_auto_facts": closed}


def _print_status(console, data: dict[str, Any]) -> None:
    if not data["installed"]:
        console.print(
            "canonical promotion trigger: [bold]not installed[/] (mnemo-ops trigger install)"
        )
        return
    state = (
        "up to date"
        if data["up_to_date"]
        else "incomplete or outdated (run mnemo-ops trigger install)"
    )
    console.print(
        f"canonical promotion trigger: [bold]installed[/], version {data['version']} "
        f"(current {data['current_version']}), {state}"
    )
    console.print(f"  owner: {data['owner']}", markup=False)
    console.print(
        f"  triggers: {', '.join(data['triggers'])}; lineage index: {'yes' if data['index'] else 'no'}"
    )
    console.print(
        f"  auto facts of this owner: {data['current_auto_facts']} current, "
        f"{data['closed_auto_facts']} closed"
    )


@handle_errors
def install_command(
    owner: str = typer.Option(
        None, "--owner", help="owner_id of the promoted facts.", metavar="OWNER"
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Say what would change; change nothing."
    ),
    wait: float = typer.Option(
        0.0, "--wait", help="Wait up to SECONDS for the writer lock.", metavar="SECONDS"
    ),
) -> None:
    """Install (or upgrade) the canonical promotion trigger."""
    settings = invocation_state().settings
    chosen_owner = trigger.check_owner(owner if owner is not None else settings.owner)
    folders.check_command_writes(settings, dry_run)
    if dry_run:
        connection = database.open_memory_db(settings.db_path, readonly=True)
        try:
            action = trigger.plan_install(connection, chosen_owner)
        finally:
            connection.close()
    else:
        with WriterLock(
            lock_path_for(settings.state_dir, settings.db_path), "trigger-install", wait
        ):
            connection = database.open_memory_db(settings.db_path)
            try:
                action = trigger.install(connection, chosen_owner)
            finally:
                connection.close()
    data = {
        "action": action,
        "dry_run": dry_run,
        "owner": chosen_owner,
        "version": trigger.TRIGGER_VERSION,
        "db": str(settings.db_path),
    }
    verb = {
        "installed": "installed",
        "unchanged": "already installed (unchanged)",
        "replaced": "replaced the previous installation",
    }[action]
    emit(
        data,
        lambda console: console.print(
            f"{'would be ' if dry_run and action != 'unchanged' else ''}{verb}: canonical promotion trigger "
            f"v{trigger.TRIGGER_VERSION} for owner {chosen_owner!r}",
            markup=False,
        ),
    )


@handle_errors
def uninstall_command(
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Say what would be removed; change nothing."
    ),
    wait: float = typer.Option(
        0.0, "--wait", help="Wait up to SECONDS for the writer lock.", metavar="SECONDS"
    ),
) -> None:
    """Remove the canonical promotion trigger."""
    settings = invocation_state().settings
    folders.check_command_writes(settings, dry_run)
    if dry_run:
        connection = database.open_memory_db(settings.db_path, readonly=True)
        try:
            current = trigger.status(connection)
        finally:
            connection.close()
        removed = current.triggers + ([trigger.INDEX_NAME] if current.index else [])
    else:
        with WriterLock(
            lock_path_for(settings.state_dir, settings.db_path), "trigger-uninstall", wait
        ):
            connection = database.open_memory_db(settings.db_path)
            try:
                removed = trigger.uninstall(connection)
            finally:
                connection.close()
    data = {"removed": removed, "dry_run": dry_run, "db": str(settings.db_path)}
    emit(
        data,
        lambda console: console.print(
            (
                "nothing to remove: the trigger is not installed"
                if not removed
                else f"{'would remove' if dry_run else 'removed'}: {', '.join(removed)}"
            ),
            markup=False,
        ),
    )


@handle_errors
def status_command() -> None:
    """Show whether the trigger is installed, its version and owner, and the auto facts."""
    settings = invocation_state().settings
    connection = database.open_memory_db(settings.db_path, readonly=True)
    try:
        current = trigger.status(connection)
        data = current.to_dict()
        data.update(_lineage_counts(connection, current.owner or settings.owner))
    finally:
        connection.close()
    data["db"] = str(settings.db_path)
    emit(data, lambda console: _print_status(console, data))


def register(app: typer.Typer) -> None:
    """Add the ``trigger`` command group."""
    group = command_group(
        app,
        "trigger",
        "The canonical promotion trigger: install, uninstall, status.\n\n"
        "Example: mnemo-ops trigger install --owner dana",
    )

    group.command(
        "install",
        help=(
            f"Install (or upgrade) the canonical promotion trigger, idempotently. {RULES}\n\n"
            "The owner is fixed at install: --owner, else the config 'owner', MNEMOSYNE_DEFAULT_OWNER, or "
            "'default'. Exit codes: 0 ok, 2 database or usage problem (a read-only database, its "
            "folder or the state dir included, dry runs too), 75 another writer holds the lock.\n\n"
            "Example: mnemo-ops trigger install --owner dana --dry-run"
        ),
    )(install_command)

    group.command(
        "uninstall",
        help=(
            "Remove the canonical promotion trigger (only mnemo-ops' own triggers and index; canonical facts "
            "already promoted stay). Exit codes: 0 ok, 2 database problem (a read-only database, its "
            "folder or the state dir included, dry runs too), 75 another writer holds the lock.\n\n"
            "Example: mnemo-ops trigger uninstall"
        ),
    )(uninstall_command)

    group.command(
        "status",
        help=(
            "Show whether the trigger is installed, its version and owner, and how many auto facts exist.\n\n"
            "Example: mnemo-ops --json trigger status"
        ),
    )(status_command)
