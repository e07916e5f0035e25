"""``mnemo-ops demo``: build the sample home in a temporary folder, run every implemented job, report."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import typer
from rich.table import Table

from mnemo_ops.commands.common import CURRENT, emit, handle_errors
from mnemo_ops.core.errors import UsageError
from mnemo_ops.core.exit_codes import FAILED, OK
from mnemo_ops.core.runner import run_job
from mnemo_ops.jobs import implemented_jobs
from mnemo_ops.sample_database import SampleLayout, build_sample
from mnemo_ops.settings import load_settings

DEMO_ORDER = (
    "bridge-drain", "memory-maintain", "evening-batch", "memory-block-migrate", "self-reflection",
    "monthly-maintenance", "backup", "retrieval-eval", "nightly-selfcare",
)
"""Demo order: ingest first, then maintain and consolidate, then back up, evaluate and report."""


def run_demo(directory: Path | None) -> tuple[SampleLayout, list]:
    """Build the sample (in `directory`, else a new temp folder) and run every implemented job once."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="mnemo-ops-demo-"))
    elif (directory / "hermes").exists():
        raise UsageError(f"{directory} already holds a demo; pass an empty or new --dir")
    layout = build_sample(directory)
    environ = layout.environ()
    # Mnemosyne reads these when a job writes through it: keep its side effects inside the sample.
    for name in ("HERMES_HOME", "MNEMOSYNE_DATA_DIR"):
        os.environ[name] = environ[name]
    settings = load_settings(db=layout.db_path, state_dir=layout.state_dir, environ=environ)
    available = set(implemented_jobs())
    results = [run_job(settings, job, show_progress=CURRENT.show_progress) for job in DEMO_ORDER if job in available]
    return layout, results


def _report_text(layout: SampleLayout) -> str | None:
    """The morning report, when the report module is available."""
    if importlib.util.find_spec("mnemo_ops.report") is None:
        return None
    from mnemo_ops import report

    settings = load_settings(db=layout.db_path, state_dir=layout.state_dir, environ=layout.environ())
    return report.render(report.build_report(settings), "text")


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command."""

    @app.command("demo", help="Build a sample Mnemosyne home in a temporary folder (or --dir), run every "
                              "implemented job once and print the report.\n\nExample: mnemo-ops demo")
    @handle_errors
    def demo_command(
        directory: Path = typer.Option(None, "--dir", help="Build the sample here instead of a temp folder.",
                                       metavar="DIR"),
    ) -> None:
        layout, results = run_demo(directory)
        report_text = _report_text(layout)
        code = OK if all(result.status in ("ok", "dry-run") for result in results) else FAILED

        def text(console) -> None:
            console.print(f"[bold]Sample home[/] {layout.directory} (built with mnemosyne-memory's own API)")
            table = Table(title="demo runs")
            for column in ("job", "status", "changes", "warnings", "error"):
                table.add_column(column)
            for result in results:
                changes = ", ".join(f"{k}={v}" for k, v in result.changes.items()) or "-"
                table.add_row(result.job, result.status, changes, str(len(result.warnings)), result.error or "")
            console.print(table)
            if report_text:
                console.print(report_text, markup=False, highlight=False)
            console.print(f"Look around: mnemo-ops --db {layout.db_path} --state-dir {layout.state_dir} status")

        emit({"directory": str(layout.directory), "db": str(layout.db_path), "state_dir": str(layout.state_dir),
              "runs": [result.to_dict() for result in results], "report": report_text}, text)
        raise typer.Exit(code)
