"""Recall on one copy of the database: the probes, and the user's eval suite when one is configured.

Measured through the eval's Mnemosyne engine (``evaluation.engines.mnemosyne``: a child process on a
snapshot of the copy), with the eval's recall settings, so what is measured is what the agent gets:
with a Hermes home, the plugin's per-turn prefetch (5 items); otherwise Mnemosyne's top k. One
worker run answers the probes and the suite together; each suite case is also judged in its place
(``evaluation.asked``), the memory blocks of the copy's folder counted as received.

Mnemosyne's own recall over every session is measured beside it (`every_session`): plain recall,
top k, no session, for every suite case and the probes of the measurement, in a second worker run on
the same copy; a case counts as found when its evidence or a current row derived from it is in the
top k (``evidence_received``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mnemo_ops.evaluation import asked
from mnemo_ops.evaluation.engines.base import Query
from mnemo_ops.evaluation.engines.mnemosyne import (
    AGENT_PROFILES,
    MnemosyneEngine,
    VectorsUnavailable,
)
from mnemo_ops.evaluation.evaluate import Evaluation, score_suite, suite_queries
from mnemo_ops.evaluation.metrics import Retrieved
from mnemo_ops.evaluation.receives import Receives, summarize
from mnemo_ops.evaluation.suite import Suite
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.guard.probes import Probe
from mnemo_ops.memory_blocks.in_prompt import prompt_entries
from mnemo_ops.settings import Settings

EVERY_SESSION_PROFILE = "plain"
"""Mnemosyne's own recall, as the user configured it: what the database can give, in any session."""


@dataclasses.dataclass
class Measurement:
    """Recall of every probe (its hit rank, None when missed) and of the suite, on one copy."""

    profile: str
    cutoff: int
    ranks: dict[str, int | None]
    suite: Evaluation | None = None
    receives: Receives | None = None
    """What the agent was given per turn for the probes, and what recalling it cost."""
    dense: dict[str, Any] | None = None
    """The recall's vector voice (``MnemosyneEngine.last_dense``)."""
    error: str | None = None
    """Set when Mnemosyne could not recall at all (every probe counts as missed)."""
    turns: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The engine's per-turn figures of the probes (what `receives` summarizes)."""
    every_session: EverySession | None = None
    """Mnemosyne's own recall over every session (None: not measured)."""
    returned: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """Per probe: the ids of what came back within the cutoff (the lines the agent was given)."""

    @property
    def recall(self) -> float:
        """Share of probes answered within the cutoff (1.0 with no probes)."""
        if not self.ranks:
            return 1.0
        return sum(1 for rank in self.ranks.values() if rank is not None) / len(self.ranks)

    @property
    def mrr(self) -> float:
        """Mean reciprocal rank of the probes' first answer (0 for a miss)."""
        if not self.ranks:
            return 1.0
        return sum(1 / rank for rank in self.ranks.values() if rank) / len(self.ranks)

    def metrics(self) -> dict[str, float]:
        """``recall@<cutoff>`` and ``mrr@<cutoff>`` of the probes, rounded for reports."""
        return {
            f"recall@{self.cutoff}": round(self.recall, 4),
            f"mrr@{self.cutoff}": round(self.mrr, 4),
        }

    def vector_stats(self) -> dict[str, Any] | None:
        """The recall's vector voice in short: model, sqlite-vec, queries embedded, the home's."""
        if self.dense is None:
            return None
        keys = ("model", "sqlite_vec", "queries", "embedded", "home_keeps_vectors", "switched_off")
        return {key: self.dense.get(key) for key in keys}

    def to_stats(self) -> dict[str, Any]:
        """The figures for the result's stats and the guard history."""
        data: dict[str, Any] = {"probes": len(self.ranks), **self.metrics()}
        if self.every_session is not None:
            data["every_session"] = self.every_session.to_stats()
        if self.error:
            data["error"] = self.error
        if self.receives is not None:
            data["receives"] = self.receives.to_stats()
        if self.dense is not None:
            data["vectors"] = self.vector_stats()
        if self.suite is not None:
            data["suite"] = {
                "path": str(self.suite.suite.path),
                "cases": len(self.suite.outcomes),
                "metrics": self.suite.metrics,
                **({"places": self.suite.places} if self.suite.places is not None else {}),
            }
        return data


@dataclasses.dataclass
class EverySession:
    """Mnemosyne's own recall over every session on one copy: plain recall, top `cutoff`, no
    session, for the measurement's probes (their ranks) and the suite's cases (scored with lineage)."""

    cutoff: int
    ranks: dict[str, int | None]
    suite: Evaluation | None = None
    error: str | None = None
    returned: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """Per probe: the ids of what came back within the cutoff."""

    def metrics(self, keys: list[str] | None = None) -> dict[str, float]:
        """``probe recall@k`` over `keys` (all probes when None), and the suite's recall@k and
        evidence received (the evidence or a row derived from it in the top k)."""
        chosen = list(self.ranks) if keys is None else [key for key in keys if key in self.ranks]
        data: dict[str, float] = {}
        if chosen:
            found = sum(1 for key in chosen if self.ranks[key] is not None)
            data[f"probe recall@{self.cutoff}"] = round(found / len(chosen), 4)
        if self.suite is not None:
            name = f"recall@{self.suite.k}"
            data[f"suite {name}"] = self.suite.metrics[name]
            evidence = (self.suite.received or {}).get("evidence_received")
            if evidence is not None:
                data["suite evidence_received"] = evidence
        return data

    def found_cases(self) -> set[str]:
        """The suite's cases whose evidence (or a row derived from it) is in the top k."""
        if self.suite is None:
            return set()
        return {outcome.case.id for outcome in self.suite.outcomes if outcome.holds_evidence}

    def to_stats(self) -> dict[str, Any]:
        """The figures for reports."""
        data: dict[str, Any] = {"profile": EVERY_SESSION_PROFILE, **self.metrics()}
        if self.error:
            data["error"] = self.error
        return data


def probe_rank(probe: Probe, retrieved: list[Retrieved], cutoff: int) -> int | None:
    """1-based rank of the first returned item that answers `probe` within `cutoff`, else None."""
    for rank, item in enumerate(retrieved[:cutoff], start=1):
        if probe.answered_by(item.id, item.content):
            return rank
    return None


def _returned(
    probes: list[Probe], ranked: list[list[Retrieved]], cutoff: int
) -> dict[str, list[str]]:
    return {
        probe.memory_id: [item.id for item in retrieved[:cutoff]]
        for probe, retrieved in zip(probes, ranked)
    }


def engine_for(settings: Settings, db_path: Path) -> MnemosyneEngine:
    """The eval's Mnemosyne engine, recalling from the copy at `db_path`."""
    return MnemosyneEngine.from_settings(settings, db_path=db_path)


def cutoff_for(settings: Settings, engine: MnemosyneEngine) -> int:
    """How many items the agent is given: the plugin's 5 in the Hermes profile, else the eval's k."""
    return 5 if engine.profile in AGENT_PROFILES else settings.retrieval_eval.k


def combine(first: Measurement, rest: Measurement) -> Measurement:
    """One measurement of the probes of both (the recall guard measures a first sample, then the
    rest): ranks of both, the suite and the cost turns of `first`, what the agent receives over all
    turns; an error of either is the error."""
    return dataclasses.replace(
        first,
        ranks={**first.ranks, **rest.ranks},
        returned={**first.returned, **rest.returned},
        receives=summarize(first.turns + rest.turns) if first.receives is not None else None,
        error=first.error or rest.error,
        turns=first.turns + rest.turns,
    )


def measure_every_session(
    settings: Settings,
    db_path: Path,
    probes: list[Probe],
    suite: Suite | None,
    evidence: asked.Evidence | None,
    in_place: bool = False,
) -> EverySession:
    """Mnemosyne's own recall over every session on the copy at `db_path` (see `EverySession`)."""
    engine = MnemosyneEngine.from_settings(settings, db_path=db_path, profile=EVERY_SESSION_PROFILE)
    engine.in_place = in_place
    engine.cost_sample = 0
    cutoff = settings.retrieval_eval.k
    queries = [Query(text=probe.query, k=cutoff) for probe in probes]
    suite_k, case_queries = (
        suite_queries(suite, default_k=settings.retrieval_eval.k) if suite else (0, [])
    )
    # No session: recalled across every session, whatever session the case is asked in.
    case_queries = [Query(text=query.text, k=query.k) for query in case_queries]
    if not queries and not case_queries:
        return EverySession(cutoff=cutoff, ranks={})
    try:
        ranked = engine.recall_many(queries + case_queries)
    except VectorsUnavailable:
        raise
    except MnemoOpsError as error:
        return EverySession(
            cutoff=cutoff, ranks={probe.memory_id: None for probe in probes}, error=error.message
        )
    ranks = {
        probe.memory_id: probe_rank(probe, retrieved, cutoff)
        for probe, retrieved in zip(probes, ranked[: len(queries)])
    }
    evaluation = None
    if suite is not None:
        evaluation = score_suite(
            suite, engine.describe(), suite_k, case_queries, ranked[len(queries) :], None, evidence
        )
    return EverySession(
        cutoff=cutoff,
        ranks=ranks,
        suite=evaluation,
        returned=_returned(probes, ranked[: len(queries)], cutoff),
    )


def measure(
    settings: Settings,
    db_path: Path,
    probes: list[Probe],
    suite: Suite | None = None,
    progress=None,
    in_place: bool = False,
    cost_sample: int | None = None,
    blocks_dir: Path | None = None,
    every_session: bool = False,
) -> Measurement:
    """Recall every probe (and every case of `suite`) on the database copy at `db_path`.

    `in_place` recalls on that copy itself (a private copy thrown away afterwards: the recall
    counters Mnemosyne bumps land in it), not on a snapshot of it; `cost_sample` overrides how many
    of the first probes have their cost counted (0: none). The suite's cases count the memory
    blocks in `blocks_dir` (default: the settings' folder) as received. `every_session` also
    measures Mnemosyne's own recall over every session (`measure_every_session`).
    """
    engine = engine_for(settings, db_path)
    engine.in_place = in_place
    if cost_sample is not None:
        engine.cost_sample = cost_sample
    cutoff = cutoff_for(settings, engine)
    queries = [Query(text=probe.query, k=cutoff, session=probe.session_id) for probe in probes]
    suite_k, case_queries = (
        suite_queries(suite, default_k=settings.retrieval_eval.k) if suite else (0, [])
    )
    try:
        ranked = (
            engine.recall_many(queries + case_queries, progress=progress)
            if queries or case_queries
            else []
        )
    except VectorsUnavailable:
        raise  # not a property of the copy: the guard refuses to measure at all
    except MnemoOpsError as error:
        # Mnemosyne cannot recall from this database at all (e.g. damage it trips over): nothing
        # the agent asks for reaches it, which is what the measurement records.
        return Measurement(
            profile=engine.profile,
            cutoff=cutoff,
            ranks={probe.memory_id: None for probe in probes},
            error=error.message,
        )
    ranks = {
        probe.memory_id: probe_rank(probe, retrieved, cutoff)
        for probe, retrieved in zip(probes, ranked[: len(queries)])
    }
    evaluation = evidence = None
    if suite is not None:
        evidence = asked.read_evidence(db_path, suite)
        standing = asked.Standing(*prompt_entries(settings, blocks_dir))
        evaluation = score_suite(
            suite,
            engine.describe(),
            suite_k,
            case_queries,
            ranked[len(queries) :],
            engine.last_turns[len(queries) :],
            evidence,
            standing,
        )
    return Measurement(
        profile=engine.profile_used or engine.profile,
        cutoff=cutoff,
        ranks=ranks,
        returned=_returned(probes, ranked[: len(queries)], cutoff),
        suite=evaluation,
        receives=summarize(engine.last_turns[: len(queries)]),
        turns=list(engine.last_turns[: len(queries)]),
        dense=engine.last_dense,
        every_session=(
            measure_every_session(settings, db_path, probes, suite, evidence, in_place)
            if every_session
            else None
        ),
    )
