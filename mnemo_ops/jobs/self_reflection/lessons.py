"""Lessons: what self-reflection learns, how one is named (its slot), phrased and weighed.

A lesson has a kind (`KINDS`), a slot (a short name, the same for every statement about the same thing,
so "tabs over spaces" and "spaces over tabs" meet in one slot and the newer one wins), a body (the
note itself, written about the user, never as the user's words), and its evidence: the sessions and
the memory, message and summary ids it came from.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

KINDS = ("preference", "procedure", "failure", "environment")
KIND_LABELS = {
    "preference": "the user's preference",
    "procedure": "a procedure that worked",
    "failure": "a failure and its fix",
    "environment": "an environment quirk",
}
KIND_SYNONYMS = {
    "preferences": "preference",
    "preference": "preference",
    "do": "preference",
    "dont": "preference",
    "procedure": "procedure",
    "procedures": "procedure",
    "steps": "procedure",
    "failure": "failure",
    "failures": "failure",
    "mistake": "failure",
    "environment": "environment",
    "environment quirk": "environment",
    "environment_quirk": "environment",
    "quirk": "environment",
    "quirks": "environment",
}
MAX_BODY_CHARS = 600
SLOT_WORDS = 3
SOURCE = "reflection"
VERACITY = "inferred"
TRUST_TIER = "DERIVED"
METADATA_MARKER = "_reflection"
METADATA_VERSION = 1

_STOPWORD_TEXT = """
a an and are as at be been but by can could did do does doing done for from had has have having he
her his i if in into is it its itself just me more most my no nor not of off on once only or other
our out over own same she should so some such than that the their them then there these they this
those through to too under until up very was we were what when where which while who whom why will
with would you your yours also really always never please want wants wanted prefer prefers preferred
rather like likes use uses using get gets got make makes let lets one any all each every us user
users instead don t s d ll ve re m avoid avoids hate hates dislike dislikes stand asks ask
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    """Lower-case word tokens (letters, digits, dots inside versions)."""
    return re.findall(r"[a-z0-9]+(?:\.[0-9]+)*", text.lower())


def salient(text: str) -> list[str]:
    """The words of `text` that carry its meaning (no stopwords, no single letters)."""
    return [word for word in words(text) if word not in STOPWORDS and len(word) > 1]


def slot_of(text: str) -> str:
    """A slot name from text: its first salient words, sorted (so word order does not matter)."""
    chosen = salient(text)[:SLOT_WORDS]
    return "-".join(sorted(chosen)) or "general"


def normalise_slot(text: str) -> str:
    """A slot a model proposed, in our form (lower-case words joined by dashes, at most 6)."""
    tokens = words(text)[:6]
    return "-".join(tokens)[:80] or "general"


def tidy(text: str, limit: int = MAX_BODY_CHARS) -> str:
    """One line, single spaces, ending with a full stop, at most `limit` characters."""
    line = " ".join(str(text).split()).strip()
    if len(line) > limit:
        line = line[: limit - 1].rsplit(" ", 1)[0] + "…"
    if line and line[-1] not in ".!?…":
        line += "."
    return line


@dataclasses.dataclass
class Lesson:
    """One lesson of a run, with its evidence (merged over every statement that supports it)."""

    kind: str
    slot: str
    body: str
    method: str
    sessions: set[str] = dataclasses.field(default_factory=set)
    memories: set[str] = dataclasses.field(default_factory=set)
    messages: set[str] = dataclasses.field(default_factory=set)
    summaries: set[str] = dataclasses.field(default_factory=set)
    steps: list[str] = dataclasses.field(default_factory=list)
    private: bool = False
    newest: str = ""
    """The newest evidence time (ISO, local), so a newer statement wins a slot."""

    @property
    def key(self) -> str:
        """``<kind>:<slot>``: what identifies a lesson across runs."""
        return f"{self.kind}:{self.slot}"

    @property
    def evidence(self) -> set[str]:
        """Every supporting statement's reference (``m:``, ``h:``, ``e:`` ids)."""
        return (
            {f"m:{memory}" for memory in self.memories}
            | {f"h:{message}" for message in self.messages}
            | {f"e:{summary}" for summary in self.summaries}
        )

    @property
    def confirmations(self) -> int:
        """How many statements support the lesson."""
        return len(self.evidence) or 1

    @property
    def importance(self) -> float:
        """From the evidence: 0.5, +0.1 per further session, +0.05 per further statement, at most 0.9."""
        sessions = max(1, len(self.sessions))
        statements = max(1, self.confirmations)
        return round(min(0.9, 0.5 + 0.1 * (sessions - 1) + 0.05 * (statements - sessions)), 3)

    def absorb(self, other: Lesson) -> None:
        """Add `other`'s evidence (the same lesson, stated again)."""
        self.sessions |= other.sessions
        self.memories |= other.memories
        self.messages |= other.messages
        self.summaries |= other.summaries
        self.private = self.private or other.private
        self.newest = max(self.newest, other.newest)
        if not self.steps and other.steps:
            self.steps = list(other.steps)

    def content(self) -> str:
        """The memory's text: the assistant's own note, saying what kind of lesson it is."""
        return f"Note to self ({KIND_LABELS[self.kind]}): {self.body}"

    def to_listing(self, action: str) -> dict[str, Any]:
        """What a run reports about the lesson (dry runs list these)."""
        return {
            "action": action,
            "kind": self.kind,
            "slot": self.slot,
            "body": self.body,
            "method": self.method,
            "sessions": sorted(self.sessions),
            "confirmations": self.confirmations,
        }


def add_evidence(lesson: Lesson, ref: str) -> None:
    """Record one evidence reference (``m:<memory id>``, ``h:<message id>``, ``e:<summary id>``)."""
    prefix, _, identifier = ref.partition(":")
    target = {"m": lesson.memories, "h": lesson.messages, "e": lesson.summaries}.get(prefix)
    if target is not None and identifier:
        target.add(identifier)
