"""``mnemo-ops status``: the database, its WAL, row counts, the lock holder and the last runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from mnemo_ops import database
from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.core import state
from mnemo_ops.core.lock import describe_holder, lock_path_for, probe_holder
from mnemo_ops.jobs.evening_batch.sleep.counters import self_model
from mnemo_ops.settings import Settings


def _size(path: Path) -> int | None:
    return path.stat().st_size if path.exists() else None


def collect_status(settings: Settings) -> dict[str, Any]:
    """Gather status read-only (no lock, no writes); DatabaseError (exit 2) when the DB is unusable."""
    connection = database.open_memory_db(settings.db_path, readonly=True)
    try:
        counts = database.row_counts(connection)
        importance = database.importance_distribution(connection)
        journal_mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        connection.close()
    ledger = state.open_state_readonly(settings.state_db_path)
    try:
        last = state.last_runs(ledger)
        counters = self_model(ledger)
    finally:
        if ledger is not None:
            ledger.close()
    holder = probe_holder(lock_path_for(settings.state_dir, settings.db_path))
    return {
        "db": str(settings.db_path),
        "db_size_bytes": _size(settings.db_path),
        "wal_size_bytes": _size(Path(f"{settings.db_path}-wal")) or 0,
        "journal_mode": journal_mode,
        "row_counts": counts,
        "importance": importance,
        "state_dir": str(settings.state_dir),
        "lock_holder": holder,
        "last_runs": last,
        "self_model": counters,
    }


@handle_errors
def status_command() -> None:
    """Show the database, its WAL, row counts, the lock holder and the last runs."""
    data = collect_status(invocation_state().settings)

    def text(console) -> None:
        console.print(
            f"[bold]database[/] {data['db']}  ({data['db_size_bytes']:,} bytes, "
            f"WAL {data['wal_size_bytes']:,} bytes, {data['journal_mode']} mode)"
        )
        counts = Table(show_header=False, box=None, padding=(0, 2))
        for table_name, count in data["row_counts"].items():
            counts.add_row(f"  {table_name}", "-" if count is None else f"{count:,}")
        console.print(counts)
        spread = data["importance"]
        if spread["rows"]:
            bands = ", ".join(f"{band} {count:,}" for band, count in spread["bands"].items())
            console.print(
                f"[bold]importance[/] {bands} ({spread['at_or_above_cut']:.0%} at or above the "
                "plugin's 0.65 cut)"
            )
        console.print(f"[bold]state dir[/] {data['state_dir']}")
        holder = data["lock_holder"]
        console.print(
            f"[bold]writer lock[/] {'held by ' + describe_holder(holder) if holder else 'free'}"
        )
        if not data["last_runs"]:
            console.print("[bold]last runs[/] none recorded yet")
        for job, info in data["last_runs"].items():
            console.print(f"  {job}: {info.get('status', '-')} at {info.get('started_at', '-')}")
        model = data["self_model"]
        runs = ", ".join(f"{job} {info['total']}" for job, info in model["runs"].items())
        console.print(f"[bold]runs[/] {runs or 'none'}")
        console.print(
            f"[bold]sleeps[/] {model['sleeps']} (last {model['last_sleep'] or 'never'}): "
            f"{model['memories_archived']} archived, {model['memories_restored']} restored, "
            f"{model['memories_superseded']} superseded, {model['confirmations']} confirmations, "
            f"{model['edges_strengthened']} edges strengthened"
        )

    emit(data, text)


def register(app: typer.Typer) -> None:
    """Add the ``status`` command."""
    app.command(
        "status",
        help="Show the database, WAL size, row counts, lock holder and last runs.\n\n"
        "Example: mnemo-ops --db ~/.hermes/mnemosyne/data/mnemosyne.db status",
    )(status_command)
