"""retrieval-eval: run the eval suite, compare with the baseline, exit 1 on regression.

Options: the ``retrieval_eval`` section of the settings schema (suite, baseline, engine, k,
tolerances), overridden for one run by ``eval run``/``eval baseline`` or ``run retrieval-eval -o
KEY=VALUE``; the per-run ones are ``allow_suite_change``, ``ratchet`` and ``write_baseline`` (a path:
write a new baseline there instead of comparing).

Without a suite at the default path the job warns and does nothing (a fresh install has none yet);
without a baseline at the default path it records the metrics and warns. Paths given explicitly must
exist (exit 2). Every run that is not a dry run appends a row to state.db ``eval_history``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.evaluation import baseline as baselines
from mnemo_ops.evaluation import history
from mnemo_ops.evaluation.engines import make_engine
from mnemo_ops.evaluation.evaluate import Evaluation, evaluate
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.foundation.clock import isoformat


def default_suite_path(settings) -> Path:
    """``<state_dir>/eval/suite.jsonl``."""
    return settings.state_dir / "eval" / "suite.jsonl"


def default_baseline_path(settings) -> Path:
    """``<state_dir>/eval/baseline.json``."""
    return settings.state_dir / "eval" / "baseline.json"


def _path(chosen: str | None, default: Path) -> tuple[Path, bool]:
    """The path of an option (``--option`` over the config), else `default`; and whether it was chosen."""
    if chosen:
        return Path(str(chosen)).expanduser().absolute(), True
    return default, False


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
        ctx.warn(
            "case-regressed",
            f"case {case['id']} passed in the baseline (rank {case['baseline_rank']}) and "
            f"fails now: query {case['query']!r}, expected {case['expected']}, got {got}",
            "error",
        )
    drops = ", ".join(drop["metric"] for drop in comparison.metric_drops)
    parts = ([f"metrics below tolerance: {drops}"] if drops else []) + (
        [f"{len(comparison.case_regressions)} case(s) passed before and fail now"]
        if comparison.case_regressions
        else []
    )
    ctx.result.fail(f"recall regressed against {baseline_path}: {'; '.join(parts)}")


def run(ctx: JobContext) -> JobResult:
    """Evaluate the suite; write a baseline when asked, else compare with the baseline and record history."""
    settings = ctx.settings
    suite_path, explicit_suite = _path(ctx.options.suite, default_suite_path(settings))
    if not explicit_suite and not suite_path.exists():
        ctx.warn(
            "no-eval-suite",
            f"no eval suite at {suite_path}; nothing to evaluate",
            "warning",
            fix=f"mnemo-ops eval import locomo FILE --db OUT.db --suite {suite_path}, or write a suite there",
        )
        return ctx.result
    suite = load_suite(suite_path)
    engine = make_engine(ctx.options.engine, settings)
    with ctx.progress.bar(f"recall ({engine.name})", total=len(suite.cases)) as bar:
        evaluation = evaluate(
            suite,
            engine,
            ctx.run_options.k,
            progress=bar.advance,
            default_k=ctx.options.k,
        )
    ctx.result.stats.update(_stats(evaluation))

    if ctx.options.write_baseline:
        _write_baseline(
            ctx,
            Path(str(ctx.options.write_baseline)).expanduser().absolute(),
            evaluation,
            "requested",
        )
        _record_history(ctx, evaluation, 0, "ok")
        return ctx.result

    baseline_path, explicit_baseline = _path(ctx.options.baseline, default_baseline_path(settings))
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
