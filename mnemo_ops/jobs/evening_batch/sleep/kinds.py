"""What kind of memory a row is (its daily retention), how confident it is, and whether it is exempt.

Mnemosyne has no "kind" of its own in the sense of the sleep design; it has `source` (free text; its
tool schema suggests preference, fact, insight, identity, task, ...), `memory_type` (its classifier:
fact, preference, decision, commitment, goal, event, instruction, relationship, context, learning,
observation, error, artifact, unknown) and `veracity`. The mapping, first rule that applies:

1. `source` names a kind: relationship, preference, fact, insight (also reflection, lesson), event.
2. Chatter (``database.facts.is_chatter``: greetings, thanks, fillers, emoji only) is an event,
   whatever Mnemosyne's classifier says: its classifier calls many short greetings ("hi there!",
   "ok thanks haha") a fact, and a fact's slow retention would keep them from ever decaying out.
3. `memory_type`: relationship -> relationship; preference -> preference; fact, decision, commitment,
   goal, instruction, artifact -> fact; learning, observation, error -> insight; event -> event.
4. Otherwise (context, unknown, anything else): what the user stated (`veracity` stated, or `source`
   user) is a fact; everything else (conversation turns, tool output) is an event.

Confidence: a number 0..1 under ``"confidence"`` in the row's metadata, else Mnemosyne's own veracity
weight (``mnemosyne.core.veracity_consolidation.VERACITY_WEIGHTS`` in 3.15: stated 1.0, unknown 0.8,
inferred 0.7, imported 0.6, tool 0.5).

Identity rows (exempt from decay and never archived): `source` identity, or metadata naming the kind
identity (``"surface_kind"`` or ``"kind"``, as Mnemosyne's shared-memory tool writes it). NREM's
summaries (`source` ``sleep-nrem``) are exempt too (``derived``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from mnemo_ops.database import facts

RELATIONSHIP = "relationship"
PREFERENCE = "preference"
FACT = "fact"
INSIGHT = "insight"
EVENT = "event"
KINDS = (RELATIONSHIP, PREFERENCE, FACT, INSIGHT, EVENT)

_BY_SOURCE = {
    "relationship": RELATIONSHIP,
    "preference": PREFERENCE,
    "fact": FACT,
    "insight": INSIGHT,
    "reflection": INSIGHT,
    "lesson": INSIGHT,
    "event": EVENT,
}
_BY_MEMORY_TYPE = {
    "relationship": RELATIONSHIP,
    "preference": PREFERENCE,
    "fact": FACT,
    "decision": FACT,
    "commitment": FACT,
    "goal": FACT,
    "instruction": FACT,
    "artifact": FACT,
    "learning": INSIGHT,
    "observation": INSIGHT,
    "error": INSIGHT,
    "event": EVENT,
}
VERACITY_CONFIDENCE = {
    "stated": 1.0,
    "inferred": 0.7,
    "tool": 0.5,
    "imported": 0.6,
    "unknown": 0.8,
}
"""Mnemosyne 3.15's VERACITY_WEIGHTS (a test checks them against the installed package)."""

IDENTITY = "identity"
PINNED = "pinned"
LINEAGE = "lineage"
DERIVED = "derived"
DERIVED_SOURCES = ("sleep-nrem",)
"""NREM's summaries (``sleep/nrem.py``): dated like their sources, so recall never lets them bury
them, they would look as old as their sources and be forgotten at once; they are the gist that
outlives the sources, so they do not decay (their prominence is capped instead)."""
"""Reasons a memory is exempt from decay (and never archived), in the order they are checked."""

METADATA_HINTS = ("confidence", "identity")
"""Metadata is parsed only when its text holds one of these words (most rows hold neither)."""


def kind_of(
    source: str | None,
    memory_type: str | None,
    veracity: str | None,
    text: str | None = None,
    chatter: Callable[[str], bool] | None = None,
) -> str:
    """The kind of a memory (module docstring). `text` is judged for chatter (a caller that reads
    only short texts passes None for the rest); `chatter` replaces that judgement (a function of
    the text: ``database.facts.is_chatter`` by default)."""
    by_source = _BY_SOURCE.get((source or "").strip().lower())
    if by_source:
        return by_source
    kind = _BY_MEMORY_TYPE.get((memory_type or "").strip().lower())
    if kind is None:
        stated = (veracity or "").strip().lower() == "stated"
        kind = FACT if stated or (source or "").strip().lower() == "user" else EVENT
    # Judged only when it would change the kind: the nightly pass reads every row, and most are
    # events already.
    if kind != EVENT and text is not None and (chatter or facts.is_chatter)(text):
        return EVENT
    return kind


def _metadata(text: str | None) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def confidence_of(veracity: str | None, metadata_json: str | None) -> float:
    """The confidence of a memory: its metadata's number, else its veracity's weight."""
    given = _metadata(metadata_json).get("confidence")
    if isinstance(given, (int, float)) and not isinstance(given, bool) and given == given:
        return min(1.0, max(0.0, float(given)))
    return VERACITY_CONFIDENCE.get((veracity or "unknown").strip().lower(), 0.8)


def is_identity(source: str | None, metadata_json: str | None) -> bool:
    """True for an identity row (module docstring)."""
    if (source or "").strip().lower() == IDENTITY:
        return True
    metadata = _metadata(metadata_json)
    return any(
        str(metadata.get(key, "")).strip().lower() == IDENTITY for key in ("surface_kind", "kind")
    )


def exemption(
    pinned: bool, source: str | None, metadata_json: str | None, holds_lineage: bool
) -> str | None:
    """Why a memory is exempt from decay and forgetting (pinned, identity, lineage, derived), or None."""
    if pinned:
        return PINNED
    if is_identity(source, metadata_json):
        return IDENTITY
    if holds_lineage:
        return LINEAGE
    if (source or "") in DERIVED_SOURCES:
        return DERIVED
    return None
