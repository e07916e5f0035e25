"""``mnemo-ops backup list|verify|restore``: the checkpoints the backup job and pre-write hooks make."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from mnemo_ops.checkpoints import catalog, chunk_store, retention
from mnemo_ops.checkpoints.restore import restore_checkpoint
from mnemo_ops.checkpoints.verify import verify_checkpoint
from mnemo_ops.cli.common import command_group, emit, handle_errors, invocation_state
from mnemo_ops.core.manifests import JobManifest, effective_manifests
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.foundation.clock import utc_now


def _size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return str(size)


def _backup_schedule(settings) -> JobManifest | None:
    """The backup job's effective manifest when it is scheduled (for the dates dailies expire)."""
    if not settings.job("backup").enabled:
        return None
    return effective_manifests(settings).get("backup")


def _expiry(decision: retention.Decision, schedule: JobManifest | None) -> str:
    """When a checkpoint expires, with the date of the daily backup that removes a daily."""
    words = decision.expires()
    if (
        schedule is None
        or not decision.keep
        or decision.role != retention.DAILY
        or not decision.within_count
        or decision.rollback_for
        or decision.newest
    ):
        return words
    moment = utc_now().astimezone()
    for _ in range((decision.limit or 0) - decision.rank + 1):
        moment = schedule.next_run(moment)
    return f"{words} (on schedule: {moment:%Y-%m-%d %H:%M})"


def _print_rows(console, rows: list[dict]) -> None:
    """The plan as plain, full rows (one checkpoint a line, never cut)."""
    width = max(len(row["name"]) for row in rows)
    console.print(
        f"{'name':<{width}}  {'counts as':<10}  {'created':<25}  {'database':>10}  "
        f"{'added':>10}  {'verified':<8}  "
        "kept because / expires",
        markup=False,
        soft_wrap=True,
    )
    for row in rows:
        mark = "FAILED" if row["status"] == "failed" else ("yes" if row["verified"] else "no")
        plan = row.get("retention") or {}
        kept = "; ".join(plan.get("reasons") or []) or "expires"
        database = "-" if row["database_bytes"] is None else _size(row["database_bytes"])
        console.print(
            f"{row['name']:<{width}}  {row.get('counts_as', row['kind']):<10}  "
            f"{row['created_at'] or '-':<25}  {database:>10}  {_size(row['added_bytes']):>10}  "
            f"{mark:<8}  "
            f"{kept}; expires {plan.get('expires', '-')}",
            markup=False,
            soft_wrap=True,
        )


@handle_errors
def list_command() -> None:
    """List the checkpoints, oldest first, with retention's plan."""
    settings = invocation_state().settings
    infos = catalog.list_checkpoints(settings)
    plan = catalog.plan_retention(settings)
    schedule = _backup_schedule(settings)
    rows = []
    for info in infos:
        decision = plan.decision(info.name)
        entry = info.to_dict()
        if decision is not None:
            entry["retention"] = decision.to_dict()
            entry["retention"]["expires"] = _expiry(decision, schedule)
            entry["counts_as"] = decision.role
        rows.append(entry)
    store = chunk_store.ChunkStore(settings.backups_dir)
    store_bytes = store.size_bytes() if store.packs.is_dir() and not store.packs.is_symlink() else 0
    totals = {
        "checkpoints_bytes": sum(info.size_bytes for info in infos),
        "store_bytes": store_bytes,
        "total_bytes": sum(info.size_bytes for info in infos) + store_bytes,
    }
    data = {
        "checkpoints": rows,
        "limits": dataclasses.asdict(catalog.limits(settings)),
        "totals": totals,
    }

    def text(console) -> None:
        if not infos:
            console.print(
                f"no checkpoints in {settings.backups_dir} (make one: mnemo-ops run backup)",
                markup=False,
                soft_wrap=True,
            )
            return
        _print_rows(console, rows)
        console.print(
            f"on disk: {_size(totals['total_bytes'])} in all ({_size(totals['checkpoints_bytes'])} "
            f"in the checkpoint folders, {_size(totals['store_bytes'])} in the shared page store)",
            markup=False,
            soft_wrap=True,
        )

    emit(data, text)


@handle_errors
def verify_command(
    name: str = typer.Argument(..., help="The checkpoint (see: mnemo-ops backup list)."),
) -> None:
    """Verify a checkpoint again; exit 1 when it fails."""
    info = catalog.find_checkpoint(invocation_state().settings, name)
    report = verify_checkpoint(info, ProgressReporter(invocation_state().show_progress))

    def text(console) -> None:
        if report.ok:
            console.print(
                f"[green]ok[/] {name}: {report.files_checked} files match their sha256, "
                "integrity_check ok, row counts match",
                soft_wrap=True,
            )
        else:
            console.print(f"[bold red]failed[/] {name}")
            for problem in report.problems:
                console.print(f"  {problem}", markup=False, soft_wrap=True)

    emit(report.to_dict(), text)
    if not report.ok:
        raise typer.Exit(1)


@handle_errors
def restore_command(
    name: str = typer.Argument(..., help="The checkpoint (see: mnemo-ops backup list)."),
    to: Path = typer.Option(
        None, "--to", help="Restore to this path instead of the live database.", metavar="PATH"
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Verify and show what would happen; change nothing."
    ),
    force: bool = typer.Option(
        False, "--force", help="Restore even while another process has the DB open."
    ),
) -> None:
    """Restore a checkpoint's mnemosyne.db (verified first)."""
    outcome = restore_checkpoint(
        invocation_state().settings,
        name,
        target=to,
        dry_run=dry_run,
        force=force,
        progress=ProgressReporter(invocation_state().show_progress),
    )

    def text(console) -> None:
        verb = "would restore" if dry_run else "restored"
        console.print(f"[green]{verb}[/] {name} -> {outcome.target}", soft_wrap=True)
        if outcome.moved_aside:
            move = "would move" if dry_run else "moved"
            console.print(
                f"  {move} aside into {outcome.safety_dir}: "
                + ", ".join(Path(path).name for path in outcome.moved_aside),
                markup=False,
                soft_wrap=True,
            )
        counts = ", ".join(
            f"{table} {count:,}" for table, count in outcome.row_counts.items() if count is not None
        )
        console.print(f"  row counts: {counts}", markup=False, soft_wrap=True)
        for user in outcome.open_by:
            console.print(
                f"  [yellow]warning[/] open by pid {user['pid']} ({user['command']}): stop it first"
            )

    emit(outcome.to_dict(), text)


def register(app: typer.Typer) -> None:
    """Add the ``backup`` command group."""
    backup_app = command_group(
        app,
        "backup",
        "Checkpoints: list (with retention's plan), verify, restore. Make one with: "
        "mnemo-ops run backup\n\nExample: mnemo-ops backup list",
    )

    backup_app.command(
        "list",
        help=(
            "List checkpoints, oldest first, with retention's plan: name, what each counts as "
            "(daily: the first backup of a UTC day; manual: a later one that day; pre-write: taken "
            "before a job's first write; failed), created, the database's size and what it added "
            "on disk, verified, why it is kept and when it expires; then the total on disk. "
            "Read-only.\n\n"
            "Exit codes: 0 ok, 2 usage or config problem.\n\n"
            "Example: mnemo-ops --json backup list"
        ),
    )(list_command)

    backup_app.command(
        "verify",
        help=(
            "Verify a checkpoint again: every file's size and sha256, integrity_check of its mnemosyne.db, "
            "row counts against the manifest. Read-only.\n\n"
            "Exit codes: 0 verified, 1 verification failed, 2 no such checkpoint.\n\n"
            "Example: mnemo-ops backup verify daily-20261130T020000Z"
        ),
    )(verify_command)

    backup_app.command(
        "restore",
        help=(
            "Restore a checkpoint's mnemosyne.db. Verifies it first; refuses while another mnemo-ops writer "
            "holds the lock (exit 75) or another process has the database open (stop the agent first); moves "
            "the current DB and its -wal/-shm into <state_dir>/restore-safety/; then renames the restored "
            "file into place atomically and checks its row counts against the manifest.\n\n"
            "Exit codes: 0 restored (or, with --dry-run, would restore), 1 refused or failed, "
            "2 no such checkpoint, or a folder it must write is read-only (named, before anything "
            "moves), 75 the writer lock is held.\n\n"
            "Example: mnemo-ops backup restore daily-20261130T020000Z --dry-run"
        ),
    )(restore_command)
