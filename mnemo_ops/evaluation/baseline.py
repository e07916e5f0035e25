"""Baseline files and the regression comparison (the deploy gate).

A baseline (JSON) pins: the suite's sha256, the engine (name, version, options), k, the metrics
overall and per category, and each case's hit rank. It is written only when asked
(``eval baseline`` or ``--ratchet``), by temp file + rename.

Comparison: a metric that dropped by more than its tolerance, or more cases that passed in the
baseline and fail now than ``max_case_regressions`` allows, is a regression (exit 1).

Where the agent is asked counts on its own: a baseline also pins each place's figures (recall,
evidence received, answer received: ``evaluate.Evaluation.places``) and, per case, whether its
evidence reached the agent where it is asked. A place whose figure dropped by more than the
metric's tolerance is a regression, even when the overall figures hold (a new conversation losing
what the same chat keeps); a case whose evidence was received in the baseline and is not now counts
as a case regression. A baseline written before places were pinned is compared overall only, with
a warning.
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
        **({"places": evaluation.places} if evaluation.places is not None else {}),
        "cases": {outcome.case.id: _case_data(outcome) for outcome in evaluation.outcomes},
    }


def _case_data(outcome) -> dict[str, Any]:
    """One case in a baseline: its hit rank, whether it passed, and where it was asked and whether
    its evidence reached the agent there (when the run judged it)."""
    data: dict[str, Any] = {"rank": outcome.score.hit_rank, "passed": outcome.score.passed}
    if outcome.received is not None:
        data["place"] = outcome.received.place
        data["evidence_received"] = outcome.received.evidence
    return data


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
        if now > before + EPSILON:
            better += 1
        elif now < before - EPSILON:
            worse += 1
        _judge(name, before, now, tolerance_for(name, tolerances, tolerance), changes, drops)

    place_drops, place_changes = _place_drops(evaluation, baseline, tolerances, tolerance)
    drops += place_drops
    changes.update(place_changes)
    if evaluation.places is not None and not isinstance(baseline.get("places"), dict):
        warnings.append(
            "the baseline pins no places (written by an older mnemo-ops): each place the agent is "
            "asked in is not compared; write a new baseline to gate on them"
        )

    regressions, improvements = [], []
    for outcome in evaluation.outcomes:
        before = baseline["cases"].get(outcome.case.id)
        if not isinstance(before, dict):
            continue
        lost_there = (
            before.get("evidence_received") is True
            and outcome.received is not None
            and outcome.received.place == before.get("place")
            and not outcome.received.evidence
        )
        if (before.get("passed") and not outcome.score.passed) or lost_there:
            regressions.append(
                {
                    "id": outcome.case.id,
                    "query": outcome.case.query,
                    "category": outcome.case.category,
                    "expected": outcome.case.expected_text(),
                    "baseline_rank": before.get("rank"),
                    **({"place": before.get("place")} if lost_there else {}),
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


def _place_drops(
    evaluation: Evaluation,
    baseline: dict[str, Any],
    tolerances: dict[str, Any],
    tolerance: float,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Each place's recall, evidence and answer received against the baseline's: the drops beyond
    the metric's tolerance, and every change (named ``<place> <metric>``)."""
    pinned = baseline.get("places")
    if not isinstance(pinned, dict) or evaluation.places is None:
        return [], {}
    drops, changes = [], {}
    for place, figures in pinned.items():
        now_figures = evaluation.places.get(place)
        if not isinstance(figures, dict) or now_figures is None:
            continue
        metrics = ["evidence_received", "answer_received"]
        if now_figures.get("cases") != len(evaluation.outcomes):
            # A place that holds every case has the suite's own recall, compared above.
            metrics.insert(0, f"recall@{evaluation.k}")
        for metric in metrics:
            before, now = figures.get(metric), now_figures.get(metric)
            if not isinstance(before, int | float) or not isinstance(now, int | float):
                continue  # a share no case of the place can have
            allowed = tolerance_for(metric, tolerances, tolerance)
            _judge(f"{place} {metric}", before, now, allowed, changes, drops)
    return drops, changes


def _judge(
    name: str,
    before: float,
    now: float,
    allowed: float,
    changes: dict[str, dict[str, float]],
    drops: list[dict[str, Any]],
) -> None:
    """Record metric `name`'s change, and its drop when it fell by more than `allowed`."""
    changes[name] = {"baseline": before, "now": now, "delta": round(now - before, 6)}
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
