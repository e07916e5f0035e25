"""``mnemo-ops demo``: build the sample home in a temporary folder, run every implemented job, report."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import typer

from mnemo_ops import database
from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.cli.common import table as results_table
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.foundation.exit_codes import FAILED, OK
from mnemo_ops.foundation.resources import resource_dir
from mnemo_ops.foundation.writable import require_writable
from mnemo_ops.jobs import implemented_jobs, run_job
from mnemo_ops.jobs.memory_maintain import trigger
from mnemo_ops.jobs.nightly_selfcare import report, report_render
from mnemo_ops.mnemosyne.sample_home import SampleLayout, build_sample
from mnemo_ops.settings import load_settings

DEMO_ORDER = (
    "bridge-drain",
    "memory-maintain",
    "evening-batch",
    "retrieval-eval",
    "memory-block-migrate",
    "self-reflection",
    "monthly-maintenance",
    "backup",
    "retrieval-eval",
    "nightly-selfcare",
)
"""Demo order: ingest, maintain and consolidate; set up the eval gate (suite + baseline) and run the
remaining jobs; back up, evaluate against the baseline, and write the morning report."""


def run_demo(directory: Path | None, temporary: Path | None = None) -> tuple[SampleLayout, list]:
    """Build the sample (in `directory`, checked first; else in `temporary` or a new temporary
    folder, which the caller removes) and run every implemented job once."""
    if directory is None:
        directory = temporary or Path(tempfile.mkdtemp(prefix="mnemo-ops-demo-"))
    else:
        check_directory(directory)
    layout = build_sample(directory)
    environ = layout.environ()
    # Mnemosyne reads these when a job writes through it: keep its side effects inside the sample.
    for name in ("HERMES_HOME", "MNEMOSYNE_DATA_DIR"):
        os.environ[name] = environ[name]
    settings = load_settings(db=layout.db_path, state_dir=layout.state_dir, environ=environ)
    available = set(implemented_jobs())
    _install_trigger(settings)
    # The eval baseline is taken on the memories as they are, before any job changes them: every
    # later retrieval-eval then shows whether the jobs kept recall (the demo fails if they did not).
    results = [_set_up_eval_gate(settings)] if "retrieval-eval" in available else []
    for job in DEMO_ORDER:
        if job in available:
            results.append(run_job(settings, job, show_progress=invocation_state().show_progress))
    return layout, results


def check_directory(directory: Path) -> None:
    """Refuse (exit 2, one line) a --dir that is a file, holds a demo already, or is not writable."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--dir {directory} is a file, not a folder; pass an empty or new folder")
    if (directory / "hermes").exists():
        raise UsageError(f"{directory} already holds a demo; pass an empty or new --dir")
    require_writable(
        directory, "the demo's sample home", "pass a writable --dir, or none for a temporary folder"
    )


def _install_trigger(settings) -> None:
    """What a user does on day one: ``mnemo-ops trigger install`` (stated user facts become canonical)."""
    connection = database.open_memory_db(settings.db_path)
    try:
        trigger.install(connection, settings.owner)
    finally:
        connection.close()


def _set_up_eval_gate(settings):
    """What a user does once: install a suite and write a baseline (because they asked for one).

    Taken before the first job: evening-batch's consolidation must leave recall where it was (its
    summary repair keeps Mnemosyne's summaries from burying their sources), and the retrieval-eval
    after it checks exactly that.
    """
    eval_dir = settings.state_dir / "eval"
    eval_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.copyfile(resource_dir("fixtures") / "eval" / "sample.jsonl", eval_dir / "suite.jsonl")
    return run_job(
        settings,
        "retrieval-eval",
        options={"write_baseline": str(eval_dir / "baseline.json")},
        show_progress=invocation_state().show_progress,
    )


def _report_text(layout: SampleLayout) -> str:
    """The morning report."""
    settings = load_settings(
        db=layout.db_path, state_dir=layout.state_dir, environ=layout.environ()
    )
    return report_render.render(report.build_report(settings), "text")


@handle_errors
def demo_command(
    directory: Path = typer.Option(
        None, "--dir", help="Build the sample here instead of a temp folder.", metavar="DIR"
    ),
) -> None:
    """Build the sample home (in --dir, or a temporary folder removed at the end) and run the demo."""
    # Without --dir the sample lives in a temporary folder, removed when the demo ends
    # (whatever happens): a demo leaves nothing behind unless asked to keep it.
    temporary = None if directory is not None else Path(tempfile.mkdtemp(prefix="mnemo-ops-demo-"))
    try:
        _demo(directory or temporary, kept=temporary is None)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


def _demo(directory: Path, kept: bool) -> None:
    """Run the demo in `directory` and print it; `kept` when the home stays afterwards."""
    layout, results = run_demo(directory if kept else None, temporary=directory)
    report_text = _report_text(layout)
    code = OK if all(result.status in ("ok", "dry-run") for result in results) else FAILED

    def text(console) -> None:
        console.print(
            f"[bold]Sample home[/] {layout.directory} (built with mnemosyne-memory's own API)"
        )
        table = results_table(title="demo runs")
        for column in ("job", "status", "changes", "warnings", "error"):
            table.add_column(column)
        for result in results:
            changes = ", ".join(f"{k}={v}" for k, v in result.changes.items()) or "-"
            table.add_row(
                result.job,
                result.status,
                changes,
                str(len(result.warnings)),
                result.error or "",
            )
        console.print(table)
        if report_text:
            console.print(report_text, markup=False, highlight=False)
        if kept:
            console.print(
                f"Look around: mnemo-ops --db {layout.db_path} --state-dir {layout.state_dir} "
                "status",
                markup=False,
                soft_wrap=True,
            )
        else:
            console.print(
                "The temporary sample home was removed; to keep one and look around: "
                "mnemo-ops demo --dir DIR",
                markup=False,
                soft_wrap=True,
            )

    emit(
        {
            "directory": str(layout.directory),
            "db": str(layout.db_path),
            "state_dir": str(layout.state_dir),
            "kept": kept,
            "runs": [result.to_dict() for result in results],
            "report": report_text,
        },
        text,
    )
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command."""
    app.command(
        "demo",
        help="Build a sample Mnemosyne home in a temporary folder, run every implemented job once "
        "and print the report; the temporary folder is removed at the end. With --dir the home is "
        "built there and kept, to look around in.\n\n"
        "Exit codes: 0 every job ok, 1 a job failed, 2 a --dir that is a file, not writable or "
        "already holds a demo.\n\nExample: mnemo-ops demo --dir /tmp/mnemo-demo",
    )(demo_command)
