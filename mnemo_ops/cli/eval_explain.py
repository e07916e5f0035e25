"""``mnemo-ops eval explain``: why the agent was or was not given each case's expected memory.

The explanations are made by ``evaluation.explain`` (on a snapshot copy); this module renders
them: per case the outcome and a one-line reason, then the misses per category and reason.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.evaluation.explain import MISMATCH, REASONS, SuiteExplanation, explain_suite
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.jobs.retrieval_eval.job import default_suite_path

EXIT_CODES = (
    "Exit codes: 0 explained, 1 the reproduction of the plugin's decision differed from the "
    "plugin's own prefetch for a case (explain-mismatch: that explanation is not to be trusted), "
    "2 usage or database problem."
)
ONLY_CHOICES = ("misses",)
STYLES = {"injected": "green", "ranked-out": "yellow", "filtered": "red", "not-retrieved": "red"}


def render_header(console: Console, run: dict, extra: str = "") -> None:
    """The engine, the profile it used and the notes about it (the approximation, a plain eval)."""
    engine = run["engine"]
    plugin = f", plugin mnemosyne-hermes {run['plugin_version']}" if run["plugin_version"] else ""
    console.print(
        f"{extra}engine {engine['name']} ({engine['version']}), profile {run['profile_used']}"
        f"{plugin}",
        markup=False,
    )
    for note in run["profile_notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}")


def render_suite_explanation(
    console: Console, explained: SuiteExplanation, only_misses: bool
) -> None:
    """Each case (or each missed one) with its one-line reason, then the misses per category."""
    data = explained.to_dict()
    render_header(console, data, f"suite {explained.suite}  ")
    shown = explained.misses if only_misses else explained.cases
    for case in shown:
        best = case.explanation.best_target()
        outcome = "injected" if case.passed else (best.outcome if best else "not-retrieved")
        style = STYLES.get(outcome, "white")
        console.print(
            f"[{style}]{outcome:<13}[/] {escape(case.case.id)}  "
            f"[dim]{escape(case.case.category or 'uncategorized')}[/]  "
            f"{escape(case.case.query)}"
        )
        console.print(f"              {escape(case.sentence())}", soft_wrap=True)
        for note in case.explanation.notes:
            if note.get("code") == MISMATCH:
                console.print(f"              [bold red]{MISMATCH}:[/] {escape(note['message'])}")
    if only_misses and not shown:
        console.print("no misses: every case's expected memory is injected")
    summary = explained.summary()
    reasons = [code for code in REASONS if any(code in row["reasons"] for row in summary.values())]
    table = Table(
        box=None, padding=(0, 2), title="misses per category and reason", title_justify="left"
    )
    for column in ("category", "cases", "missed", *reasons):
        table.add_column(column, justify="left" if column == "category" else "right")
    for category, row in summary.items():
        table.add_row(
            category,
            str(row["cases"]),
            str(row["missed"]),
            *(str(row["reasons"].get(code, "")) for code in reasons),
        )
    console.print(table)
    totals = explained.reason_totals()
    if totals:
        largest = next(iter(totals))
        console.print(
            f"{len(explained.misses)} of {len(explained.cases)} cases missed; the largest reason: "
            f"{REASONS[largest]} ({totals[largest]})"
        )
    else:
        console.print(f"every one of {len(explained.cases)} cases is injected")
    console.print("[dim]one question in detail: mnemo-ops why QUESTION --expect ID|TEXT[/]")


@handle_errors
def explain_command(
    suite: str = typer.Option(
        None,
        "--suite",
        "-s",
        help="Suite file (default: config, then <state_dir>/eval/suite.jsonl).",
        metavar="FILE",
    ),
    case_ids: list[str] = typer.Option(
        None, "--case", "-c", help="Only this case (repeat for more).", metavar="ID"
    ),
    only: str = typer.Option(
        None, "--only", help="misses: list only the cases the agent misses.", metavar="WHAT"
    ),
) -> None:
    """Explain, case by case, why the agent was or was not given each expected memory."""
    if only is not None and only not in ONLY_CHOICES:
        raise UsageError(f"--only takes {', '.join(ONLY_CHOICES)}, got {only!r}")
    settings = invocation_state().settings
    chosen = suite or settings.retrieval_eval.suite
    path = Path(chosen).expanduser().absolute() if chosen else default_suite_path(settings)
    loaded = load_suite(path)
    count = len(case_ids) if case_ids else len(loaded.cases)
    with ProgressReporter(invocation_state().show_progress).bar("explaining", total=count) as bar:
        explained = explain_suite(settings, loaded, case_ids or (), progress=bar.advance)
    only_misses = only == "misses"
    emit(
        explained.to_dict(only_misses=only_misses),
        lambda console: render_suite_explanation(console, explained, only_misses),
    )
    if explained.mismatches:
        invocation_state().err_console.print(
            f"mnemo-ops: {MISMATCH}: the reproduction differed from the plugin's prefetch for "
            f"{len(explained.mismatches)} case(s): "
            + ", ".join(case.case.id for case in explained.mismatches[:5]),
            markup=False,
        )
        raise typer.Exit(1)
    raise typer.Exit(0)


def register(group: typer.Typer) -> None:
    """Add ``explain`` to the ``eval`` command group."""
    group.command(
        "explain",
        help=(
            "Why did the agent not remember? For each case of the suite, on a snapshot copy: "
            "whether the Hermes plugin's per-turn prefetch injects the expected memory (its "
            "line), ranks it out (past the top 5, or a near-duplicate, with its rank), filters it "
            "(which rule), or never recalls it among its 16 (its rank in a top-50 recall, or not "
            "retrieved within 50); then the misses per category and reason. The plugin's decision "
            "is reproduced with its own functions and checked against its prefetch; without the "
            "plugin, the documented approximation is explained and the output says so.\n\n"
            + EXIT_CODES
            + "\n\nExample: mnemo-ops eval explain --only misses"
            + "\n\nExample: mnemo-ops --json eval explain --suite suite.jsonl --case proxy"
        ),
    )(explain_command)
