"""retrieval-eval: run the eval suite, compare with the baseline, exit 1 on regression.

Options: the ``retrieval_eval`` section of the settings schema (suite, baseline, engine, k,
tolerances), overridden for one run by ``eval run``/``eval baseline`` or ``run retrieval-eval -o
KEY=VALUE``; the per-run ones are ``allow_suite_change``, ``ratchet`` and ``write_baseline`` (a path:
write a new baseline there instead of comparing).

The suite and the baseline have one place, shared by hand runs and scheduled runs
(`mnemo_ops.evaluation.places`): ``retrieval_eval.suite`` / ``.baseline`` from the config, else
``<state_dir>/eval/suite.jsonl`` and ``<state_dir>/eval/baseline.json``.

- A path given for this run (``--suite``, ``--baseline``, ``--python``) is checked by `check_usage`
  before the run starts: missing or malformed exits 2, and no run is recorded (a typo is not a
  failed job).
- No suite at the configured or default place fails the run (exit 1, recorded, one line naming the
  path and ``mnemo-ops eval init``): a gate without a suite gates nothing. ``allow_no_suite`` turns
  that into a warning and exit 0, explicitly.
- Without a baseline at that place the run records the metrics and warns.

Each case is also judged where it is asked (its place: the same chat, a new conversation, another
session; ``evaluation.asked``), counting the home's memory blocks (MEMORY.md and USER.md, in every
prompt) as received: ``stats.received`` over every case, ``stats.places`` per place, and each case's
``received`` in ``case_results``.

Every run that is not a dry run appends a row to state.db ``eval_history``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.evaluation import baseline as baselines
from mnemo_ops.evaluation import history, places
from mnemo_ops.evaluation.asked import Standing
from mnemo_ops.evaluation.engines import make_engine
from mnemo_ops.evaluation.evaluate import Evaluation, evaluate
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.memory_blocks.in_prompt import prompt_entries


def default_suite_path(settings) -> Path:
    """``<state_dir>/eval/suite.jsonl``."""
    return places.default_suite_path(settings)


def check_usage(ctx: JobContext) -> None:
    """Check what this run was given before it starts (the runner's usage hook): a suite or a
    baseline named for this run must exist and parse, and a ``--python`` must be an executable file.

    UsageError (exit 2, one line naming the file) otherwise; the runner records no run for it.
    What comes from the config file or the default place is the home's state, checked by `run`.
    """
    given = ctx.run_options
    if given.suite:
        load_suite(Path(str(given.suite)).expanduser().absolute())
    if given.baseline and not ctx.options.write_baseline:
        baselines.load_baseline(Path(str(given.baseline)).expanduser().absolute())
    if given.python:
        python = Path(str(given.python)).expanduser().absolute()
        if not python.is_file() or not os.access(python, os.X_OK):
            raise UsageError(f"{python}: --python is not an executable file")


def _no_suite(ctx: JobContext, suite_path: Path) -> JobResult:
    """No suite at the configured or default place: a failed run, or a warning when allowed."""
    ctx.result.stats["suite"] = str(suite_path)
    fix = f"mnemo-ops eval init  # a starter suite from your own memories, written to {suite_path}"
    if ctx.options.allow_no_suite:
        ctx.warn(
            "no-eval-suite",
            f"no eval suite at {suite_path}; nothing evaluated (allow_no_suite: the gate is open)",
            "warning",
            fix=fix,
        )
        return ctx.result
    ctx.result.fail(
        f"no eval suite at {suite_path}: the gate has nothing to measure "
        "(build one: mnemo-ops eval init; or allow it: --allow-no-suite)"
    )
    return ctx.result


def _stats(evaluation: Evaluation) -> dict[str, Any]:
    return {
        "suite": str(evaluation.suite.path),
        "suite_sha256": evaluation.suite.sha256,
        "engine": evaluation.engine,
        "k": evaluation.k,
        "cases": len(evaluation.outcomes),
        "passed": evaluation.passed,
        "metrics": evaluation.metrics,
        "per_category": evaluation.per_category,
        **({"receives": evaluation.receives} if evaluation.receives else {}),
        **({"received": evaluation.received} if evaluation.received else {}),
        **({"places": evaluation.places} if evaluation.places is not None else {}),
        # Why the misses were missed: mnemo-ops eval explain (several recalls a case: not nightly).
        "misses_per_category": history.misses_by_category(evaluation),
        "regressions": [],
        "metric_drops": [],
        # Each case's outcome, in the form of a baseline's cases, so ``eval compare`` can set a run
        # (``eval run --json > run.json``) beside a baseline or another run, case by case.
        "case_results": {
            outcome.case.id: {
                "rank": outcome.score.hit_rank,
                "passed": outcome.score.passed,
                "category": outcome.case.category,
                "query": outcome.case.query,
                **({"received": outcome.received.to_stats()} if outcome.received else {}),
            }
            for outcome in evaluation.outcomes
        },
    }


def _record_history(ctx: JobContext, evaluation: Evaluation, regressions: int, status: str) -> None:
    if ctx.dry_run:  # a dry run leaves the state dir untouched
        return
    state_db = ctx.open_state()
    try:
        history.record(
            state_db,
            run_at=isoformat(ctx.result.started_at),
            suite=str(evaluation.suite.path),
            suite_sha256=evaluation.suite.sha256,
            engine=evaluation.engine["name"],
            k=evaluation.k,
            metrics=evaluation.metrics,
            regressions=regressions,
            status=status,
            misses=history.misses_by_category(evaluation),
        )
    finally:
        state_db.close()


def _write_baseline(ctx: JobContext, path: Path, evaluation: Evaluation, reason: str) -> None:
    ctx.count("baselines_written", 1)
    ctx.result.stats["baseline_written"] = str(path)
    if ctx.dry_run:
        ctx.warn(
            "baseline-not-written", f"dry run: would write the {reason} baseline {path}", "info"
        )
        return
    baselines.write_baseline(path, evaluation)


def _report_regressions(
    ctx: JobContext, comparison: baselines.Comparison, baseline_path: Path
) -> None:
    for drop in comparison.metric_drops:
        ctx.warn(
            "metric-regressed",
            f"{drop['metric']} fell from {drop['baseline']:.3f} to {drop['now']:.3f} "
            f"(drop {drop['drop']:.3f} > tolerance {drop['tolerance']:.3f})",
            "error",
        )
    for case in comparison.case_regressions:
        got = (
            "; ".join(f"{item['id']}: {item['content'][:80]}" for item in case["got"]) or "nothing"
        )
        before = (
            f"reached the agent in {case['place']} in the baseline and does not now"
            if case.get("place")
            else f"passed in the baseline (rank {case['baseline_rank']}) and fails now"
        )
        ctx.warn(
            "case-regressed",
            f"case {case['id']} {before}: query {case['query']!r}, expected {case['expected']}, "
            f"got {got}",
            "error",
        )
    drops = ", ".join(drop["metric"] for drop in comparison.metric_drops)
    parts = ([f"metrics below tolerance: {drops}"] if drops else []) + (
        [f"{len(comparison.case_regressions)} case(s) found or received before and not now"]
        if comparison.case_regressions
        else []
    )
    ctx.result.fail(f"recall regressed against {baseline_path}: {'; '.join(parts)}")


def run(ctx: JobContext) -> JobResult:
    """Evaluate the suite; write a baseline when asked, else compare with the baseline and record history."""
    settings = ctx.settings
    suite_path = places.suite_path(settings)
    if not suite_path.exists():  # a path given for this run was checked by check_usage
        return _no_suite(ctx, suite_path)
    suite = load_suite(suite_path)
    held_out = places.held_out(suite_path)
    engine = make_engine(ctx.options.engine, settings)
    with ctx.progress.bar(f"recall ({engine.name})", total=len(suite.cases)) as bar:
        evaluation = evaluate(
            suite,
            engine,
            ctx.run_options.k,
            progress=bar.advance,
            default_k=ctx.options.k,
            standing=Standing(*prompt_entries(settings)),
        )
    ctx.result.stats.update(_stats(evaluation))
    if held_out:  # _stats replaces the stats' keys it names, not this one
        ctx.result.stats["held_out"] = held_out

    if ctx.options.write_baseline:
        _write_baseline(
            ctx,
            Path(str(ctx.options.write_baseline)).expanduser().absolute(),
            evaluation,
            "requested",
        )
        _record_history(ctx, evaluation, 0, "ok")
        return ctx.result

    baseline_path = places.baseline_path(settings)
    explicit_baseline = bool(ctx.options.baseline)
    ctx.result.stats["baseline"] = str(baseline_path)
    if not explicit_baseline and not baseline_path.exists():
        ctx.warn(
            "no-baseline",
            f"no baseline at {baseline_path}: metrics recorded, nothing compared",
            "warning",
            fix=f"mnemo-ops eval baseline --suite {suite_path} --out {baseline_path}",
        )
        _record_history(ctx, evaluation, 0, "no-baseline")
        return ctx.result

    comparison = baselines.compare(
        evaluation,
        baselines.load_baseline(baseline_path),
        baseline_path,
        tolerance=ctx.options.tolerance,
        tolerances=ctx.options.tolerances,
        max_case_regressions=ctx.options.max_case_regressions,
        allow_suite_change=ctx.options.allow_suite_change,
    )
    ctx.result.stats.update(
        {
            "regressions": comparison.case_regressions,
            "metric_drops": comparison.metric_drops,
            "changes_vs_baseline": comparison.metric_changes,
            "improved_cases": comparison.case_improvements,
        }
    )
    for message in comparison.warnings:
        ctx.warn("baseline-mismatch", message, "info")
    regression_count = len(comparison.case_regressions) + len(comparison.metric_drops)
    _record_history(
        ctx, evaluation, regression_count, "regressed" if comparison.regressed else "ok"
    )
    if comparison.regressed:
        _report_regressions(ctx, comparison, baseline_path)
        return ctx.result
    if ctx.options.ratchet:
        if comparison.improved_everywhere:
            _write_baseline(ctx, baseline_path, evaluation, "ratcheted")
        else:
            ctx.warn(
                "ratchet-held",
                "baseline kept: not every metric improved (none may fall, one must rise)",
                "info",
            )
    return ctx.result
