"""The worker's ``explain`` mode: why each query's expected memories were or were not injected.

Part of the Mnemosyne worker's child process (``worker.py``, which says why it is a child): the
prefetch runs as the engine runs it, on a copy, and its decision is reproduced on exactly the rows
it saw, recorded by wrapping Mnemosyne's ``beam.recall`` and the plugin's own functions in the
process that imported them, never in the job's own process.

- `PrefetchExplainer`: each candidate's fate in the Hermes plugin's prefetch, decided by the
  plugin's own functions (its filters in order, its sort, its dedup, its top 5) and checked against
  what the prefetch injected; `ApproximateExplainer`: the same for the documented approximation.
- `RecallRecorder` records the recall each makes; `score_parts_of` gives a candidate's score parts
  (Mnemosyne's ``recall(explain=True)`` trace, else the row's own fields).
- `explain_targets`, `target_outcome` and `missing_hint`: each expected memory's outcome, found
  deeper (top `EXPLAIN_DEPTH`) when no candidate matches, and why recall may not reach it at all.

Also run standalone under another interpreter (``worker.py``): the standard library, Mnemosyne and
the plugin (inside functions), ``child_process`` and the worker's sibling modules only, Python 3.10
syntax.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import send_progress
from mnemo_ops.mnemosyne.plugin_prefetch import (
    HERMES,
    HERMES_SESSION_PREFIX,
    PluginPrefetch,
    _score,
    break_ties,
    cross_session_recall,
    hermes_prefetch,
    injected_text_of,
    plugin_version,
)
from mnemo_ops.mnemosyne.recall import apply_config_overrides

EXPLAIN_DEPTH = 50
"""How deep an expected memory the prefetch did not recall is looked for: ``beam.recall(top_k=50)``."""


PLUGIN_RECALL = {"top_k": 16, "temporal_weight": 0.2, "temporal_halflife": 48}
"""The recall call the plugin 0.7.6 makes each turn; another call is reported (``plugin-recall-changed``)."""


RAW_SIGNAL, DISTILLED_SIGNAL = 0.18, 0.08
"""The plugin's topical-signal floors for raw (``conversation``, ``[USER]``) and distilled rows: literals
inside its ``prefetch``, so restated here; the reproduction check catches a change."""


def _recall_with(beam_recall: Any, arguments: dict[str, Any], **changes: Any) -> tuple[list, dict]:
    """(rows, explain trace) of ``beam.recall(**arguments, **changes)``, leaving no recall counts
    where Mnemosyne allows it (4.0's ``_track_recall``): the explanation should not change the copy."""
    import inspect

    call = {**arguments, **changes}
    try:
        accepted = inspect.signature(beam_recall).parameters
    except (TypeError, ValueError):
        accepted = {}
    if "_track_recall" in accepted:
        call["_track_recall"] = False
    reply = beam_recall(**call)
    if isinstance(reply, dict):  # explain=True: {"results": [...], "explain": {...}}
        return list(reply.get("results") or []), dict(reply.get("explain") or {})
    return list(reply or []), {}


def score_parts_of(row: dict[str, Any], trace: dict[str, Any] | None = None) -> dict[str, Any]:
    """A candidate's score parts: Mnemosyne's explain trace for it where the trace names it (it names
    only the rows it kept), else the same fields of the row itself."""
    for candidate in (trace or {}).get("candidates") or []:
        if candidate.get("id") is not None and candidate.get("id") == row.get("id"):
            return {
                **dict(candidate.get("scores") or {}),
                "source_path": candidate.get("source_path"),
                "from": "explain",
            }
    parts: dict[str, Any] = {
        "keyword": row.get("keyword_score", 0.0),
        "fts": row.get("fts_score", 0.0),
        "dense": row.get("dense_score", 0.0),
        "importance": row.get("importance", 0.0),
        "recency_decay": row.get("recency_decay", 0.0),
        "final": row.get("score", 0.0),
        "from": "row",
    }
    if isinstance(row.get("voice_scores"), dict):
        parts["voices"] = dict(row["voice_scores"])
    return parts


class RecallRecorder:
    """Records each ``beam.recall`` call made on a watched beam (its arguments and its rows)."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        self.originals: dict[int, Any] = {}

    def watch(self, beam: Any) -> Any:
        """Record `beam`'s recalls from now on; return its own (unrecorded) ``recall``."""
        if beam is None:
            return None
        if id(beam) not in self.originals:
            original = beam.recall
            self.originals[id(beam)] = original

            def recording(*args: Any, **kwargs: Any) -> Any:
                rows = original(*args, **kwargs)
                arguments = dict(kwargs)
                if args:
                    arguments["query"] = args[0]
                self.calls.append((arguments, list(rows) if isinstance(rows, list) else []))
                return rows

            beam.recall = recording
        return self.originals[id(beam)]


def _matches(target: dict[str, Any], item_id: Any, row: dict[str, Any]) -> bool:
    if target["kind"] == "id":
        return str(target["value"]) in (str(item_id), str(row.get("id")))
    return str(target["value"]).casefold() in str(row.get("content") or "").casefold()


OUTCOME_ORDER = ("injected", "ranked-out", "filtered")
"""Best first: the candidate that came closest decides a target's outcome."""


def target_outcome(
    target: dict[str, Any], candidates: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The outcome of the best candidate matching `target` (None: no candidate matches)."""
    matching = [
        candidate for candidate in candidates if _matches(target, candidate["id"], candidate["row"])
    ]
    if not matching:
        return None
    best = min(
        matching,
        key=lambda c: (
            OUTCOME_ORDER.index(c["outcome"]),
            c.get("line") or 0,
            c.get("rank") or 0,
            c.get("recall_rank") or 0,
        ),
    )
    return {
        "target": target["value"],
        "kind": target["kind"],
        "outcome": best["outcome"],
        "reason": best["reason"],
        "candidate": best["id"],
        "line": best.get("line"),
        "rank": best.get("rank"),
        "recall_rank": best.get("recall_rank"),
        "detail": best["detail"],
        "scores": best.get("scores"),
    }


def _resolve_targets(db_path: Path, targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``auto`` targets (``why --expect``) become ids when a row has that id, else texts."""
    resolved = []
    for target in targets:
        kind = target.get("kind") or "auto"
        if kind == "auto":
            kind = "id" if _memory_rows(db_path, "id = ?", str(target["value"])) else "text"
        resolved.append({"kind": kind, "value": str(target["value"])})
    return resolved


def _memory_rows(
    db_path: Path, condition: str, value: str, limit: int = 200
) -> list[dict[str, Any]]:
    """Working and episodic rows matching `condition` (one ``?``), read-only on the copy."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    rows: list[dict[str, Any]] = []
    try:
        for table in ("working_memory", "episodic_memory"):
            try:
                found = connection.execute(
                    f"SELECT id, session_id, scope, valid_until, superseded_by FROM {table} "
                    f"WHERE {condition} LIMIT {int(limit)}",
                    (value,),
                ).fetchall()
            except sqlite3.Error:  # a table or column this line lacks: nothing to say about it
                continue
            rows += [{"table": table, **dict(row)} for row in found]
    finally:
        connection.close()
    return rows


def missing_hint(db_path: Path, target: dict[str, Any], recalled_in: str | None) -> str:
    """Why recall may not reach `target` at all: closed rows, other sessions, no such memory."""
    if target["kind"] == "id":
        rows = _memory_rows(db_path, "id = ?", target["value"])
        if not rows:
            return "no memory has this id"
    else:
        rows = _memory_rows(db_path, "instr(lower(content), lower(?)) > 0", target["value"])
        if not rows:
            return "no memory contains this text"
    closed = [row for row in rows if row.get("valid_until") or row.get("superseded_by")]
    live = [row for row in rows if row not in closed]
    elsewhere = [
        row
        for row in live
        if recalled_in and row.get("scope") != "global" and row.get("session_id") != recalled_in
    ]
    here = [row for row in live if row not in elsewhere]
    parts = []
    if closed:
        first = closed[0]
        stamp = f"valid_until {first['valid_until']}" if first.get("valid_until") else ""
        if first.get("superseded_by"):
            stamp = f"{stamp}, superseded by {first['superseded_by']}".strip(", ")
        parts.append(f"{len(closed)} closed ({first['id']}: {stamp})")
    if elsewhere:
        sessions = ", ".join(sorted({str(row.get("session_id")) for row in elsewhere})[:3])
        parts.append(
            f"{len(elsewhere)} live in another session ({sessions}); this recall ran in "
            f"{recalled_in} and sees only its own and global rows unless cross-session recall is on"
        )
    if here:
        parts.append(
            f"live and in this recall's scope ({here[0]['id']}): Mnemosyne's recall leaves it out"
            if len(here) == 1
            else f"{len(here)} live and in this recall's scope ({here[0]['id']}, ...): "
            "Mnemosyne's recall leaves them out"
        )
    return "; ".join(parts)


def _deep_outcome(
    target: dict[str, Any], deep_rows: list[dict[str, Any]], plugin_top_k: int
) -> dict[str, Any] | None:
    for rank, row in enumerate(deep_rows, start=1):
        if _matches(target, row.get("id"), row):
            return {
                "target": target["value"],
                "kind": target["kind"],
                "outcome": "not-retrieved",
                "reason": "below-top-16",
                "candidate": row.get("id"),
                "deep_rank": rank,
                "detail": (
                    f"recalled at rank {rank} of a top-{EXPLAIN_DEPTH} recall, not among the "
                    f"{plugin_top_k} the prefetch asks for"
                    if rank > plugin_top_k
                    # Mnemosyne's candidate pools grow with top_k, so a deeper recall may rank
                    # a row higher than the prefetch's own recall did.
                    else f"not among the prefetch's {plugin_top_k}, though a top-{EXPLAIN_DEPTH} "
                    f"recall ranks it {rank} (larger candidate pools)"
                ),
                "scores": score_parts_of(row),
            }
    return None


class PrefetchExplainer:
    """Each candidate's fate in the Hermes plugin's prefetch, decided by the plugin's own functions.

    The plugin's ``prefetch`` runs as the engine runs it (``PluginPrefetch``); its recall call (the
    rows and the arguments) and its canonical rows are recorded as it runs, and the decision is
    reproduced on exactly those: each filter in the plugin's order, its sort key, its dedup, its
    top 5. The reproduction's injected rows are checked against what ``prefetch`` injected; a
    difference is an ``explain-mismatch`` note (the explanation is then not to be trusted).
    """

    approximate = False

    def __init__(self, db_path: Path, hermes_home: Path) -> None:
        import mnemosyne_hermes as plugin

        self.module = plugin
        self.dedup = plugin._semantic_dedup_prefetch  # the plugin's own, before anyone wraps it
        self.prefetcher = PluginPrefetch(db_path, hermes_home)
        self.db_path = db_path
        self.recorder = RecallRecorder()
        self.canonical: list[list[dict[str, Any]]] = []
        original = plugin._canonical_prefetch_rows

        def recording(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
            rows = original(*args, **kwargs)
            self.canonical.append(list(rows))
            return rows

        plugin._canonical_prefetch_rows = recording

    def filter_rule(self, query: str, row: dict[str, Any]) -> tuple[str | None, str]:
        """The first of the prefetch's filters that drops `row` (None: it passes) and why."""
        plugin = self.module
        content = row.get("content", "")
        if plugin._is_low_quality_prefetch(content):
            return "low-quality", "too short to inject (one short word or a stopword)"
        if plugin._prefetch_source_quality(row) <= 0:
            prefixes = " or ".join(getattr(plugin, "_PREFETCH_EXCLUDED_PREFIXES", ()))
            return "source-quality", f"source quality 0: the plugin never injects {prefixes} lines"
        if not plugin._prefetch_has_distinctive_lexical_evidence(query, content):
            return "lexical-evidence", self._lexical_detail(query, content)
        if not plugin._prefetch_is_polyphonic(row):
            signal = plugin._prefetch_topic_signal(row)
            raw = plugin._prefetch_is_raw(row)
            required = RAW_SIGNAL if raw else DISTILLED_SIGNAL
            if signal < required:
                kind = "raw conversation" if raw else "distilled"
                return "topical-signal", (
                    f"topical signal {signal:.3f} below {required} for a {kind} row "
                    "(the best of its keyword, FTS and dense scores)"
                )
            score = float(row.get("score") or 0.0)
            importance = float(row.get("importance") or 0.0)
            if score < 0.20 and importance < 0.65:
                return "score-and-importance", (
                    f"score {score:.3f} below 0.20 and importance {importance:.2f} below 0.65"
                )
        return None, ""

    def _lexical_detail(self, query: str, content: str) -> str:
        plugin = self.module
        try:
            generic = plugin._PREFETCH_LEXICAL_GENERIC_TOKENS
            asked = plugin._prefetch_tokens(query) - generic
            shared = asked & plugin._prefetch_tokens(content)
            needed = plugin._prefetch_min_distinctive_tokens()
            coverage = plugin._prefetch_min_query_coverage()
        except Exception:  # a plugin without these helpers: the rule's name is still right
            return "too few of the query's topical words"
        words = ", ".join(sorted(shared)) or "none"
        return (
            f"shares {len(shared)} of the query's {len(asked)} topical words ({words}); the "
            f"plugin needs {needed} and {coverage:.0%} of them"
        )

    def decide(
        self, query: str, results: list[dict[str, Any]], canonical: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Every candidate with its outcome, in the plugin's steps (filters, canonical rows
        appended, the sort, the dedup, the top 5)."""
        plugin = self.module
        candidates: list[dict[str, Any]] = []
        passing: list[dict[str, Any]] = []
        for rank, row in enumerate(results, start=1):
            rule, detail = self.filter_rule(query, row)
            candidate = {"row": row, "origin": "recall", "recall_rank": rank}
            if rule:
                candidate.update(outcome="filtered", reason=rule, detail=detail)
            else:
                passing.append(candidate)
            candidates.append(candidate)
        for row in canonical:
            candidate = {"row": row, "origin": "canonical", "recall_rank": None}
            passing.append(candidate)
            candidates.append(candidate)
        # The plugin sorts the same list in the same order (list.sort is stable).
        ordered = sorted(
            passing, key=lambda c: plugin._prefetch_adjusted_score(c["row"]), reverse=True
        )
        kept = self.dedup([candidate["row"] for candidate in ordered])
        kept_index = {id(row): index for index, row in enumerate(kept)}
        top_k = plugin._PREFETCH_TOP_K
        for rank, candidate in enumerate(ordered, start=1):
            candidate["rank"] = rank
            candidate["adjusted_score"] = round(
                plugin._prefetch_adjusted_score(candidate["row"]), 4
            )
            index = kept_index.get(id(candidate["row"]))
            if index is not None and index < top_k:
                candidate.update(outcome="injected", line=index + 1, reason="injected", detail="")
            elif index is not None:
                candidate.update(
                    outcome="ranked-out",
                    reason="ranked-out",
                    detail=(
                        f"passed every filter; rank {rank} by the plugin's sort (score "
                        f"{candidate['adjusted_score']:.3f}), {index + 1}th after the dedup, "
                        f"past the top {top_k}"
                    ),
                )
            else:
                candidate.update(outcome="ranked-out", reason="near-duplicate")
                candidate["detail"] = self._duplicate_detail(candidate, ordered, kept, top_k)
        for candidate in candidates:
            candidate["id"] = self.prefetcher._item(candidate["row"])["id"]
        return candidates

    def _duplicate_detail(
        self,
        candidate: dict[str, Any],
        ordered: list[dict[str, Any]],
        kept: list[dict[str, Any]],
        top_k: int,
    ) -> str:
        row = candidate["row"]
        if not self.dedup([row]):
            return (
                "passed every filter; the dedup drops it: no content word of three letters or more"
            )
        earlier = {id(c["row"]) for c in ordered[: candidate["rank"] - 1]}
        for index, other in enumerate(kept):
            if id(other) in earlier and len(self.dedup([other, row])) == 1:
                where = f"line {index + 1}" if index < top_k else f"{index + 1}th kept row"
                return (
                    f"passed every filter; rank {candidate['rank']} by the plugin's sort, dropped "
                    f"by the dedup as a near-duplicate of {where} ({other.get('id') or 'canonical'})"
                )
        return f"passed every filter; rank {candidate['rank']}, dropped by the dedup"

    def explain(self, query: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """One query explained (see `explain`)."""
        key = self.prefetcher.key_for(query.get("session"))
        provider = self.prefetcher.provider(key)
        recall = self.recorder.watch(provider._beam)
        self.recorder.calls.clear()
        self.canonical.clear()
        text, injected = self.prefetcher.prefetch(query["text"], query.get("session"))
        notes: list[dict[str, str]] = []
        explained: dict[str, Any] = {
            "session_key": key,
            "recalled_in": f"{HERMES_SESSION_PREFIX}{key}",
            "injected_chars": len(text),
            "injected": injected,
        }
        if not self.recorder.calls:
            notes.append(
                {
                    "code": "no-recall",
                    "message": "the plugin's prefetch made no recall (an empty query once its "
                    "speaker stamps are removed, or no database)",
                }
            )
            explained.update(
                candidates=[],
                notes=notes,
                recall_query=query["text"],
                targets=explain_targets(
                    self.db_path,
                    query.get("targets") or [],
                    [],
                    lambda: ([], {}),
                    PLUGIN_RECALL["top_k"],
                    explained["recalled_in"],
                ),
            )
            return explained
        arguments, results = self.recorder.calls[-1]
        asked = {name: arguments.get(name) for name in PLUGIN_RECALL}
        if asked != PLUGIN_RECALL:
            notes.append(
                {
                    "code": "plugin-recall-changed",
                    "message": f"the plugin recalled with {asked}, not {PLUGIN_RECALL}",
                }
            )
        recall_query = str(arguments.get("query") or query["text"])
        candidates = self.decide(
            recall_query, results, self.canonical[-1] if self.canonical else []
        )
        reproduced = sorted(
            (c for c in candidates if c["outcome"] == "injected"), key=lambda c: c["line"]
        )
        mine = [(c["id"], c["row"].get("content")) for c in reproduced]
        real = [(item["id"], item["content"]) for item in injected]
        if mine != real:
            notes.append(
                {
                    "code": "explain-mismatch",
                    "message": "the reproduction of the plugin's decision injects "
                    f"{[item for item, _ in mine]}, the plugin injected {[item for item, _ in real]}: "
                    "this explanation does not describe the plugin",
                }
            )
        trace: dict[str, Any] = {}
        if request.get("score_parts"):
            with provider._beam_session_scope(key) as beam:
                if beam is not None:
                    rows, trace = _recall_with(recall, arguments, explain=True)
                    if [row.get("id") for row in rows] != [row.get("id") for row in results]:
                        notes.append(
                            {
                                "code": "score-parts-drift",
                                "message": "the explain recall ranked other rows than the "
                                "prefetch's recall; score parts are those of the rows' own fields",
                            }
                        )
                        trace = {}
        for candidate in candidates:
            candidate["scores"] = score_parts_of(candidate["row"], trace)
            if candidate["origin"] == "recall":
                candidate["scores"]["signal"] = round(
                    self.module._prefetch_topic_signal(candidate["row"]), 4
                )

        def deep() -> tuple[list[dict[str, Any]], dict[str, Any]]:
            with provider._beam_session_scope(key) as beam:
                if beam is None:
                    return [], {}
                return _recall_with(recall, arguments, top_k=EXPLAIN_DEPTH, explain=True)

        explained.update(
            recall_query=recall_query,
            candidates=candidates,
            notes=notes,
            targets=explain_targets(
                self.db_path,
                query.get("targets") or [],
                candidates,
                deep,
                int(arguments.get("top_k") or PLUGIN_RECALL["top_k"]),
                explained["recalled_in"],
            ),
        )
        return explained


def _stages_text(trace: dict[str, Any]) -> str:
    """Mnemosyne's recall stages in a few words (how many candidates each found, how many were in
    scope and live, how many it kept): a memory its search found but its relevance gate dropped
    shows here."""
    stages = []
    for stage in trace.get("stages") or []:
        found, kept = stage.get("raw_count", 0), stage.get("kept_count", 0)
        scoped = stage.get("after_filter_count", found)
        # Rows its search found outside the session or closed are dropped before any scoring.
        middle = f", {scoped} in scope and live" if scoped != found else ""
        stages.append(f"{stage.get('name')} {found} found{middle}, {kept} kept")
    return f" (its stages: {'; '.join(stages)})" if stages else ""


def explain_targets(
    db_path: Path,
    targets: list[dict[str, Any]],
    candidates: list[dict[str, Any]],
    deep: Any,
    plugin_top_k: int,
    recalled_in: str | None,
) -> list[dict[str, Any]]:
    """Each expected memory's outcome: that of its best candidate, else its rank in a deeper
    recall (`deep()`, run once and only when needed), else not retrieved within 50."""
    explained, deep_rows = [], None
    deep_trace: dict[str, Any] = {}
    for target in _resolve_targets(db_path, targets):
        outcome = target_outcome(target, candidates)
        if outcome is None:
            if deep_rows is None:
                deep_rows, deep_trace = deep()
            outcome = _deep_outcome(target, deep_rows, plugin_top_k)
        if outcome is None:
            outcome = {
                "target": target["value"],
                "kind": target["kind"],
                "outcome": "not-retrieved",
                "reason": "not-within-50",
                "candidate": None,
                "detail": f"a top-{EXPLAIN_DEPTH} recall does not return it{_stages_text(deep_trace)}",
                "hint": missing_hint(db_path, target, recalled_in),
            }
        explained.append(outcome)
    return explained


class ApproximateExplainer:
    """The documented approximation explained (no plugin here): ``hermes_prefetch``'s recall of 16,
    its score and importance cut, its first 5; checked against ``hermes_prefetch`` itself."""

    approximate = True

    def __init__(self, db_path: Path, request: dict[str, Any]) -> None:
        self.db_path = db_path
        self.request = request
        self.instances: dict[str, Any] = {}
        self.recorder = RecallRecorder()

    def filter_rule(self, row: dict[str, Any]) -> tuple[str | None, str]:
        """The approximation's one filter, the plugin's score and importance cut (None: passes)."""
        score, importance = _score(row), float(row.get("importance") or 0.0)
        if score < HERMES["min_score"] and importance < HERMES["min_importance"]:
            return "score-and-importance", (
                f"score {score:.3f} below 0.20 and importance {importance:.2f} below 0.65"
            )
        return None, ""

    def explain(self, query: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """One query explained as the approximation decides it."""
        from mnemosyne.core.memory import Mnemosyne

        # As `recall` does: a query with a session is recalled there; one without, across sessions
        # (unless the eval's config turned cross-session recall off).
        session = query.get("session") or "mnemo-ops-eval"
        across = not query.get("session") and self.request.get("sessionless_cross_session", True)
        if session not in self.instances:
            self.instances[session] = Mnemosyne(session_id=session, db_path=self.db_path)
        memory = self.instances[session]
        recall = self.recorder.watch(memory.beam)
        self.recorder.calls.clear()
        with cross_session_recall(across):
            found = hermes_prefetch(memory, query["text"])
        arguments, raw = self.recorder.calls[-1]
        results = break_ties(raw)
        candidates, passing = [], 0
        for rank, row in enumerate(results, start=1):
            candidate: dict[str, Any] = {
                "row": row,
                "id": row.get("id"),
                "origin": "recall",
                "recall_rank": rank,
            }
            rule, detail = self.filter_rule(row)
            if rule:
                candidate.update(outcome="filtered", reason=rule, detail=detail)
            else:
                passing += 1
                candidate["rank"] = passing
                if passing <= HERMES["kept"]:
                    candidate.update(outcome="injected", line=passing, reason="injected", detail="")
                else:
                    candidate.update(
                        outcome="ranked-out",
                        reason="ranked-out",
                        detail=f"passed the cut; rank {passing}, past the first {HERMES['kept']}",
                    )
            candidates.append(candidate)
        notes = []
        mine = [c["id"] for c in candidates if c["outcome"] == "injected"]
        if mine != [item.get("id") for item in found]:
            notes.append(
                {
                    "code": "explain-mismatch",
                    "message": f"the reproduction injects {mine}, the approximation "
                    f"{[item.get('id') for item in found]}",
                }
            )
        trace: dict[str, Any] = {}
        with cross_session_recall(across):
            if request.get("score_parts"):
                rows, trace = _recall_with(recall, arguments, explain=True)
                if sorted(str(row.get("id")) for row in rows) != sorted(
                    str(row.get("id")) for row in results
                ):
                    notes.append(
                        {
                            "code": "score-parts-drift",
                            "message": "the explain recall ranked other rows than the first; "
                            "score parts are those of the rows' own fields",
                        }
                    )
                    trace = {}
        for candidate in candidates:
            candidate["scores"] = score_parts_of(candidate["row"], trace)

        def deep() -> tuple[list[dict[str, Any]], dict[str, Any]]:
            with cross_session_recall(across):
                rows, trace = _recall_with(recall, arguments, top_k=EXPLAIN_DEPTH, explain=True)
            return break_ties(rows), trace

        recalled_in = None if across else session
        return {
            "session_key": None,
            "recalled_in": recalled_in or "every session",
            "recall_query": query["text"],
            "injected_chars": len(injected_text_of(found)),
            "injected": [
                {"id": item.get("id"), "content": item.get("content"), "canonical": False}
                for item in found
            ],
            "candidates": candidates,
            "notes": notes,
            "targets": explain_targets(
                self.db_path,
                query.get("targets") or [],
                candidates,
                deep,
                HERMES["top_k"],
                recalled_in,
            ),
        }


def _public_candidate(candidate: dict[str, Any]) -> dict[str, Any]:
    """A candidate as the result holds it (the row's fields that matter, not the whole row)."""
    row = candidate["row"]
    return {
        "id": candidate["id"],
        "content": row.get("content"),
        "source": row.get("source"),
        "importance": row.get("importance"),
        "tier": row.get("tier"),
        "canonical": candidate["origin"] == "canonical",
        "recall_rank": candidate.get("recall_rank"),
        "rank": candidate.get("rank"),
        "line": candidate.get("line"),
        "outcome": candidate["outcome"],
        "reason": candidate["reason"],
        "detail": candidate["detail"],
        "adjusted_score": candidate.get("adjusted_score"),
        "scores": candidate.get("scores") or {},
    }


def explain(request: dict[str, Any]) -> dict[str, Any]:
    """Why each query's expected memories were or were not injected.

    Per query (``queries``: text, session, ``targets``: ``{"kind": "id" | "text" | "auto",
    "value"}``): the injected lines, every candidate with its outcome (``injected`` with its line,
    ``ranked-out`` with its rank, ``filtered`` with the rule), its score parts (with
    ``score_parts``: Mnemosyne's ``recall(explain=True)``), each target's outcome (a target no
    candidate matches: its rank in a top-50 recall, or not retrieved within 50) and notes
    (``explain-mismatch`` when the reproduction differs from the prefetch).
    """
    db_path = Path(request["db_path"])
    apply_config_overrides(db_path.parent, request.get("config_overrides") or {})
    import mnemosyne.core.memory  # noqa: F401  (imported before the plugin, as Hermes does)

    plugin = plugin_version() if request.get("profile") == "hermes" else None
    explainer: PrefetchExplainer | ApproximateExplainer = (
        PrefetchExplainer(db_path, Path(os.environ["HERMES_HOME"]))
        if plugin
        else ApproximateExplainer(db_path, request)
    )
    explanations = []
    for query in request["queries"]:
        explained = explainer.explain(query, request)
        explained["candidates"] = [_public_candidate(c) for c in explained["candidates"]]
        explanations.append(explained)
        send_progress(1)
    return {
        "explanations": explanations,
        "profile_used": "hermes-approximate" if explainer.approximate else "hermes",
        "plugin_version": plugin,
        "depth": EXPLAIN_DEPTH,
    }
