"""Why did the agent not remember? Each expected memory's fate in the agent's per-turn prefetch.

For every query (a suite's case, or one ``mnemo-ops why`` question) the Mnemosyne engine's worker
runs the Hermes plugin's own ``prefetch`` on a snapshot copy, records its recall and its canonical
rows, and reproduces its decision with the plugin's own functions, so that every candidate gets
one outcome (``mnemosyne/explain.explain``, in the Mnemosyne worker):

- ``injected``, with its line;
- ``ranked-out``: it passed every filter and was cut by the top 5 (reason ``ranked-out``) or by the
  plugin's semantic dedup (``near-duplicate``), with its rank in the plugin's sort;
- ``filtered``, with the rule, in the plugin's order: ``low-quality``, ``source-quality``,
  ``lexical-evidence`` (no distinctive lexical evidence), ``topical-signal`` (below 0.18 for raw
  rows, 0.08 for distilled ones), ``score-and-importance`` (score below 0.20 and importance below
  0.65);
- an expected memory no candidate matches is looked for in a top-50 recall: ``below-top-16`` with
  its rank there, else ``not-within-50`` (with what the database says of it: closed, in another
  session, absent).

The reproduction is checked against the real ``prefetch`` for every query; a difference is an
``explain-mismatch`` note, and the commands exit 1 on one. Where ``mnemosyne_hermes`` is not
installed the documented approximation is explained instead (top 16, the score and importance cut,
the first 5), and the result says so (``approximate``). Results are objects here; the commands
render them (text or JSON).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine, resolve_profile
from mnemo_ops.evaluation.evaluate import suite_queries
from mnemo_ops.evaluation.suite import Case, Suite
from mnemo_ops.foundation.errors import DatabaseError, UsageError
from mnemo_ops.mnemosyne import versions

REASONS = {
    "injected": "injected",
    "past-case-k": "injected past the case's k",
    "ranked-out": "ranked out: past the top 5",
    "near-duplicate": "ranked out: a near-duplicate",
    "score-and-importance": "filtered: score and importance cut",
    "topical-signal": "filtered: topical signal too low",
    "lexical-evidence": "filtered: no distinctive lexical evidence",
    "source-quality": "filtered: source quality",
    "low-quality": "filtered: low quality",
    "below-top-16": "not retrieved: below the top 16",
    "not-within-50": "not retrieved within 50",
}
"""Every reason code with its label, best first: among several expected memories of one case the
one that came closest to being injected gives the case its reason."""
MISS_REASONS = tuple(code for code in REASONS if code != "injected")
MISMATCH = "explain-mismatch"
"""The note of a query whose reproduction differs from the plugin's prefetch."""


@dataclasses.dataclass(frozen=True)
class Expected:
    """A memory a query should bring back: an id, a text the memory contains, or ``auto`` (an id
    when a row has it, else a text: ``why --expect``)."""

    kind: str
    value: str

    def to_request(self) -> dict[str, str]:
        """The worker's form."""
        return {"kind": self.kind, "value": self.value}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One row the prefetch considered: its outcome, why, and its score parts."""

    id: str | None
    content: str
    source: str | None
    importance: float | None
    canonical: bool
    recall_rank: int | None
    rank: int | None
    line: int | None
    outcome: str
    reason: str
    detail: str
    adjusted_score: float | None
    scores: dict[str, Any]

    @classmethod
    def from_reply(cls, data: dict[str, Any]) -> Candidate:
        """From the worker's candidate."""
        return cls(
            id=None if data.get("id") is None else str(data["id"]),
            content=str(data.get("content") or ""),
            source=data.get("source"),
            importance=data.get("importance"),
            canonical=bool(data.get("canonical")),
            recall_rank=data.get("recall_rank"),
            rank=data.get("rank"),
            line=data.get("line"),
            outcome=str(data["outcome"]),
            reason=str(data["reason"]),
            detail=str(data.get("detail") or ""),
            adjusted_score=data.get("adjusted_score"),
            scores=dict(data.get("scores") or {}),
        )


@dataclasses.dataclass(frozen=True)
class TargetOutcome:
    """What became of one expected memory."""

    target: str
    kind: str
    outcome: str
    reason: str
    candidate: str | None
    detail: str
    line: int | None = None
    rank: int | None = None
    recall_rank: int | None = None
    deep_rank: int | None = None
    hint: str | None = None
    scores: dict[str, Any] | None = None

    @classmethod
    def from_reply(cls, data: dict[str, Any]) -> TargetOutcome:
        """From the worker's target."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in data.items() if name in names})

    def sentence(self) -> str:
        """One line: the outcome and its reason."""
        if self.reason == "injected":
            return f"injected at line {self.line}"
        label = REASONS.get(self.reason, self.reason)
        text = f"{label}: {self.detail}" if self.detail else label
        return f"{text}; {self.hint}" if self.hint else text


@dataclasses.dataclass(frozen=True)
class QueryExplanation:
    """One query: what was injected, every candidate, each expected memory, and the notes."""

    query: str
    session: str | None
    recalled_in: str | None
    session_key: str | None
    recall_query: str
    injected: list[dict[str, Any]]
    injected_chars: int
    candidates: list[Candidate]
    targets: list[TargetOutcome]
    notes: list[dict[str, str]]

    @classmethod
    def from_reply(cls, query: str, session: str | None, data: dict[str, Any]) -> QueryExplanation:
        """From the worker's explanation of `query`."""
        return cls(
            query=query,
            session=session,
            recalled_in=data.get("recalled_in"),
            session_key=data.get("session_key"),
            recall_query=str(data.get("recall_query") or query),
            injected=list(data.get("injected") or []),
            injected_chars=int(data.get("injected_chars") or 0),
            candidates=[Candidate.from_reply(item) for item in data.get("candidates") or []],
            targets=[TargetOutcome.from_reply(item) for item in data.get("targets") or []],
            notes=list(data.get("notes") or []),
        )

    @property
    def mismatch(self) -> bool:
        """True when the reproduction differed from the plugin's prefetch for this query."""
        return any(note.get("code") == MISMATCH for note in self.notes)

    def best_target(self) -> TargetOutcome | None:
        """The expected memory that came closest to being injected."""
        if not self.targets:
            return None
        return min(
            self.targets,
            key=lambda t: (
                list(REASONS).index(t.reason) if t.reason in REASONS else len(REASONS),
                t.line or 0,
                t.rank or t.deep_rank or 0,
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CaseExplanation:
    """One suite case, explained: its outcome is that of its best expected memory."""

    case: Case
    k: int
    explanation: QueryExplanation

    @property
    def reason(self) -> str:
        """The case's reason code (``injected`` for a case the agent is given the answer to)."""
        best = self.explanation.best_target()
        if best is None:
            return "not-within-50"
        if best.reason == "injected" and (best.line or 0) > self.k:
            return "past-case-k"
        return best.reason

    @property
    def passed(self) -> bool:
        """The agent is given an expected memory within the case's k."""
        return self.reason == "injected"

    def sentence(self) -> str:
        """One line: the expected memory's outcome and its reason."""
        best = self.explanation.best_target()
        if best is None:
            return "nothing expected"
        if self.reason == "past-case-k":
            return f"injected at line {best.line}, past the case's k ({self.k})"
        return best.sentence()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the case, its outcome and reason, the whole explanation."""
        best = self.explanation.best_target()
        return {
            "id": self.case.id,
            "query": self.case.query,
            "category": self.case.category or "uncategorized",
            "session": self.case.session,
            "expected": self.case.expected_text(),
            "k": self.k,
            "passed": self.passed,
            "outcome": best.outcome if best else "not-retrieved",
            "reason": self.reason,
            "sentence": self.sentence(),
            "explanation": self.explanation.to_dict(),
        }


@dataclasses.dataclass
class Run:
    """How the explanations were made: the engine, the profile it really used, the plugin."""

    engine: dict[str, Any]
    profile_used: str
    plugin_version: str | None
    eval_profile: str
    depth: int

    @property
    def approximate(self) -> bool:
        """True when the plugin was not installed and the documented approximation was explained."""
        return self.profile_used != "hermes"

    def notes(self) -> list[str]:
        """What the reader must know about these explanations."""
        notes = []
        if self.approximate:
            notes.append(
                "mnemosyne_hermes is not installed here: this explains the documented "
                "approximation (top 16, the score and importance cut, the first 5), not the "
                "plugin's own filters"
            )
        if self.eval_profile == "plain":
            notes.append(
                "the eval measures plain recall (profile plain); this explains what the agent "
                "is given each turn"
            )
        return notes

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "engine": self.engine,
            "profile_used": self.profile_used,
            "plugin_version": self.plugin_version,
            "approximate": self.approximate,
            "depth": self.depth,
            "profile_notes": self.notes(),
        }


@dataclasses.dataclass
class SuiteExplanation:
    """Every case of a suite (or the chosen ones) explained, with the misses per category."""

    suite: Path
    run: Run
    cases: list[CaseExplanation]

    @property
    def misses(self) -> list[CaseExplanation]:
        """The cases whose expected memory the agent is not given."""
        return [case for case in self.cases if not case.passed]

    @property
    def mismatches(self) -> list[CaseExplanation]:
        """The cases whose reproduction differed from the plugin's prefetch."""
        return [case for case in self.cases if case.explanation.mismatch]

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per category: cases, misses, and the misses per reason (reasons in `REASONS` order)."""
        table: dict[str, dict[str, Any]] = {}
        for case in self.cases:
            row = table.setdefault(
                case.case.category or "uncategorized", {"cases": 0, "missed": 0, "reasons": {}}
            )
            row["cases"] += 1
            if not case.passed:
                row["missed"] += 1
                row["reasons"][case.reason] = row["reasons"].get(case.reason, 0) + 1
        for row in table.values():
            row["reasons"] = {
                code: row["reasons"][code] for code in MISS_REASONS if code in row["reasons"]
            }
        return dict(sorted(table.items()))

    def reason_totals(self) -> dict[str, int]:
        """Misses per reason over every category, the largest first."""
        totals: dict[str, int] = {}
        for case in self.misses:
            totals[case.reason] = totals.get(case.reason, 0) + 1
        return dict(
            sorted(totals.items(), key=lambda item: (-item[1], MISS_REASONS.index(item[0])))
        )

    def to_dict(self, only_misses: bool = False) -> dict[str, Any]:
        """The JSON form (with `only_misses`, only the missed cases are listed; the summary counts
        every case)."""
        shown = self.misses if only_misses else self.cases
        return {
            "suite": str(self.suite),
            **self.run.to_dict(),
            "cases_explained": len(self.cases),
            "missed": len(self.misses),
            "mismatches": len(self.mismatches),
            "summary": self.summary(),
            "reasons": self.reason_totals(),
            "cases": [case.to_dict() for case in shown],
        }


@dataclasses.dataclass
class QuestionExplanation:
    """One question (``mnemo-ops why``), explained."""

    run: Run
    explanation: QueryExplanation

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {**self.run.to_dict(), **self.explanation.to_dict()}


def explainer_engine(settings: Any) -> tuple[MnemosyneEngine, str]:
    """The engine that explains (the ``retrieval_eval`` options, the ``hermes`` profile unless the
    config asks for the approximation) and the profile the eval itself resolves to.

    Refuses (exit 2) a database the installed Mnemosyne (or ``retrieval_eval.python``'s) must not
    open, as the eval's preflight does; a missing or non-Mnemosyne database exits 2 too.
    """
    options = settings.retrieval_eval
    verdict = versions.check_database(
        settings.db_path, versions.OPENS_SNAPSHOT, python=options.python or None
    )
    if verdict.problem:
        raise DatabaseError(verdict.problem)
    eval_profile = resolve_profile(options.profile, settings.hermes_home)
    profile = "hermes-approximate" if eval_profile == "hermes-approximate" else "hermes"
    return MnemosyneEngine.from_settings(settings, profile=profile), eval_profile


def _explain(
    engine: MnemosyneEngine,
    queries: Sequence[dict[str, Any]],
    score_parts: bool,
    progress: Callable[[Any], None] | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    reply = engine.run_on_snapshot(
        {"mode": "explain", "queries": list(queries), "score_parts": score_parts}, progress
    )
    return reply, list(reply.get("explanations") or [])


def _run(engine: MnemosyneEngine, reply: dict[str, Any], eval_profile: str) -> Run:
    return Run(
        engine=engine.describe(),
        profile_used=str(reply.get("profile_used") or engine.profile),
        plugin_version=reply.get("plugin_version"),
        eval_profile=eval_profile,
        depth=int(reply.get("depth") or 50),
    )


def case_targets(case: Case) -> list[Expected]:
    """A case's expected memories: its relevant ids, then its expected texts."""
    return [Expected("id", value) for value in case.relevant] + [
        Expected("text", value) for value in case.expect
    ]


def explain_suite(
    settings: Any,
    suite: Suite,
    case_ids: Sequence[str] = (),
    progress: Callable[[Any], None] | None = None,
    default_k: int | None = None,
) -> SuiteExplanation:
    """Explain the cases of `suite` (those of `case_ids` when given; UsageError naming an unknown
    one). Score parts are left out: a case's one-line reason needs only the rule that decided it."""
    run_k, queries = suite_queries(suite, None, default_k or settings.retrieval_eval.k)
    chosen = list(zip(suite.cases, queries))
    if case_ids:
        known = {case.id for case in suite.cases}
        unknown = [case_id for case_id in case_ids if case_id not in known]
        if unknown:
            raise UsageError(f"{suite.path}: no case {unknown[0]!r}")
        chosen = [(case, query) for case, query in chosen if case.id in set(case_ids)]
    engine, eval_profile = explainer_engine(settings)
    requests = [
        {
            "text": case.query,
            "session": case.session,
            "targets": [target.to_request() for target in case_targets(case)],
        }
        for case, _query in chosen
    ]
    reply, explanations = _explain(engine, requests, False, progress)
    return SuiteExplanation(
        suite=suite.path,
        run=_run(engine, reply, eval_profile),
        cases=[
            CaseExplanation(
                case=case,
                k=query.k,
                explanation=QueryExplanation.from_reply(case.query, case.session, explained),
            )
            for (case, query), explained in zip(chosen, explanations)
        ],
    )


def session_of(key: str | None) -> str | None:
    """The database session a ``why --session`` value names: a Hermes session key (``telegram-42``)
    is the plugin's ``hermes_telegram-42``; a value that already is one is kept."""
    if key is None:
        return None
    return key if key.startswith("hermes_") else f"hermes_{key}"


def explain_question(
    settings: Any,
    question: str,
    expect: Sequence[str] = (),
    session_key: str | None = None,
    progress: Callable[[Any], None] | None = None,
) -> QuestionExplanation:
    """Explain one question as the agent would ask it in `session_key` (None: the latest
    conversation), with the score parts of every candidate and each `expect` (an id or a text)."""
    if not question.strip():
        raise UsageError("the question is empty")
    engine, eval_profile = explainer_engine(settings)
    session = session_of(session_key)
    request = {
        "text": question,
        "session": session,
        "targets": [Expected("auto", value).to_request() for value in expect],
    }
    reply, explanations = _explain(engine, [request], True, progress)
    return QuestionExplanation(
        run=_run(engine, reply, eval_profile),
        explanation=QueryExplanation.from_reply(question, session, explanations[0]),
    )
