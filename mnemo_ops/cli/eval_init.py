"""``mnemo-ops eval init``: a starter suite from the user's own memory, and its first baseline.

The suite is built by ``evaluation.starter`` (the database read-only) and written to the one place
of the suite (``evaluation.places``: the config's ``retrieval_eval.suite``, else
``<state_dir>/eval/suite.jsonl``) with its held-out sidecar; then the ``retrieval-eval`` job writes
the first baseline where the scheduled eval reads it. ``--dry-run`` evaluates the suite from a
temporary folder outside the home and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.evaluation import places
from mnemo_ops.evaluation.starter import DEFAULT_CASES, Starter, build_starter, sidecar
from mnemo_ops.evaluation.suite import write_jsonl
from mnemo_ops.foundation.errors import MnemoOpsError, UsageError
from mnemo_ops.foundation.exit_codes import FAILED
from mnemo_ops.foundation.private_files import (
    ensure_private_dir,
    write_atomic,
    write_json_atomic,
)
from mnemo_ops.foundation.writable import describe_os_error

HELP = (
    "Build a starter eval suite from your own memory and write its first baseline, where the "
    "scheduled retrieval-eval reads them (retrieval_eval.suite and .baseline, else "
    "<state_dir>/eval/suite.jsonl and baseline.json). Each case is one of your own statements that "
    "names a number, a date or a name: the query is its other words, the answer its memory id. "
    "The suite is marked held out (suite.jsonl.meta.json): measure with it, tune nothing on it. "
    "An existing suite or baseline is kept unless --force.\n\n"
    "Exit codes: 0 written (or, with --dry-run, would be), 1 nothing to build from or the baseline "
    "run failed, 2 a suite or baseline is already there, or a usage/database problem.\n\n"
    "Example: mnemo-ops eval init --dry-run && mnemo-ops eval init && mnemo-ops eval run"
)


def _suite_bytes(starter: Starter) -> bytes:
    """The suite's JSONL, exactly as `write_jsonl` writes it (for its sha256 before writing)."""
    return "".join(
        json.dumps(case.to_dict(), ensure_ascii=False) + "\n" for case in starter.cases
    ).encode("utf-8")


def _refuse_existing(paths: tuple[Path, ...]) -> None:
    for path in paths:
        if path.exists() or path.is_symlink():
            raise UsageError(
                f"{path}: already there; eval init does not replace it (--force replaces the "
                "suite and its baseline)"
            )


def _baseline_run(settings, suite: Path, baseline: Path, dry_run: bool):
    """The first baseline, through the retrieval-eval job (its result)."""
    from mnemo_ops.jobs import run_job

    return run_job(
        settings,
        "retrieval-eval",
        dry_run=dry_run,
        options={"suite": str(suite), "write_baseline": str(baseline)},
        show_progress=invocation_state().show_progress,
    )


def _write(suite: Path, starter: Starter, about: dict[str, Any]) -> None:
    try:
        ensure_private_dir(suite.parent)
        write_atomic(suite, _suite_bytes(starter))  # 0600: the queries are the user's own words
        write_json_atomic(places.sidecar_path(suite), about)
    except OSError as error:
        raise MnemoOpsError(describe_os_error(error), exit_code=2) from None


def _text(summary: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        verb = "would write" if summary["dry_run"] else "wrote"
        console.print(
            f"{verb} {len(summary['cases'])} case(s) from {summary['statements']} statement(s) of "
            f"yours to {summary['suite']} (held out: {summary['sidecar']})",
            markup=False,
        )
        for case in summary["cases"]:
            console.print(
                f"  {escape(case['id'])}  [dim]{escape(case['category'])}[/]  "
                f"{escape(case['query'])}  -> {escape(case['answer'])}"
            )
        for reason, count in summary["skipped"].items():
            console.print(f"  left out {count} statement(s): {reason}", markup=False)
        result = summary["baseline_run"]
        metrics = (result.get("stats") or {}).get("metrics") or {}
        figures = ", ".join(f"{name} {value:.3f}" for name, value in metrics.items())
        if result["status"] == "failed":
            console.print(
                f"[red]baseline not written:[/] {escape(result['error'] or '')}", highlight=False
            )
        else:
            console.print(f"{verb} the baseline {summary['baseline']}: {figures}", markup=False)
            if not summary["dry_run"]:
                console.print("  next: mnemo-ops eval run   (exit 1 when recall regresses)")

    return render


@handle_errors
def init_command(
    cases: int = typer.Option(
        DEFAULT_CASES, "--cases", help="At most this many cases.", min=1, max=500
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace an existing suite and baseline at the suite's place."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Print what would be written; write nothing."
    ),
) -> None:
    """Build a starter suite from the user's own statements and write its first baseline."""
    settings = invocation_state().settings
    suite = places.suite_path(settings)
    baseline = places.baseline_path(settings)
    if not force:
        _refuse_existing((suite, baseline))
    starter = build_starter(settings.db_path, max_cases=cases)
    if not starter.cases:
        raise MnemoOpsError(
            f"{settings.db_path}: no live statement of yours names a number, a date or a name; "
            "nothing to build a starter suite from (write one by hand: docs/jobs/retrieval-eval.md#suites)",
            exit_code=FAILED,
        )
    about = sidecar(settings.db_path, starter, hashlib.sha256(_suite_bytes(starter)).hexdigest())
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="mnemo-ops-eval-init-") as folder:
            trial = Path(folder) / suite.name
            write_jsonl(trial, starter.cases)
            result = _baseline_run(settings, trial, baseline, dry_run=True)
    else:
        _write(suite, starter, about)
        result = _baseline_run(settings, suite, baseline, dry_run=False)
    summary = {
        "dry_run": dry_run,
        "suite": str(suite),
        "sidecar": str(places.sidecar_path(suite)),
        "baseline": str(baseline),
        **starter.to_dict(),
        "held_out": about,
        "baseline_run": result.to_dict(),
    }
    emit(summary, _text(summary))
    if result.error and result.status == "failed":
        invocation_state().err_console.print(
            f"mnemo-ops: eval init: baseline not written: {result.error}",
            markup=False,
            soft_wrap=True,
        )
    raise typer.Exit(result.exit_code)


def register(group: typer.Typer) -> None:
    """Add ``eval init`` to the eval group."""
    group.command("init", help=HELP)(init_command)
