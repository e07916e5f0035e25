"""Reflection with a model: one composite prompt per batch of sessions, answered in a JSON shape.

The prompt asks what went well and badly, which do's and don'ts recur, which procedures emerged and
what to do differently, and wants the answer as::

    {"went_well": ["..."], "went_badly": ["..."], "do_differently": ["..."],
     "lessons": [{"kind": "preference|procedure|failure|environment", "slot": "short-name",
                  "lesson": "a note to yourself", "steps": ["..."], "evidence": ["m:...", "h:..."]}]}

`parse_lessons` validates it: a lesson of an unknown kind, without text, or citing nothing that was
sent is dropped; an answer that is not that shape at all (or whose every lesson was dropped) is
malformed, which the model layer asks again once and then skips.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from mnemo_ops.jobs.self_reflection.lessons import (
    KIND_SYNONYMS,
    Lesson,
    add_evidence,
    normalise_slot,
    slot_of,
    tidy,
)
from mnemo_ops.jobs.self_reflection.sessions import Session, Turn
from mnemo_ops.models import Evidence, MalformedAnswer, Request

MAX_LESSONS_PER_ANSWER = 20
SYSTEM = (
    "You are an AI assistant reviewing your own recent conversations with your user, to write short "
    "notes to yourself for the future. Write about the user in the third person ('The user prefers "
    "...'), never in the user's own words, and never copy credentials, keys or tokens. Reply with one "
    "JSON object only."
)
INSTRUCTIONS = """Read the sessions below (each line is one statement, tagged with its reference).
Think about: what went well and what went badly; which do's and don'ts recur; which procedures
emerged (steps that worked, in order); what you should do differently next time.

Then answer with this JSON object and nothing else:
{"went_well": [strings], "went_badly": [strings], "do_differently": [strings],
 "lessons": [{"kind": "preference" | "procedure" | "failure" | "environment",
              "slot": "a short name for what the lesson is about (2-4 words)",
              "lesson": "the note to yourself, one or two sentences",
              "steps": ["only for procedures: the steps in order"],
              "evidence": ["the references of the statements it comes from"]}]}

Kinds: preference = what the user wants and does not want; procedure = steps that worked, in order;
failure = what went wrong and what fixed it; environment = paths, versions, settings, machine facts.
Only lessons that the statements support; an empty list is a fine answer."""


@dataclasses.dataclass
class Batch:
    """Sessions that go into one prompt, as evidence."""

    sessions: list[Session]
    evidence: list[Evidence]

    @property
    def turns(self) -> dict[str, Turn]:
        """The batch's turns by reference."""
        return {turn.ref: turn for session in self.sessions for turn in session.turns}


@dataclasses.dataclass
class Reflection:
    """A validated answer: its lessons and the run's own assessment."""

    lessons: list[dict[str, Any]]
    went_well: list[str]
    went_badly: list[str]
    do_differently: list[str]


def batches(sessions: Iterable[Session], max_session_chars: int, batch_chars: int) -> list[Batch]:
    """Sessions grouped into prompts of about `batch_chars`, each session's text at most
    `max_session_chars` (its latest statements kept when it is longer)."""
    result: list[Batch] = []
    current = Batch([], [])
    size = 0
    for session in sessions:
        kept, used = [], 0
        for turn in reversed(session.turns):
            if used + len(turn.text) > max_session_chars and kept:
                break
            kept.append(turn)
            used += min(len(turn.text), max_session_chars)
        kept.reverse()
        if current.sessions and size + used > batch_chars:
            result.append(current)
            current, size = Batch([], []), 0
        current.sessions.append(dataclasses.replace(session, turns=kept))
        current.evidence += [turn.evidence(max_session_chars) for turn in kept]
        size += used
    if current.sessions:
        result.append(current)
    return result


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [
        " ".join(str(item).split())[:300]
        for item in value
        if isinstance(item, str) and item.strip()
    ]


def parse_lessons(parsed: Any, sent: frozenset[str]) -> Reflection:
    """Validate a reflection answer (see the module docstring); MalformedAnswer when unusable."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("lessons"), list):
        raise MalformedAnswer('the answer is not an object with a "lessons" list')
    lessons = []
    for entry in parsed["lessons"][:MAX_LESSONS_PER_ANSWER]:
        if not isinstance(entry, dict):
            continue
        kind = KIND_SYNONYMS.get(str(entry.get("kind", "")).strip().lower())
        text = entry.get("lesson")
        evidence = [
            ref for ref in entry.get("evidence") or [] if isinstance(ref, str) and ref in sent
        ]
        if kind is None or not isinstance(text, str) or not text.strip() or not evidence:
            continue
        slot = entry.get("slot")
        lessons.append(
            {
                "kind": kind,
                "slot": normalise_slot(slot)
                if isinstance(slot, str) and slot.strip()
                else slot_of(text),
                "lesson": tidy(text),
                "steps": _strings(entry.get("steps")) if kind == "procedure" else [],
                "evidence": sorted(set(evidence)),
            }
        )
    if parsed["lessons"] and not lessons:
        raise MalformedAnswer("no lesson had a known kind, a text and evidence that was sent")
    return Reflection(
        lessons=lessons,
        went_well=_strings(parsed.get("went_well")),
        went_badly=_strings(parsed.get("went_badly")),
        do_differently=_strings(parsed.get("do_differently")),
    )


def request_for(batch: Batch) -> Request:
    """The composite reflection prompt of one batch."""
    return Request(
        task="reflection",
        system=SYSTEM,
        instructions=INSTRUCTIONS,
        evidence=batch.evidence,
        validate=parse_lessons,
    )


def lessons_of(reflection: Reflection, batch: Batch, method: str) -> list[Lesson]:
    """The answer's lessons with their evidence resolved to sessions and ids."""
    turns = batch.turns
    result = []
    for entry in reflection.lessons:
        lesson = Lesson(
            kind=entry["kind"],
            slot=entry["slot"],
            body=entry["lesson"],
            method=method,
            steps=list(entry["steps"]),
        )
        for ref in entry["evidence"]:
            add_evidence(lesson, ref)
            turn = turns.get(ref)
            if turn is not None:
                lesson.sessions.add(turn.session_id)
                lesson.private = lesson.private or turn.private
                lesson.newest = max(lesson.newest, turn.timestamp)
        result.append(lesson)
    return result
