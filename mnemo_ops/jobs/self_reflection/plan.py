"""From the run's lessons to the writes: what is new, what reinforces, what supersedes (read-only).

Rules (``self_reflection.similarity`` is the rapidfuzz token-sort ratio, 0..100, at which two
lesson bodies say the same thing):

- Within a run, statements of one lesson merge (their evidence adds up). Two lessons of one slot whose
  bodies differ: the one with the newer evidence wins.
- Against the stored lessons (live rows with source ``reflection``): a lesson whose slot holds a
  lesson with a similar body, or whose body is similar to a stored lesson of its kind in another
  slot, **reinforces** it (its new evidence ids are added, which is a confirmation each) instead of
  adding a row; with nothing new it changes nothing. A lesson whose slot holds a lesson with a
  different body **supersedes** it: that is a deterministic contradiction (same slot, different
  body), so the old row is closed (``valid_until``, ``superseded_by`` the new one). Lessons that
  merely look alike stay, both of them.
- Every current lesson has a canonical fact in ``lesson:<kind>``, slot name, body the lesson; one
  whose body differs is superseded the canonical way (old row closed, version + 1).
- Two live rows in one slot (a run killed between storing a lesson and closing the one it replaces)
  are repaired: the older is closed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

import apsw
from rapidfuzz import fuzz

from mnemo_ops import database
from mnemo_ops.jobs.self_reflection.lessons import METADATA_MARKER, METADATA_VERSION, SOURCE, Lesson

NEW = "(new)"
"""The memory id of a lesson this plan stores (known once it is written)."""


def similar(first: str, second: str) -> float:
    """How alike two lesson bodies are (rapidfuzz token-sort ratio, 0..100, case-insensitive)."""
    return fuzz.token_sort_ratio(first.lower(), second.lower())


@dataclasses.dataclass
class Stored:
    """A lesson already in the database (a live row with source ``reflection``)."""

    memory_id: str
    kind: str
    slot: str
    body: str
    timestamp: str
    evidence: set[str]

    @property
    def key(self) -> str:
        """``<kind>:<slot>``."""
        return f"{self.kind}:{self.slot}"


def stored_lessons(connection: apsw.Connection, now: str) -> list[Stored]:
    """Every live stored lesson, oldest first."""
    rows = database.fetch_dicts(
        connection,
        "SELECT id, metadata_json, timestamp FROM working_memory WHERE source = ? AND "
        f"{database.live_condition(now='?')} AND json_valid(metadata_json) AND "
        "json_extract(metadata_json, '$.\"' || ? || '\".key') IS NOT NULL ORDER BY timestamp, id",
        (SOURCE, now, METADATA_MARKER),
    )
    found = []
    for row in rows:
        metadata = json.loads(row["metadata_json"])
        marker = metadata.get(METADATA_MARKER) or {}
        kind, _, slot = str(marker.get("key", "")).partition(":")
        evidence = (
            {f"m:{value}" for value in metadata.get("memories") or []}
            | {f"h:{value}" for value in metadata.get("messages") or []}
            | {f"e:{value}" for value in metadata.get("summaries") or []}
        )
        found.append(
            Stored(
                row["id"], kind, slot, str(marker.get("body", "")), row["timestamp"] or "", evidence
            )
        )
    return found


def current_facts(connection: apsw.Connection, owner: str) -> dict[tuple[str, str], str]:
    """(category, name) -> body of the owner's current ``lesson:*`` canonical facts."""
    if "canonical_facts" not in database.table_names(connection):
        return {}
    return {
        (category, name): body
        for category, name, body in connection.execute(
            "SELECT category, name, body FROM canonical_facts WHERE owner_id = ? AND "
            "category LIKE 'lesson:%' AND valid_until IS NULL",
            (owner,),
        ).fetchall()
    }


def merge(lessons: Iterable[Lesson], threshold: float) -> list[Lesson]:
    """The run's lessons with repeated statements merged (see the module docstring)."""
    by_key: dict[str, Lesson] = {}
    for lesson in sorted(lessons, key=lambda item: (item.newest, item.key, item.body)):
        existing = by_key.get(lesson.key)
        if existing is not None:
            if similar(existing.body, lesson.body) >= threshold:
                existing.absorb(lesson)
            else:
                by_key[lesson.key] = lesson  # the newer statement wins its slot
            continue
        twin = next(
            (
                other
                for other in by_key.values()
                if other.kind == lesson.kind and similar(other.body, lesson.body) >= threshold
            ),
            None,
        )
        if twin is not None:
            twin.absorb(lesson)
        else:
            by_key[lesson.key] = lesson
    return list(by_key.values())


@dataclasses.dataclass
class Plan:
    """The writes of a run, in order, and what they amount to."""

    actions: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    listing: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    counts: dict[str, int] = dataclasses.field(
        default_factory=lambda: {
            "lessons_stored": 0,
            "lessons_reinforced": 0,
            "lessons_superseded": 0,
            "canonical_created": 0,
            "canonical_updated": 0,
        }
    )
    unchanged: int = 0


def _canonical(
    plan: Plan, facts: dict[tuple[str, str], str], kind: str, slot: str, body: str
) -> dict[str, Any] | None:
    category = f"lesson:{kind}"
    current = facts.get((category, slot))
    if current == body:
        return None
    plan.counts["canonical_created" if current is None else "canonical_updated"] += 1
    facts[(category, slot)] = body
    return {"category": category, "name": slot, "body": body}


def metadata_for(lesson: Lesson, week: str, now: str) -> dict[str, Any]:
    """The metadata a new lesson row is stored with."""
    return {
        "method": lesson.method,
        "kind": lesson.kind,
        "slot": lesson.slot,
        "sessions": sorted(lesson.sessions),
        "memories": sorted(lesson.memories),
        "messages": sorted(lesson.messages),
        "summaries": sorted(lesson.summaries),
        "confirmations": lesson.confirmations,
        "steps": lesson.steps,
        "private": lesson.private,
        "first_learned": now,
        "last_confirmed": now,
        "weeks": [week],
        METADATA_MARKER: {"version": METADATA_VERSION, "key": lesson.key, "body": lesson.body},
    }


def make_plan(
    lessons: list[Lesson],
    stored: list[Stored],
    facts: dict[tuple[str, str], str],
    threshold: float,
    week: str,
    now: str,
) -> Plan:
    """The writes that bring the database to the run's lessons (nothing for what is there already)."""
    plan = Plan()
    current: dict[str, Stored] = {}
    for row in stored:  # oldest first: the newest row of a slot is its current lesson
        previous = current.get(row.key)
        if previous is not None:
            plan.actions.append(
                {"op": "close", "memory_id": previous.memory_id, "superseded_by": row.memory_id}
            )
            plan.counts["lessons_superseded"] += 1
        current[row.key] = row
    for row in current.values():
        fact = _canonical(plan, facts, row.kind, row.slot, row.body)
        if fact is not None:
            plan.actions.append({"op": "canonical", "memory_id": row.memory_id, **fact})
    for lesson in lessons:
        same_slot = current.get(lesson.key)
        if same_slot is not None and similar(same_slot.body, lesson.body) >= threshold:
            target = same_slot
        elif same_slot is None:
            target = next(
                (
                    row
                    for row in current.values()
                    if row.kind == lesson.kind and similar(row.body, lesson.body) >= threshold
                ),
                None,
            )
        else:
            target = None
        if target is not None:
            new = lesson.evidence - target.evidence
            if not new or target.memory_id == NEW:
                plan.unchanged += 1
                plan.listing.append(lesson.to_listing("unchanged"))
                continue
            target.evidence |= new
            plan.actions.append(
                {
                    "op": "reinforce",
                    "memory_id": target.memory_id,
                    "sessions": sorted(lesson.sessions),
                    "evidence": sorted(new),
                    "importance": lesson.importance,
                    "week": week,
                }
            )
            plan.counts["lessons_reinforced"] += 1
            plan.listing.append(lesson.to_listing("reinforce"))
            continue
        closes = []
        if same_slot is not None:  # same slot, different body: the newer lesson supersedes
            closes.append(same_slot.memory_id)
            plan.counts["lessons_superseded"] += 1
        plan.counts["lessons_stored"] += 1
        plan.actions.append(
            {
                "op": "store",
                "key": lesson.key,
                "content": lesson.content(),
                "importance": lesson.importance,
                "metadata": metadata_for(lesson, week, now),
                "closes": closes,
                "canonical": _canonical(plan, facts, lesson.kind, lesson.slot, lesson.body),
            }
        )
        plan.listing.append(lesson.to_listing("supersede" if closes else "store"))
        current[lesson.key] = Stored(
            "(new)", lesson.kind, lesson.slot, lesson.body, now, set(lesson.evidence)
        )
    return plan
