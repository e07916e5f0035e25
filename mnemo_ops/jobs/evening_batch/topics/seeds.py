"""The seed map: per topic, the memories the agent should see first on it.

Order: canonical-backed memories first (a current canonical fact stands behind them), then higher
importance, then more recalls, then more recent; the map key breaks remaining ties, so the order is
the same for the same input.
"""

from __future__ import annotations

import heapq
from typing import Any

from mnemo_ops.jobs.evening_batch.topics.memories import LiveMemory

PREVIEW_CHARS = 120


def _strength(memory: LiveMemory, backed: set[str]) -> tuple:
    return (
        memory.key in backed,
        memory.importance,
        memory.recall_count,
        memory.timestamp,
        memory.key,
    )


def build_seed_map(
    assignments: dict[str, str | None],
    memories: dict[str, LiveMemory],
    backed: set[str],
    per_topic: int,
) -> dict[str, list[dict[str, Any]]]:
    """The strongest `per_topic` live members of every topic (from memory key -> topic), strongest first."""
    members: dict[str, list[LiveMemory]] = {}
    for key, label in assignments.items():
        if label is not None and key in memories:
            members.setdefault(label, []).append(memories[key])
    seeds: dict[str, list[dict[str, Any]]] = {}
    for label in sorted(members):
        live = members[label]
        strongest = heapq.nlargest(per_topic, live, key=lambda memory: _strength(memory, backed))
        seeds[label] = [
            {
                "key": memory.key,
                "kind": memory.kind,
                "memory_id": memory.memory_id,
                "canonical": memory.key in backed,
                "importance": memory.importance,
                "recall_count": memory.recall_count,
                "timestamp": memory.timestamp,
                "preview": " ".join(memory.content.split())[:PREVIEW_CHARS],
            }
            for memory in strongest
        ]
    return seeds


def seed_changes(
    stored: dict[str, list[dict[str, Any]]], fresh: dict[str, list[dict[str, Any]]]
) -> tuple[set[str], set[str]]:
    """Topics whose seed list is new or different, and topics whose seeds must go."""

    def signature(rows: list[dict[str, Any]]) -> list[tuple]:
        return [
            (
                row["key"],
                bool(row["canonical"]),
                float(row["importance"]),
                int(row["recall_count"]),
                row["timestamp"],
                row["preview"],
            )
            for row in rows
        ]

    changed = {
        label
        for label, rows in fresh.items()
        if signature(rows) != signature(stored.get(label, []))
    }
    removed = set(stored) - set(fresh)
    return changed, removed
