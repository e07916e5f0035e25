"""A starter suite from the user's own memory (``mnemo-ops eval init``): questions whose answers are
known to be in it, so a fresh install has a gate that can fail.

Where the cases come from: the user's own statements, the live working memories of source ``user``
or written by the Hermes plugin as a ``[USER] ...`` turn. A statement becomes a case when it names a
specific fact (`database.facts.fact_items`): a number, a month or a weekday, or a name. That fact is
the case's answer and is held back from the query; the query is the statement's rarest other words
(by the full-text index's own document frequencies, `database.fts_query.salient_terms`), and the
statement's memory id is the case's ``relevant`` answer. A statement is used only when its query
words find it among the first `CHECK_K` rows of the full-text index (quoted tokens only), so every
case has an answer the words point at.

The database is opened read-only; nothing is written here. The suite is held out from tuning: its
sidecar (`places.sidecar_path`) says so, with where and when it was built.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from mnemo_ops import database
from mnemo_ops.database import facts
from mnemo_ops.database.fts_query import Vocabulary, match_expression, salient_terms, tokens
from mnemo_ops.evaluation.suite import Case
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now

DEFAULT_CASES = 20
"""Cases a starter suite holds at most (`build_starter`'s `max_cases`)."""
QUERY_TERMS = 6
"""Words a query takes from its statement at most."""
MIN_QUERY_TERMS = 2
"""A statement with fewer usable words besides its answer makes no case."""
CHECK_K = 10
"""A query must find its statement among this many full-text results."""
USER_PREFIX = "[USER] "
"""How the Hermes plugin marks a user turn in a working memory's content."""

_CALENDAR = {
    word
    for word in facts.DATE_WORDS
    if word not in {"yesterday", "today", "tomorrow", "tonight", "weekend", "ago", "last", "next"}
}
"""Date words specific enough to be an answer (months, weekdays, named days)."""
_ANSWER_ORDER = ("number", "date", "name")


@dataclasses.dataclass
class Starter:
    """The cases built, and how many statements were read and why others were left out."""

    cases: list[Case]
    statements: int = 0
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)

    def skip(self, reason: str) -> None:
        """Count a statement left out, by reason."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the cases (as a suite holds them), the statements read, the skips."""
        return {
            "cases": [case.to_dict() for case in self.cases],
            "statements": self.statements,
            "skipped": dict(sorted(self.skipped.items())),
        }


def answer_of(text: str) -> tuple[str, str] | None:
    """The fact `text` names that a case asks for, as (kind, word as written): its first number,
    else its first month or weekday, else its first name; None when it names none of these."""
    items = facts.fact_items(text)
    by_kind: dict[str, set[str]] = {}
    for item in items:
        kind, _, value = item.partition(":")
        if kind == "date" and value not in _CALENDAR:
            continue
        by_kind.setdefault(kind, set()).add(value)
    plain = facts.body(text)
    for kind in _ANSWER_ORDER:
        found = [
            match
            for value in by_kind.get(kind, ())
            if (match := re.search(rf"(?<!\w){re.escape(value)}(?!\w)", plain, re.IGNORECASE))
        ]
        if found:
            return kind, min(found, key=lambda match: match.start()).group(0)
    return None


def _statements(connection) -> list[tuple[str, str, float, str | None]]:
    """The live working memories the user stated: (id, text without the role prefix, importance,
    the session it was said in)."""
    rows = connection.execute(
        "SELECT id, content, COALESCE(importance, 0), session_id FROM working_memory "
        f"WHERE {database.live_condition()} "
        "AND (source = 'user' OR content LIKE ?) ORDER BY rowid",
        (local_timestamp(), USER_PREFIX + "%"),
    ).fetchall()
    return [
        (str(memory_id), facts.body(content), float(weight), session or None)
        for memory_id, content, weight, session in rows
    ]


def _found_by(connection, memory_id: str, terms: list[str]) -> bool:
    """True when the quoted `terms` find `memory_id` among the first CHECK_K full-text results."""
    expression = match_expression(terms)
    if expression is None:
        return False
    rows = connection.execute(
        "SELECT id FROM fts_working WHERE fts_working MATCH ? ORDER BY bm25(fts_working), rowid "
        "LIMIT ?",
        (expression, CHECK_K),
    ).fetchall()
    return any(str(row[0]) == memory_id for row in rows)


def build_starter(db_path: Path, max_cases: int = DEFAULT_CASES) -> Starter:
    """Read the database at `db_path` (read-only) and build up to `max_cases` cases (module docstring).

    The same database gives the same suite: statements naming more facts first, then the more
    important, then the older."""
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        has_index = "fts_working" in database.table_names(connection)
        vocabulary = Vocabulary(connection, "fts_working") if has_index else None
        statements = _statements(connection)
        starter = Starter(cases=[], statements=len(statements))
        ranked = sorted(
            enumerate(statements),
            key=lambda pair: (-facts.specificity(pair[1][1]), -pair[1][2], pair[0]),
        )
        queries: set[str] = set()
        for _, (memory_id, text, _weight, session) in ranked:
            if len(starter.cases) >= max_cases:
                starter.skip("over the case limit")
                continue
            answer = answer_of(text)
            if answer is None:
                starter.skip("names no number, date or name")
                continue
            kind, word = answer
            held_back = set(tokens(word))
            wanted = facts.content_words(text)
            candidates = [
                term
                for term in (
                    salient_terms(text, vocabulary, limit=32) if vocabulary else tokens(text)
                )
                if term not in held_back and term in wanted
            ][:QUERY_TERMS]
            if len(candidates) < MIN_QUERY_TERMS:
                starter.skip("too few words besides its answer")
                continue
            in_order = [term for term in tokens(text) if term in candidates]
            query = " ".join(in_order)
            if query in queries:
                starter.skip("the same query as another statement")
                continue
            if not has_index or not _found_by(connection, memory_id, in_order):
                starter.skip("its words do not find it in the full-text index")
                continue
            queries.add(query)
            starter.cases.append(
                Case(
                    id=f"starter-{memory_id}",
                    query=query,
                    relevant=(memory_id,),
                    category=kind,
                    answer=word,
                    # Asked where it was said: the Hermes plugin recalls only inside the
                    # conversation's own session, so a case with no session would measure a
                    # place the agent is never asked in.
                    session=session,
                )
            )
        return starter
    finally:
        connection.close()


def sidecar(db_path: Path, starter: Starter, suite_sha256: str | None) -> dict[str, Any]:
    """The suite's sidecar: a held-out starter suite, where and when it was built."""
    return {
        "format": 1,
        "held_out": True,
        "origin": "mnemo-ops eval init",
        "note": (
            "a starter suite built from the user's own statements: it measures recall; tune no "
            "setting on it (write your own cases to tune on, in another suite)"
        ),
        "created_at": isoformat(utc_now()),
        "db": str(db_path),
        "cases": len(starter.cases),
        "suite_sha256": suite_sha256,
    }
