"""``eval compare``: two eval results or baselines side by side, metric by metric and case by case.

Either side is a baseline (``eval baseline --out FILE``) or the JSON of a run (``eval run --json >
FILE``, whose ``stats.case_results`` holds each case's rank). The usual pair is the baseline taken with the
installed Mnemosyne and a run under an upgrade candidate (``eval run --python PATH``).

A case's change, from A to B: ``same`` (found at the same rank, or missed by both), ``better`` /
``worse`` (found by both, at a higher / lower rank), ``lost`` (found by A only), ``found`` (found by
B only), ``only-a`` / ``only-b`` (the case is in one file only).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.errors import UsageError

CHANGES = ("lost", "worse", "found", "better", "only-a", "only-b", "same")
"""Every change, most alarming first (the order cases are listed in)."""


@dataclasses.dataclass(frozen=True)
class EvalRecord:
    """One side of a comparison, read from a baseline or a run's JSON."""

    path: Path
    kind: str  # "baseline" or "run"
    engine: dict[str, Any]
    suite: str | None
    suite_sha256: str | None
    k: int | None
    metrics: dict[str, float]
    cases: dict[str, dict[str, Any]]  # id -> {"rank", "passed", optional "category", "query"}

    def label(self) -> str:
        """``mnemosyne-memory 4.0.0b6`` (the engine's version), else the engine's name."""
        return str(self.engine.get("version") or self.engine.get("name") or "unknown engine")


def load_record(path: Path) -> EvalRecord:
    """Read a baseline or a run's JSON; UsageError (exit 2) naming the file when it is neither."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: cannot read: {error}") from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: neither an eval baseline nor the JSON of an eval run")
    if isinstance(data.get("stats"), dict) and "job" in data:
        stats = data["stats"]
        if not isinstance(stats.get("case_results"), dict) or not isinstance(
            stats.get("metrics"), dict
        ):
            raise UsageError(
                f"{path}: this eval run holds no per-case results "
                "(write it with: mnemo-ops --json eval run ... > FILE)"
            )
        return EvalRecord(
            path=Path(path),
            kind="run",
            engine=stats.get("engine") or {},
            suite=stats.get("suite"),
            suite_sha256=stats.get("suite_sha256"),
            k=stats.get("k"),
            metrics=stats["metrics"],
            cases=stats["case_results"],
        )
    if isinstance(data.get("cases"), dict) and isinstance(data.get("metrics"), dict):
        return EvalRecord(
            path=Path(path),
            kind="baseline",
            engine=data.get("engine") or {},
            suite=data.get("suite"),
            suite_sha256=data.get("suite_sha256"),
            k=data.get("k"),
            metrics=data["metrics"],
            cases=data["cases"],
        )
    raise UsageError(f"{path}: neither an eval baseline nor the JSON of an eval run")


def _change(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    if before is None:
        return "only-b"
    if after is None:
        return "only-a"
    found_before, found_after = bool(before.get("passed")), bool(after.get("passed"))
    if found_before and not found_after:
        return "lost"
    if found_after and not found_before:
        return "found"
    if not found_before:
        return "same"
    rank_before, rank_after = before.get("rank"), after.get("rank")
    if rank_before == rank_after:
        return "same"
    return "better" if (rank_after or 0) < (rank_before or 0) else "worse"


def compare_records(first: EvalRecord, second: EvalRecord) -> dict[str, Any]:
    """The comparison as a JSON-friendly dict: both sides, metrics, cases (most alarming first), summary."""
    warnings = []
    if first.suite_sha256 and second.suite_sha256 and first.suite_sha256 != second.suite_sha256:
        warnings.append("the two were measured on different suites (sha256 differs)")
    if first.k != second.k:
        warnings.append(f"the two were measured at different k ({first.k} and {second.k})")
    metric_names = list(first.metrics) + [
        name for name in second.metrics if name not in first.metrics
    ]
    metrics = []
    for name in metric_names:
        a, b = first.metrics.get(name), second.metrics.get(name)
        delta = round(b - a, 6) if a is not None and b is not None else None
        metrics.append({"metric": name, "a": a, "b": b, "delta": delta})
    case_ids = list(first.cases) + [case for case in second.cases if case not in first.cases]
    cases = []
    for case_id in case_ids:
        before, after = first.cases.get(case_id), second.cases.get(case_id)
        details = {**(before or {}), **(after or {})}
        cases.append(
            {
                "id": case_id,
                "category": details.get("category"),
                "query": details.get("query"),
                "a_rank": (before or {}).get("rank"),
                "b_rank": (after or {}).get("rank"),
                "change": _change(before, after),
            }
        )
    order = {change: position for position, change in enumerate(CHANGES)}
    cases.sort(key=lambda case: order[case["change"]])  # stable: suite order within a change
    summary = {change: sum(1 for case in cases if case["change"] == change) for change in CHANGES}
    return {
        "a": _side(first),
        "b": _side(second),
        "metrics": metrics,
        "cases": cases,
        "summary": summary,
        "warnings": warnings,
    }


def _side(record: EvalRecord) -> dict[str, Any]:
    return {
        "path": str(record.path),
        "kind": record.kind,
        "engine": record.engine,
        "suite": record.suite,
        "suite_sha256": record.suite_sha256,
        "k": record.k,
    }


def fill_queries(comparison: dict[str, Any]) -> None:
    """Give cases without a query (baselines keep none) the query from the suite file, when it exists."""
    missing = [case for case in comparison["cases"] if not case.get("query")]
    suite_path = comparison["a"].get("suite") or comparison["b"].get("suite")
    if not missing or not suite_path or not Path(suite_path).is_file():
        return
    from mnemo_ops.evaluation.suite import load_suite

    try:
        suite = load_suite(Path(suite_path))
    except UsageError:
        return  # the suite changed shape since: show ids only
    by_id = {case.id: case for case in suite.cases}
    for case in missing:
        known = by_id.get(case["id"])
        if known is not None:
            case["query"] = known.query
            case["category"] = case.get("category") or known.category
