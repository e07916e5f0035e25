"""Baseline files and the regression comparison (the deploy gate).

A baseline (JSON) pins: the suite's sha256, the engine (name, version, options), k, the metrics
overall and per category, and each case's hit rank. It is written only when asked
(``eval baseline`` or ``--ratchet``), by temp file + rename.

Comparison: a metric that dropped by more than its tolerance, or more cases that passed in the
baseline and fail now than ``max_case_regressions`` allows, is a regression (exit 1).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from mnemo_ops.evaluation.evaluate import Evaluation
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import MnemoOpsError, UsageError
from mnemo_ops.foundation.exit_codes import USAGE
from mnemo_ops.foundation.private_files import write_json_atomic

FORMAT = 1
DEFAULT_TOLERANCE = 0.02
EPSILON = 1e-9  # metrics are rounded to 6 decimals; never call a float artefact a regression


class SuiteChangedError(MnemoOpsError):
    """The suite's sha256 differs from the baseline's (exit 2 unless --allow-suite-change)."""

    exit_code = USAGE


def baseline_data(evaluation: Evaluation) -> dict[str, Any]:
    """The JSON form of a baseline for `evaluation`."""
    return {
        "format": FORMAT,
        "created_at": isoformat(utc_now()),
        "suite": str(evaluation.suite.path),
        "suite_sha256": evaluation.suite.sha256,
        "engine": evaluation.engine,
        "k": evaluation.k,
        "metrics": evaluation.metrics,
        "per_category": evaluation.per_category,
        "cases": {
            outcome.case.id: {"rank": outcome.score.hit_rank, "passed": outcome.score.passed}
            for outcome in evaluation.outcomes
        },
    }


def write_baseline(path: Path, evaluation: Evaluation) -> dict[str, Any]:
    """Write the baseline atomically (temp file + fsync + rename); return what was written."""
    data = baseline_data(evaluation)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)
    return data


def load_baseline(path: Path) -> dict[str, Any]:
    """Read and check a baseline file; UsageError (exit 2) naming the file and field otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{path}: baseline not found (write one with: mnemo-ops eval baseline --out {path})"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: cannot read baseline: {error}") from None
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{path}: baseline is not valid JSON ({error.msg} at line {error.lineno})"
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: baseline must be a JSON object")
    for field, kind in (("suite_sha256", str), ("k", int), ("metrics", dict), ("cases", dict)):
        if not isinstance(data.get(field), kind):
            raise UsageError(f"{path}: baseline field '{field}' is missing or of the wrong type")
    return data


def tolerance_for(metric: str, tolerances: dict[str, Any], default: float) -> float:
    """The tolerance of ``recall@10``: ``tolerances["recall@10"]``, else ``tolerances["recall"]``, else default."""
    base = metric.split("@", 1)[0]
    for key in (metric, base):
        if key in tolerances:
            return float(tolerances[key])
    return float(default)


@dataclasses.dataclass
class Comparison:
    """What changed against the baseline."""

    metric_drops: list[dict[str, Any]]
    metric_changes: dict[str, dict[str, float]]
    case_regressions: list[dict[str, Any]]
    case_improvements: list[str]
    regressed: bool
    improved_everywhere: bool
    engine_changed: bool
    warnings: list[str]


def compare(
    evaluation: Evaluation,
    baseline: dict[str, Any],
    baseline_path: Path,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    tolerances: dict[str, Any] | None = None,
    max_case_regressions: int = 0,
    allow_suite_change: bool = False,
) -> Comparison:
    """Compare an evaluation with a baseline; raise SuiteChangedError / UsageError when they do not match."""
    warnings: list[str] = []
    if baseline["suite_sha256"] != evaluation.suite.sha256:
        if not allow_suite_change:
            raise SuiteChangedError(
                f"suite {evaluation.suite.path} changed since baseline {baseline_path} "
                f"(sha256 {evaluation.suite.sha256[:12]} vs {baseline['suite_sha256'][:12]}); "
                "write a new baseline, or pass --allow-suite-change"
            )
        warnings.append(
            "the suite changed since the baseline (--allow-suite-change): only cases in both are compared"
        )
    if baseline["k"] != evaluation.k:
        raise UsageError(
            f"{baseline_path}: baseline was measured at k={baseline['k']}, this run uses k={evaluation.k}"
        )
    engine = baseline.get("engine") or {}
    engine_changed = engine.get("name") != evaluation.engine.get("name")
    if engine_changed:
        warnings.append(
            f"engine differs from the baseline: {engine.get('name')} then, {evaluation.engine.get('name')} now"
        )
    elif engine.get("version") != evaluation.engine.get("version"):
        warnings.append(
            f"engine version changed: {engine.get('version')} -> {evaluation.engine.get('version')}"
        )
    then = (engine.get("options") or {}).get("profile_used")
    now_used = (evaluation.engine.get("options") or {}).get("profile_used")
    if then and now_used and then != now_used:
        # The plugin's own prefetch and the approximation measure different things: a drop
        # between them is not a regression of the memory (install the plugin in both Pythons).
        warnings.append(
            f"the baseline measured what the agent receives with profile {then}, this run with "
            f"{now_used}: the figures are not comparable (mnemosyne-hermes installed in one "
            "Python and not the other)"
        )

    tolerances = tolerances or {}
    drops, changes = [], {}
    better = worse = 0
    for name, before in sorted(baseline["metrics"].items()):
        if name not in evaluation.metrics:
            continue
        now = evaluation.metrics[name]
        changes[name] = {"baseline": before, "now": now, "delta": round(now - before, 6)}
        allowed = tolerance_for(name, tolerances, tolerance)
        if now > before + EPSILON:
            better += 1
        elif now < before - EPSILON:
            worse += 1
        if before - now > allowed + EPSILON:
            drops.append(
                {
                    "metric": name,
                    "baseline": before,
                    "now": now,
                    "drop": round(before - now, 6),
                    "tolerance": allowed,
                }
            )

    regressions, improvements = [], []
    for outcome in evaluation.outcomes:
        before = baseline["cases"].get(outcome.case.id)
        if not isinstance(before, dict):
            continue
        if before.get("passed") and not outcome.score.passed:
            regressions.append(
                {
                    "id": outcome.case.id,
                    "query": outcome.case.query,
                    "category": outcome.case.category,
                    "expected": outcome.case.expected_text(),
                    "baseline_rank": before.get("rank"),
                    "got": [
                        {"id": item.id, "content": item.content[:160]}
                        for item in outcome.retrieved[:3]
                    ],
                }
            )
        elif not before.get("passed") and outcome.score.passed:
            improvements.append(outcome.case.id)
    regressed = bool(drops) or len(regressions) > max_case_regressions
    return Comparison(
        metric_drops=drops,
        metric_changes=changes,
        case_regressions=regressions,
        case_improvements=improvements,
        regressed=regressed,
        improved_everywhere=(not regressed and not regressions and worse == 0 and better > 0),
        engine_changed=engine_changed,
        warnings=warnings,
    )
