"""Which entries move: the least valuable first, never a kept one or the last, until under low water."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mnemo_ops.jobs.memory_block_migrate.plan import choose, compile_keep_patterns
from mnemo_ops.memory_blocks.blocks import entry_key, usage

NOW = "2026-12-03T13:00:00+00:00"


def _entries(count: int, size: int = 97) -> list[str]:
    return [f"entry {number:02d} " + "x" * (size - 9) for number in range(count)]


def test_nothing_moves_under_the_high_water_mark():
    entries = _entries(10)  # 10 * 97 + 9 * 3 = 997 of 1,375: 72.5%
    plan = choose("USER.md", entries, 1375, 0.8, 0.6, {}, NOW, [])
    assert not plan.triggered and plan.chosen == []


def test_oldest_first_seen_moves_first_then_file_order_until_under_low_water():
    entries = _entries(12)  # 1,197 of 1,375: 87%
    first_seen = {entry_key("USER.md", entries[5]): "2026-01-01T00:00:00+00:00"}
    first_seen |= {entry_key("USER.md", e): "2026-06-01T00:00:00+00:00" for e in entries[6:9]}
    plan = choose("USER.md", entries, 1375, 0.8, 0.6, first_seen, NOW, [])
    assert [c.text for c in plan.chosen] == [entries[5], entries[6], entries[7], entries[8]]
    assert plan.chars_after < 0.6 * 1375 <= usage(entries) - 3 * 100
    assert plan.reaches_low_water


def test_an_entry_new_this_run_moves_after_older_ones_recorded_within_the_same_second():
    entries = _entries(12)
    # The nightly audit recorded every entry but the first one in this very second; the first
    # is new this run, stamped the same second, and written at the top of the file by the agent.
    first_seen = {entry_key("USER.md", e): NOW for e in entries}
    new = frozenset({entry_key("USER.md", entries[0])})
    plan = choose("USER.md", entries, 1375, 0.8, 0.6, first_seen, NOW, [], new=new)
    assert entries[0] not in [c.text for c in plan.chosen]
    assert [c.text for c in plan.chosen] == entries[1:5]


def test_keep_patterns_and_the_last_entry_never_move():
    entries = [
        "IMPORTANT never forget this " + "y" * 300,
        *_entries(8, 120),
        "the newest entry " + "z" * 100,
    ]
    keep = compile_keep_patterns([r"^IMPORTANT\b"])
    plan = choose("MEMORY.md", entries, 1375, 0.8, 0.6, {}, NOW, keep)
    moving = {c.text for c in plan.chosen}
    assert entries[0] not in moving and entries[-1] not in moving
    assert plan.held == {"keep pattern": 1, "last entry": 1}
    assert plan.reaches_low_water


def test_excluded_entries_are_skipped_and_a_block_may_stay_high():
    entries = _entries(13)
    excluded = {entry_key("USER.md", e) for e in entries[:-2]}
    plan = choose("USER.md", entries, 1375, 0.8, 0.6, {}, NOW, [], excluded=excluded)
    assert [c.text for c in plan.chosen] == [entries[-2]]
    assert not plan.reaches_low_water and plan.held["not recallable"] == 11


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=30),
    low=st.floats(min_value=0.05, max_value=0.7),
)
def test_a_plan_never_moves_the_last_entry_and_stops_once_under_low_water(sizes, low):
    entries = [f"{index}:" + "e" * size for index, size in enumerate(sizes)]
    plan = choose("MEMORY.md", entries, 1000, 0.75, low, {}, NOW, [])
    if not plan.triggered:
        assert plan.chosen == []
        return
    assert entries[-1] not in {c.text for c in plan.chosen}
    if plan.chosen:  # the last move was still needed: before it the block was not under low water
        before_last = usage([e for e in entries if e not in {c.text for c in plan.chosen[:-1]}])
        assert before_last >= low * 1000
