"""What the agent receives per turn, and what recalling it costs: the figures beside the hits.

The Mnemosyne engine reports, for every query, how many lines were injected (how many of them were
canonical facts) and how many characters; for the first queries of a run also the cost of the
recall in units that do not depend on machine load (SQLite VM steps on every connection the
recall used, Python function calls) with CPU and wall time as side figures. This module sums them
into per-turn means, the form the eval, the guard and the benchmarks report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

COST_UNITS = ("sqlite_steps", "python_calls")
"""The load-independent cost figures (the guard's rule reads these)."""
SIDE_FIGURES = ("cpu_ms", "wall_ms")
"""Time figures: reported beside the units, never judged (they follow the machine's load)."""


@dataclasses.dataclass(frozen=True)
class Receives:
    """Per-turn means over a run's queries."""

    turns: int
    lines: float
    chars: float
    canonical_lines: float
    cost_turns: int
    cost: dict[str, float]

    def to_stats(self) -> dict[str, Any]:
        """The figures as a result's stats hold them."""
        return {
            "turns": self.turns,
            "lines_per_turn": round(self.lines, 3),
            "chars_per_turn": round(self.chars, 1),
            "canonical_lines_per_turn": round(self.canonical_lines, 3),
            "cost_per_turn": {name: round(value, 1) for name, value in self.cost.items()},
            "cost_turns": self.cost_turns,
        }


def summarize(turns: Sequence[dict[str, Any]]) -> Receives:
    """Per-turn means of the engine's turn figures (``turns`` of its reply)."""
    count = len(turns)
    measured = [turn["cost"] for turn in turns if turn.get("cost")]
    cost = (
        {
            name: sum(float(figures.get(name) or 0.0) for figures in measured) / len(measured)
            for name in (*COST_UNITS, *SIDE_FIGURES)
        }
        if measured
        else {}
    )
    return Receives(
        turns=count,
        lines=sum(turn.get("lines", 0) for turn in turns) / count if count else 0.0,
        chars=sum(turn.get("chars", 0) for turn in turns) / count if count else 0.0,
        canonical_lines=sum(turn.get("canonical", 0) for turn in turns) / count if count else 0.0,
        cost_turns=len(measured),
        cost=cost,
    )


def cost_increase(before: Receives, after: Receives) -> dict[str, float]:
    """The relative rise of each cost unit from `before` to `after` (0.25 = 25% more)."""
    rises = {}
    for name in COST_UNITS:
        old, new = before.cost.get(name), after.cost.get(name)
        if old is None or new is None:
            continue
        rises[name] = (new - old) / old if old > 0 else (0.0 if new == 0 else float("inf"))
    return rises
