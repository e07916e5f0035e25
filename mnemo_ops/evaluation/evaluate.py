"""Run a suite against an engine: recall every case, score it, aggregate overall, per category and
per place (where the case is asked, and what the agent receives there: ``evaluation.asked``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from mnemo_ops.evaluation import asked, metrics
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
    received: asked.CaseReceived | None = None
    """Where it was asked and what the agent received there (None: not judged)."""

    @property
    def holds_evidence(self) -> bool:
        """Its evidence came back: recalled within k, or received (a row derived from it)."""
        return bool(self.score.passed or (self.received is not None and self.received.evidence))


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
    received: dict[str, Any] | None = None
    """Over every case: evidence and answer received, lines and characters per turn with the memory
    blocks (``evaluation.asked.summarize``), and the blocks' own figures (``memory_blocks``)."""
    places: dict[str, dict[str, Any]] | None = None
    """The same figures per place the suite asks in (``evaluation.asked.per_place``)."""

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
    turns: list[dict[str, Any]] | None = None,
    evidence: asked.Evidence | None = None,
    standing: asked.Standing | None = None,
) -> Evaluation:
    """Score every case of `suite` from what recall returned for its query.

    With `evidence` (``asked.read_evidence`` of the database recalled from), each case is also
    judged for what the agent received in its place: the returned lines (the engine's `turns`
    give their lines and characters) plus the memory blocks (`standing`), summed per place.
    """
    outcomes = []
    for index, (case, query, retrieved) in enumerate(zip(suite.cases, queries, ranked_lists)):
        # With the database's lineage, a row that states a case's evidence in full counts as it.
        scored = (
            retrieved if evidence is None else asked.faithful_stand_ins(case, retrieved, evidence)
        )
        score = metrics.score_case(
            case.id, case.category, case.relevant, case.expect, scored, query.k
        )
        kept = metrics.deduplicate(retrieved)[: query.k]
        received = None
        if evidence is not None:
            turn = turns[index] if turns and index < len(turns) else None
            received = asked.received_for(case, kept, turn, standing or asked.Standing(), evidence)
        outcomes.append(CaseOutcome(case=case, score=score, retrieved=kept, received=received))
    scores = [outcome.score for outcome in outcomes]
    evaluation = Evaluation(
        suite=suite,
        engine=engine,
        k=run_k,
        outcomes=outcomes,
        metrics=metrics.aggregate(scores, run_k),
        per_category=metrics.per_category(scores, run_k),
    )
    if evidence is not None:
        judged = [outcome.received for outcome in outcomes if outcome.received is not None]
        recalls = [outcome.score.recall for outcome in outcomes]
        name = metrics.metric_key("recall", run_k)
        blocks = standing or asked.Standing()
        evaluation.received = {
            **asked.summarize(judged, recalls, name, blocks),
            "memory_blocks": blocks.to_stats(),
        }
        evaluation.places = asked.per_place(judged, recalls, name, blocks)
    return evaluation


def evaluate(
    suite: Suite,
    engine: Engine,
    k: int | None = None,
    progress=None,
    default_k: int = DEFAULT_K,
    standing: asked.Standing | None = None,
) -> Evaluation:
    """Recall every case of `suite` with `engine` and score it (k as in `suite_queries`), per place
    too, counting the memory blocks `standing` as received in every turn."""
    run_k, queries = suite_queries(suite, k, default_k)
    ranked_lists = engine.recall_many(queries, progress=progress)
    turns = getattr(engine, "last_turns", None)
    evidence = asked.read_evidence(engine.db_path, suite)
    evaluation = score_suite(
        suite, engine.describe(), run_k, queries, ranked_lists, turns, evidence, standing
    )
    if turns:
        evaluation.receives = summarize(turns).to_stats()
    return evaluation
