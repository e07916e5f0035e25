"""Run a suite against an engine: recall every case, score it, aggregate overall and per category."""

from __future__ import annotations

import dataclasses
from typing import Any

from mnemo_ops.evaluation import metrics
from mnemo_ops.evaluation.engines.base import Engine, Query
from mnemo_ops.evaluation.metrics import CaseScore, Retrieved
from mnemo_ops.evaluation.receives import summarize
from mnemo_ops.evaluation.suite import Case, Suite

DEFAULT_K = 10


@dataclasses.dataclass
class CaseOutcome:
    """One case, its score and what came back (for regression messages)."""

    case: Case
    score: CaseScore
    retrieved: list[Retrieved]


@dataclasses.dataclass
class Evaluation:
    """The result of running one suite once."""

    suite: Suite
    engine: dict[str, Any]
    k: int
    outcomes: list[CaseOutcome]
    metrics: dict[str, float]
    per_category: dict[str, dict[str, Any]]
    receives: dict[str, Any] | None = None
    """Per turn: lines and characters the agent was given, and the recall's cost (engines that
    report it: ``evaluation.receives``)."""

    @property
    def passed(self) -> int:
        """How many cases found something relevant."""
        return sum(1 for outcome in self.outcomes if outcome.score.passed)


def suite_queries(
    suite: Suite, k: int | None = None, default_k: int = DEFAULT_K
) -> tuple[int, list[Query]]:
    """The run's k and one query per case.

    The run's k is `k` (the command line), else the suite's own ``k``, else `default_k` (the
    config, 10 by default); a case's own ``k`` overrides it for that case (its metrics still count
    under the run's ``@k`` names).
    """
    run_k = k or suite.k or default_k
    return run_k, [
        Query(text=case.query, k=case.k or run_k, session=case.session) for case in suite.cases
    ]


def score_suite(
    suite: Suite,
    engine: dict[str, Any],
    run_k: int,
    queries: list[Query],
    ranked_lists: list[list[Retrieved]],
) -> Evaluation:
    """Score every case of `suite` from what recall returned for its query."""
    outcomes = []
    for case, query, retrieved in zip(suite.cases, queries, ranked_lists):
        score = metrics.score_case(
            case.id, case.category, case.relevant, case.expect, retrieved, query.k
        )
        outcomes.append(
            CaseOutcome(case=case, score=score, retrieved=metrics.deduplicate(retrieved)[: query.k])
        )
    scores = [outcome.score for outcome in outcomes]
    return Evaluation(
        suite=suite,
        engine=engine,
        k=run_k,
        outcomes=outcomes,
        metrics=metrics.aggregate(scores, run_k),
        per_category=metrics.per_category(scores, run_k),
    )


def evaluate(
    suite: Suite, engine: Engine, k: int | None = None, progress=None, default_k: int = DEFAULT_K
) -> Evaluation:
    """Recall every case of `suite` with `engine` and score it (k as in `suite_queries`)."""
    run_k, queries = suite_queries(suite, k, default_k)
    ranked_lists = engine.recall_many(queries, progress=progress)
    evaluation = score_suite(suite, engine.describe(), run_k, queries, ranked_lists)
    turns = getattr(engine, "last_turns", None)
    if turns:
        evaluation.receives = summarize(turns).to_stats()
    return evaluation
