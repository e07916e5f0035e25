"""``mnemo-ops eval init|run|baseline|compare|explain|import``: the retrieval eval and the deploy gate.

``eval init`` (``cli/eval_init``) builds a starter suite from the user's own memory and its first
baseline; ``eval run`` and ``eval baseline`` go through the runner as the ``retrieval-eval`` job (so they get
the result contract, the ledger row and monitoring; a file named by a flag that is not there exits
2 before the run starts and leaves no ledger row); ``eval import`` builds a Mnemosyne database
and a suite from a LoCoMo or LongMemEval file; ``eval compare`` sets two results side by side
(the current Mnemosyne's baseline and an upgrade candidate's run); ``eval explain``
(``cli/eval_explain``) says why each case's memory was or was not given to the agent.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from mnemo_ops.cli import eval_explain, eval_init
from mnemo_ops.cli.common import command_group, emit, handle_errors, invocation_state
from mnemo_ops.cli.render import render_result
from mnemo_ops.core.results import JobResult
from mnemo_ops.jobs import run_job

EXIT_CODES = (
    "Exit codes: 0 no regression, 1 recall regressed below the baseline, the eval failed, or there "
    "is no suite at its place (mnemo-ops eval init builds one; --allow-no-suite lets it pass), "
    "2 usage/config problem: a --suite/--baseline/--python that is not there or not usable (no run "
    "is recorded for it), or a suite that no longer matches the baseline's sha256."
)


def render_evaluation(console: Console, result: JobResult) -> None:
    """Metrics overall and per category, then the generic result (warnings name regressed cases)."""
    stats = result.stats
    if stats.get("metrics"):
        console.print(
            f"suite {stats['suite']}  ({stats['cases']} cases, {stats['passed']} found)  "
            f"engine {stats['engine']['name']} ({stats['engine']['version']})  k={stats['k']}"
        )
        changes = stats.get("changes_vs_baseline") or {}
        table = Table(box=None, padding=(0, 2))
        table.add_column("metric")
        table.add_column("now", justify="right")
        if changes:
            table.add_column("baseline", justify="right")
            table.add_column("change", justify="right")
        for name, value in stats["metrics"].items():
            row = [name, f"{value:.3f}"]
            if changes:
                change = changes.get(name)
                row += (
                    [f"{change['baseline']:.3f}", f"{change['delta']:+.3f}"] if change else ["", ""]
                )
            table.add_row(*row)
        console.print(table)
        if len(stats.get("per_category") or {}) > 1:
            categories = Table(box=None, padding=(0, 2), title="per category", title_justify="left")
            names = list(stats["metrics"])
            for column in ["category", "cases", *names]:
                categories.add_column(column, justify="left" if column == "category" else "right")
            for category, values in stats["per_category"].items():
                categories.add_row(
                    category, str(values["cases"]), *(f"{values[name]:.3f}" for name in names)
                )
            console.print(categories)
        render_places(console, stats)
    render_result(console, result, verbose=invocation_state().verbosity > 0)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_places(console: Console, stats: dict) -> None:
    """What the agent received, per place the suite asks in (the memory blocks counted)."""
    places = stats.get("places") or {}
    if not places:
        return
    table = Table(box=None, padding=(0, 2), title="per place", title_justify="left")
    recall = next((name for name in stats["metrics"] if name.startswith("recall@")), "")
    columns = ["place", "cases", recall, "evidence", "answer", "lines/turn", "chars/turn"]
    for column in columns:
        table.add_column(column, justify="left" if column == "place" else "right")
    for place, values in places.items():
        table.add_row(
            place,
            str(values["cases"]),
            _share(values.get(recall)),
            _share(values.get("evidence_received")),
            _share(values.get("answer_received")),
            f"{values['lines_per_turn']:.2f}",
            f"{values['chars_per_turn']:.0f}",
        )
    console.print(table)
    blocks = (stats.get("received") or {}).get("memory_blocks") or {}
    if blocks.get("entries"):
        console.print(
            f"memory blocks in every turn: {blocks['entries']} entries, {blocks['chars']} characters"
        )


def render_comparison(console: Console, comparison: dict, show_all: bool = False) -> None:
    """Both sides' engines, the metrics side by side, then the cases (changed ones unless `show_all`)."""
    sides = comparison["a"], comparison["b"]
    for name, side in zip(("A", "B"), sides):
        engine = side["engine"] or {}
        console.print(
            f"{name}: {side['path']}  ({side['kind']}, engine {engine.get('name', '?')} "
            f"{engine.get('version', '')}, k={side['k']})",
            markup=False,
            highlight=False,
        )
    for warning in comparison["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}")
    metrics = Table(box=None, padding=(0, 2))
    for column in ("metric", "A", "B", "change"):
        metrics.add_column(column, justify="left" if column == "metric" else "right")
    for row in comparison["metrics"]:
        metrics.add_row(
            row["metric"],
            "" if row["a"] is None else f"{row['a']:.3f}",
            "" if row["b"] is None else f"{row['b']:.3f}",
            "" if row["delta"] is None else f"{row['delta']:+.3f}",
        )
    console.print(metrics)
    shown = [case for case in comparison["cases"] if show_all or case["change"] != "same"]
    if shown:
        cases = Table(box=None, padding=(0, 2))
        for column in ("case", "A rank", "B rank", "change", "query"):
            cases.add_column(column, justify="right" if "rank" in column else "left")
        styles = {"lost": "bold red", "worse": "yellow", "found": "green", "better": "green"}
        for case in shown:
            style = styles.get(case["change"])
            change = f"[{style}]{case['change']}[/]" if style else case["change"]
            cases.add_row(
                case["id"],
                "-" if case["a_rank"] is None else str(case["a_rank"]),
                "-" if case["b_rank"] is None else str(case["b_rank"]),
                change,
                (case.get("query") or "")[:60],
            )
        console.print(cases)
    summary = comparison["summary"]
    console.print(
        f"{len(comparison['cases'])} cases: "
        + ", ".join(f"{count} {change}" for change, count in summary.items() if count)
    )


def _absolute(path: str | None) -> str | None:
    """A path given on the command line, made absolute (None stays None).

    Not resolved: a venv's ``bin/python`` is a symlink to the base interpreter, and only the
    symlink's own path finds the venv's packages."""
    return str(Path(path).expanduser().absolute()) if path else None


def _finish(result: JobResult) -> None:
    emit(result.to_dict(), lambda console: render_evaluation(console, result))
    if result.error and result.status == "failed":
        # One unwrapped line on stderr, so CI logs show why the gate closed whatever the terminal width.
        invocation_state().err_console.print(
            f"mnemo-ops: eval failed: {result.error}", markup=False, soft_wrap=True
        )
    raise typer.Exit(result.exit_code)


# The options several commands share, and the help of each benchmark's import.
SUITE_OPTION = typer.Option(
    None,
    "--suite",
    "-s",
    help="Suite file (JSONL or YAML; default: config, then <state_dir>/eval/suite.jsonl).",
    metavar="FILE",
)
ENGINE_OPTION = typer.Option(
    None,
    "--engine",
    "-e",
    help="mnemosyne (Mnemosyne's recall, default) or builtin (FTS5 bm25).",
    metavar="ENGINE",
)
K_OPTION = typer.Option(None, "--k", "-k", help="Cutoff k (default: config, else 10).", min=1)
PYTHON_OPTION = typer.Option(
    None,
    "--python",
    help="Run Mnemosyne's recall under this Python (a venv where an upgrade candidate of "
    "mnemosyne-memory is installed; default: config retrieval_eval.python, else mnemo-ops' own).",
    metavar="PATH",
)
DB_OPTION = typer.Option(
    ..., "--db", help="The Mnemosyne database to create (must not exist).", metavar="OUT.db"
)
OUT_SUITE_OPTION = typer.Option(
    ..., "--suite", help="The suite to write (JSONL).", metavar="OUT.jsonl"
)
LIMIT_OPTION = typer.Option(
    None, "--limit", help="Import only the first N conversations / questions.", min=1
)
IMPORT_HELP = {
    "locomo": (
        "Import LoCoMo: each dialogue turn is stored through Mnemosyne (one session per LoCoMo session); each "
        "question becomes a case whose relevant ids are the turns named by its evidence. Adversarial questions "
        "(category 5) have no evidence and are skipped.\n\n"
        "Example: mnemo-ops eval import locomo locomo10.json --db locomo.db --suite locomo.jsonl"
    ),
    "longmemeval": (
        "Import LongMemEval: each haystack session is stored once through Mnemosyne; each question becomes a case "
        "whose relevant ids are the has_answer turns of its answer sessions.\n\n"
        "Example: mnemo-ops eval import longmemeval longmemeval_s.json --db lme.db --suite lme.jsonl"
    ),
}


@handle_errors
def run_command(
    suite: str = SUITE_OPTION,
    baseline: str = typer.Option(
        None,
        "--baseline",
        "-b",
        help="Baseline file (default: config, then <state_dir>/eval/baseline.json).",
        metavar="FILE",
    ),
    engine: str = ENGINE_OPTION,
    k: int = K_OPTION,
    allow_suite_change: bool = typer.Option(
        False,
        "--allow-suite-change",
        help="Compare even though the suite changed since the baseline.",
    ),
    ratchet: bool = typer.Option(
        False, "--ratchet", help="Raise the baseline when no metric fell and one rose."
    ),
    allow_no_suite: bool = typer.Option(
        False,
        "--allow-no-suite",
        help="No suite at its place yet is a warning and exit 0, not a failure (exit 1).",
    ),
    python: str = PYTHON_OPTION,
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Record nothing, write no baseline."
    ),
) -> None:
    """Run the suite and compare it with the baseline; exit 1 on a regression or with no suite."""
    options = {
        "suite": _absolute(suite),
        "baseline": _absolute(baseline),
        "engine": engine,
        "k": k,
        "allow_suite_change": allow_suite_change,
        "ratchet": ratchet,
        "allow_no_suite": allow_no_suite,
        "python": _absolute(python),
    }
    result = run_job(
        invocation_state().settings,
        "retrieval-eval",
        dry_run=dry_run,
        options={key: value for key, value in options.items() if value not in (None, False)},
        show_progress=invocation_state().show_progress,
    )
    _finish(result)


@handle_errors
def baseline_command(
    out: str = typer.Option(
        None,
        "--out",
        help="Where to write the baseline (JSON; default: config, then "
        "<state_dir>/eval/baseline.json, where eval run and the scheduled job read it).",
        metavar="FILE",
    ),
    suite: str = SUITE_OPTION,
    engine: str = ENGINE_OPTION,
    k: int = K_OPTION,
    python: str = PYTHON_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Evaluate, but write nothing."),
) -> None:
    """Run the suite and write its metrics and hit ranks as the new baseline."""
    from mnemo_ops.evaluation import places

    target = _absolute(out) or str(places.baseline_path(invocation_state().settings))
    options = {
        "suite": _absolute(suite),
        "engine": engine,
        "k": k,
        "write_baseline": target,
        "python": _absolute(python),
    }
    result = run_job(
        invocation_state().settings,
        "retrieval-eval",
        dry_run=dry_run,
        options={key: value for key, value in options.items() if value is not None},
        show_progress=invocation_state().show_progress,
    )
    _finish(result)


@handle_errors
def compare_command(
    first: str = typer.Argument(
        ..., metavar="A", help="Baseline or saved run (the current Mnemosyne)."
    ),
    second: str = typer.Argument(..., metavar="B", help="Baseline or saved run (the candidate)."),
    show_all: bool = typer.Option(False, "--all", help="List unchanged cases too."),
) -> None:
    """Show two eval results side by side."""
    from mnemo_ops.evaluation.comparison import compare_records, fill_queries, load_record

    comparison = compare_records(load_record(Path(first)), load_record(Path(second)))
    fill_queries(comparison)
    emit(comparison, lambda console: render_comparison(console, comparison, show_all))
    raise typer.Exit(0)


def _import(kind: str, file: str, db: str, suite: str, limit: int | None) -> None:
    from mnemo_ops.evaluation.importers import import_benchmark

    summary = import_benchmark(
        kind,
        Path(file),
        Path(db),
        Path(suite),
        limit=limit,
        show_progress=invocation_state().show_progress,
    )

    def text(console: Console) -> None:
        console.print(
            f"[green]imported[/] {kind}: {summary['turns_stored']} turns into {summary['db']}, "
            f"{summary['cases']} cases into {summary['suite']}"
        )
        for reason, count in summary["skipped"].items():
            if count:
                console.print(f"  skipped {count} question(s): {reason}")
        if summary["turns_filtered"]:
            console.print(
                f"  {summary['turns_filtered']} turn(s) were filtered out by Mnemosyne's write filter"
            )
        console.print(f"  next: mnemo-ops --db {summary['db']} eval run --suite {summary['suite']}")

    emit(summary, text)


@handle_errors
def import_command(
    ctx: typer.Context,
    file: str = typer.Argument(..., metavar="FILE"),
    db: str = DB_OPTION,
    suite: str = OUT_SUITE_OPTION,
    limit: int = LIMIT_OPTION,
) -> None:
    """Import the benchmark this command is named after (``eval import <benchmark>``) from FILE
    into a new database and suite; every importer takes the same arguments."""
    _import(ctx.command.name, file, db, suite, limit)


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command group."""
    group = command_group(
        app,
        "eval",
        "Retrieval eval: build a starter suite, run a suite against recall, write baselines, compare "
        "results, import benchmarks. The suite and the baseline live at one place, "
        "<state_dir>/eval/suite.jsonl and baseline.json unless the config names others.\n\n"
        "Example: mnemo-ops eval init && mnemo-ops eval run",
    )
    eval_init.register(group)
    eval_explain.register(group)
    imports = command_group(
        group,
        "import",
        "Build a Mnemosyne database and a suite from a long-term-memory benchmark.\n\n"
        "Example: mnemo-ops eval import locomo locomo10.json --db locomo.db --suite locomo.jsonl",
    )

    group.command(
        "run",
        help=(
            "Run the suite and compare with the baseline: a metric that drops by more than its tolerance, or a case "
            "that passed and now fails, is a regression (exit 1).\n\n"
            + EXIT_CODES
            + "\n\nExample: mnemo-ops eval run || echo 'do not deploy'"
            + "\n\nUpgrade gate: mnemo-ops eval run --dry-run --python ~/mnemosyne-next/bin/python "
            "--suite suite.jsonl --baseline baseline.json"
        ),
    )(run_command)

    group.command(
        "baseline",
        help=(
            "Run the suite and write its metrics and each case's hit rank as the new baseline (only this command, or "
            "eval run --ratchet, writes one); by default where eval run and the scheduled job read "
            "it.\n\nExample: mnemo-ops eval baseline"
        ),
    )(baseline_command)

    group.command(
        "compare",
        help=(
            "Show two eval results side by side: metrics, then each case's rank in A and in B (cases that "
            "changed, most alarming first; --all for every case). A and B are baselines (eval baseline --out) "
            "or runs saved with --json (mnemo-ops --json eval run ... > run.json). Reads only; exit 0, or 2 "
            "for a file that is neither.\n\n"
            "Example: mnemo-ops eval compare baseline.json candidate.json"
        ),
    )(compare_command)

    for benchmark, help_text in IMPORT_HELP.items():
        imports.command(benchmark, help=help_text)(import_command)
