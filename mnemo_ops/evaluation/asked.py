"""Where a case is asked (its place) and what the agent receives there.

**Places.** A case's ``session`` names where it is asked (``evaluation.suite``):

- ``same-chat``: a named session that holds one of the case's evidence rows (the conversation
  where the user said it, asked again later in it);
- ``new-conversation``: ``session: new``, a brand-new conversation (a session key no row has),
  which the Hermes plugin gives only global rows and canonical facts;
- ``other-session``: a named session that holds none of its evidence rows (the next CLI session,
  another channel), or a case with no evidence ids;
- ``no-session``: no session named (recall across sessions; the Hermes profile asks in the agent's
  newest conversation).

**What is received.** What the engine returned for the case (the plugin's injected lines in the
Hermes profile, else the top k) **plus the memory blocks** (MEMORY.md and USER.md: Hermes puts
them in every prompt, so they are received in every place). From that:

- *evidence received*: a received line is one of the case's evidence rows (``relevant``) or a
  current row derived from one (``database.lineage``: ``summary_of``, metadata ``derived_from``, a
  ``mnemo:derives`` edge, a canonical fact of source ``auto:<id>``), or a block entry holds an
  evidence row's facts (``database.facts.survivor``: every name, number and date and nearly every
  content word), or, for a case without evidence ids, a line holds an expected substring;
- *answer received*: every content word of the case's ``answer`` is in the received text;
- *lines and characters per turn*: the injected lines and characters, plus the blocks' entries
  and characters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemo_ops import database
from mnemo_ops.database import facts, lineage
from mnemo_ops.evaluation.metrics import Retrieved
from mnemo_ops.evaluation.suite import Case, Suite

SAME_CHAT = "same-chat"
NEW_PLACE = "new-conversation"
OTHER_SESSION = "other-session"
NO_SESSION = "no-session"
PLACES = (SAME_CHAT, NEW_PLACE, OTHER_SESSION, NO_SESSION)
"""The places, in the order reports list them."""
SHARES = ("evidence_received", "answer_received")
"""The shares a place reports beside recall (the guard judges them too)."""


@dataclasses.dataclass(frozen=True)
class Standing:
    """The memory blocks every prompt carries: the entries of MEMORY.md and USER.md, and their
    characters as Hermes counts them."""

    entries: tuple[str, ...] = ()
    chars: int = 0

    @property
    def lines(self) -> int:
        """One line per entry."""
        return len(self.entries)

    def to_stats(self) -> dict[str, int]:
        """The blocks' figures for reports."""
        return {"entries": self.lines, "chars": self.chars}


@dataclasses.dataclass
class Evidence:
    """What the database says of a suite's evidence rows: their session, their text and the
    current rows derived from them."""

    sessions: dict[str, str | None] = dataclasses.field(default_factory=dict)
    texts: dict[str, str] = dataclasses.field(default_factory=dict)
    derivations: dict[str, set[str]] = dataclasses.field(default_factory=dict)

    def derived(self, origins: Sequence[str]) -> set[str]:
        """The current rows derived from any of `origins`."""
        return lineage.derived_from_any(self.derivations, origins)


def read_evidence(db_path: Path, suite: Suite) -> Evidence:
    """The sessions, texts and derived rows of every evidence row `suite` names (closed rows too:
    where a fact was said does not change when its row is archived)."""
    wanted = sorted({memory_id for case in suite.cases for memory_id in case.relevant})
    evidence = Evidence()
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        tables = database.table_names(connection)
        for table in ("working_memory", "episodic_memory"):
            if table not in tables:
                continue
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ", ".join("?" for _ in chunk)
                for memory_id, session_id, content in connection.execute(
                    f"SELECT id, session_id, content FROM {table} WHERE id IN ({marks})", chunk
                ):
                    evidence.sessions.setdefault(str(memory_id), session_id)
                    evidence.texts.setdefault(str(memory_id), content or "")
        evidence.derivations = lineage.derivations(connection)
    finally:
        connection.close()
    return evidence


def place_of(case: Case, evidence: Evidence) -> str:
    """The place `case` is asked in (see the module docstring)."""
    if case.session is None:
        return NO_SESSION
    if case.in_new_conversation:
        return NEW_PLACE
    if any(evidence.sessions.get(memory_id) == case.session for memory_id in case.relevant):
        return SAME_CHAT
    return OTHER_SESSION


@dataclasses.dataclass(frozen=True)
class CaseReceived:
    """What one case's turn gave the agent, judged against the case."""

    place: str
    evidence: bool | None
    """None: the case names no evidence ids and no expected text."""
    via: str | None
    """How the evidence arrived: ``row``, ``derived``, ``block`` or ``expect``."""
    answer: bool | None
    """None: the case has no answer."""
    lines: int
    chars: int
    """Injected lines and characters (the blocks come on top, the same for every turn)."""

    def to_stats(self) -> dict[str, Any]:
        """The case's figures for reports."""
        return dataclasses.asdict(self)


def item_ids(item: Retrieved) -> set[str]:
    """The ids a received line stands for: its own, and each of a canonical fact's origins (the
    engine names a fact's line by its ``auto:`` sources, ``a,b``)."""
    return {item.id, *lineage.split_ids(item.id)}


def _evidence_via(
    case: Case, items: Sequence[Retrieved], standing: Standing, evidence: Evidence
) -> str | None:
    """How the case's evidence reached the agent, or None when it did not."""
    wanted = set(case.relevant)
    received = [item_ids(item) for item in items]
    if any(ids & wanted for ids in received):
        return "row"
    derived = evidence.derived(case.relevant) if wanted else set()
    if any(ids & derived for ids in received):
        return "derived"
    for memory_id in case.relevant:
        text = evidence.texts.get(memory_id)
        if text and facts.survivor(
            text, [(str(number), entry) for number, entry in enumerate(standing.entries)]
        ):
            return "block"
    if not wanted:
        texts = [item.content or "" for item in items] + list(standing.entries)
        if any(
            expected.casefold() in text.casefold() for expected in case.expect for text in texts
        ):
            return "expect"
    return None


def faithful_stand_ins(
    case: Case, items: Sequence[Retrieved], evidence: Evidence
) -> list[Retrieved]:
    """`items` with each current row derived from one of the case's evidence rows, and holding
    every fact and nearly every content word of it (``facts.survivor``), named as that evidence
    row: a graduated or distilled row that states the evidence in full is the evidence for the
    case's recall figures. A summary that keeps only part of it (a 500-character cut) is not; an
    item whose evidence row is itself in `items` keeps its own id."""
    wanted = list(dict.fromkeys(case.relevant))
    if not wanted:
        return list(items)
    present = {item.id for item in items}
    derived = {origin: evidence.derived([origin]) for origin in wanted}
    replaced: list[Retrieved] = []
    for item in items:
        if item.id not in wanted:
            for origin in wanted:
                text = evidence.texts.get(origin)
                if (
                    origin not in present
                    and item.id in derived[origin]
                    and facts.content_words(text)  # chatter states nothing a row could repeat
                    and facts.survivor(text, [(item.id, item.content)])
                ):
                    present.add(origin)
                    item = Retrieved(id=origin, content=item.content)
                    break
        replaced.append(item)
    return replaced


def answer_words(answer: str | None) -> set[str]:
    """The words of an answer that must be received: its content words (all its words when it has
    none, e.g. "yes")."""
    return facts.content_words(answer) or set(facts.words(answer))


def received_for(
    case: Case,
    items: Sequence[Retrieved],
    turn: dict[str, Any] | None,
    standing: Standing,
    evidence: Evidence,
) -> CaseReceived:
    """Judge what `case`'s turn gave the agent: `items` (what the engine returned, cut to the
    case's k), the engine's `turn` figures (injected lines and characters) and the blocks."""
    via = _evidence_via(case, items, standing, evidence)
    answer = None
    if case.answer is not None and answer_words(case.answer):
        held: set[str] = set()
        for text in [item.content for item in items] + list(standing.entries):
            held.update(facts.words(text))
        answer = answer_words(case.answer) <= held
    lines = int(turn["lines"]) if turn and "lines" in turn else len(items)
    # An engine that formats no injected text (plain recall, the builtin engine) is counted by
    # the contents it returned.
    chars = (
        int(turn["chars"])
        if turn and turn.get("chars")
        else sum(len(item.content or "") for item in items)
    )
    return CaseReceived(
        place=place_of(case, evidence),
        evidence=None if via is None and not (case.relevant or case.expect) else via is not None,
        via=via,
        answer=answer,
        lines=lines,
        chars=chars,
    )


def _share(values: list[bool | None]) -> tuple[float | None, int]:
    counted = [value for value in values if value is not None]
    return (round(sum(counted) / len(counted), 6) if counted else None), len(counted)


def summarize(
    received: Sequence[CaseReceived], recalls: Sequence[float], k_name: str, standing: Standing
) -> dict[str, Any]:
    """The figures of a group of cases: how many, recall (``k_name``, e.g. ``recall@10``), evidence
    and answer received (shares of the cases that can have them, None when none can), and lines and
    characters per turn, the blocks included (``injected_*``: without them)."""
    count = len(received)
    evidence, evidence_cases = _share([item.evidence for item in received])
    answer, answer_cases = _share([item.answer for item in received])
    injected_lines = sum(item.lines for item in received) / count if count else 0.0
    injected_chars = sum(item.chars for item in received) / count if count else 0.0
    return {
        "cases": count,
        k_name: round(sum(recalls) / count, 6) if count else 0.0,
        "evidence_received": evidence,
        "evidence_cases": evidence_cases,
        "answer_received": answer,
        "answer_cases": answer_cases,
        "lines_per_turn": round(injected_lines + standing.lines, 3),
        "chars_per_turn": round(injected_chars + standing.chars, 1),
        "injected_lines_per_turn": round(injected_lines, 3),
        "injected_chars_per_turn": round(injected_chars, 1),
    }


def per_place(
    received: Sequence[CaseReceived], recalls: Sequence[float], k_name: str, standing: Standing
) -> dict[str, dict[str, Any]]:
    """`summarize` for each place that has cases, in the order of `PLACES`."""
    places: dict[str, dict[str, Any]] = {}
    for place in PLACES:
        chosen = [index for index, item in enumerate(received) if item.place == place]
        if chosen:
            places[place] = summarize(
                [received[index] for index in chosen],
                [recalls[index] for index in chosen],
                k_name,
                standing,
            )
    return places
