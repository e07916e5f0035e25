"""Which entries of a block move into Mnemosyne: pure functions, no files, no database.

A block is worked on once it reaches ``high_water`` of its limit; entries then move until it is
under ``low_water``. The least valuable go first: the oldest first-seen (the file keeps no dates;
state.db does, see ``memory_blocks.entry_history``), earlier in the file on a tie (Hermes appends).
Never moved: an entry matching a keep pattern, the last entry of the file (the newest: the agent
may be working with it now, and the file is never emptied), and an entry excluded by the caller
(one already found not recallable).
"""

from __future__ import annotations

import dataclasses
import re

from mnemo_ops.memory_blocks.blocks import entry_key, usage

KEEP_PATTERN = "keep pattern"
LAST_ENTRY = "last entry"
EXCLUDED = "not recallable"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One entry that may move."""

    block: str
    key: str
    text: str
    position: int
    first_seen: str

    @property
    def chars(self) -> int:
        """The entry's own characters (its delimiter adds 3 more to the block)."""
        return len(self.text)


@dataclasses.dataclass
class BlockPlan:
    """What would happen to one block."""

    block: str
    limit: int
    entries: list[str]
    high_water: float
    low_water: float
    chosen: list[Candidate] = dataclasses.field(default_factory=list)
    held: dict[str, int] = dataclasses.field(default_factory=dict)
    """Entries that may not move, by reason."""

    @property
    def chars_before(self) -> int:
        """Characters now, as Hermes counts them."""
        return usage(self.entries)

    @property
    def chars_after(self) -> int:
        """Characters once the chosen entries are out."""
        moving = {candidate.text for candidate in self.chosen}
        return usage([entry for entry in self.entries if entry not in moving])

    @property
    def triggered(self) -> bool:
        """The block reached its high water mark."""
        return self.chars_before >= self.high_water * self.limit

    @property
    def reaches_low_water(self) -> bool:
        """Once the chosen entries are out, the block is under its low water mark."""
        return self.chars_after < self.low_water * self.limit

    def to_stats(self) -> dict:
        """The figures for the result and the dry run's listing."""
        return {
            "limit": self.limit,
            "chars_before": self.chars_before,
            "chars_after": self.chars_after,
            "percent_before": round(100 * self.chars_before / self.limit, 1),
            "percent_after": round(100 * self.chars_after / self.limit, 1),
            "entries": len(self.entries),
            "moving": [
                {"chars": c.chars, "first_seen": c.first_seen, "text": c.text} for c in self.chosen
            ],
            "held": dict(self.held),
        }


def compile_keep_patterns(patterns: list[str]) -> list[re.Pattern]:
    """The keep patterns as regular expressions (``re.search``); ValueError names a bad one."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as error:
            raise ValueError(
                f"keep pattern {pattern!r} is not a valid regular expression: {error}"
            ) from None
    return compiled


def choose(
    block: str,
    entries: list[str],
    limit: int,
    high_water: float,
    low_water: float,
    first_seen: dict[str, str],
    now: str,
    keep: list[re.Pattern],
    excluded: set[str] = frozenset(),
    new: frozenset[str] = frozenset(),
) -> BlockPlan:
    """The plan for one block. `first_seen` maps entry keys to ISO dates (an entry without one counts
    as first seen `now`); `new` holds the keys first seen by this run, which move after every entry
    seen before, even one recorded within the same second."""
    plan = BlockPlan(block, limit, list(entries), high_water, low_water)
    if not entries or not plan.triggered:
        return plan
    candidates = []
    for position, entry in enumerate(entries):
        key = entry_key(block, entry)
        if position == len(entries) - 1:
            reason = LAST_ENTRY
        elif any(pattern.search(entry) for pattern in keep):
            reason = KEEP_PATTERN
        elif key in excluded:
            reason = EXCLUDED
        else:
            candidates.append(Candidate(block, key, entry, position, first_seen.get(key) or now))
            continue
        plan.held[reason] = plan.held.get(reason, 0) + 1
    candidates.sort(
        key=lambda candidate: (candidate.first_seen, candidate.key in new, candidate.position)
    )
    remaining = list(entries)
    for candidate in candidates:
        if usage(remaining) < low_water * limit:
            break
        remaining.remove(candidate.text)
        plan.chosen.append(candidate)
    return plan
