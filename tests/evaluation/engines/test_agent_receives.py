"""What the agent receives per turn and what it costs, as the Mnemosyne engine reports them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mnemo_ops.evaluation.engines.base import Query
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
from mnemo_ops.evaluation.receives import summarize
from mnemo_ops.evaluation.suite import load_suite

HAS_PLUGIN = (
    subprocess.run(
        [sys.executable, "-c", "import mnemosyne_hermes"], capture_output=True, timeout=120
    ).returncode
    == 0
)


def _queries(layout, count: int = 24) -> list[Query]:
    suite = load_suite(layout.state_dir / "eval" / "suite.jsonl")
    return [Query(text=case.query, k=10, session=case.session) for case in suite.cases[:count]]


def _busy_cores():
    """One process spinning per core, as an agent's machine rarely idles."""
    spin = "while True: pass"
    return [
        subprocess.Popen([sys.executable, "-c", spin]) for _ in range(max(2, os.cpu_count() or 2))
    ]


@pytest.mark.heavy
@pytest.mark.parametrize("profile", ["plain", "hermes"])
def test_the_cost_counts_are_the_same_whatever_the_machine_is_doing(conversations, profile):
    queries = _queries(conversations)

    def counts() -> list[tuple[int, int]]:
        engine = MnemosyneEngine(
            conversations.db_path,
            profile=profile,
            hermes_home=conversations.directory / "hermes",
            cost_sample=len(queries),
        )
        engine.recall_many(queries)
        assert all("cost" in turn for turn in engine.last_turns)
        return [
            (turn["cost"]["sqlite_steps"], turn["cost"]["python_calls"])
            for turn in engine.last_turns
        ]

    idle = counts()
    spinners = _busy_cores()
    try:
        loaded = counts()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert idle == loaded
    assert all(steps > 0 and calls > 0 for steps, calls in idle)


def test_receives_reports_lines_characters_and_cost_per_turn(conversations):
    engine = MnemosyneEngine(
        conversations.db_path,
        profile="hermes",
        hermes_home=conversations.directory / "hermes",
        cost_sample=5,
    )
    queries = _queries(conversations, 12)
    ranked = engine.recall_many(queries)
    assert engine.profile_used == ("hermes" if HAS_PLUGIN else "hermes-approximate")
    receives = summarize(engine.last_turns)
    assert receives.turns == 12 and receives.cost_turns == 5
    assert all(len(items) <= 5 for items in ranked)  # the plugin injects five lines at most
    assert receives.lines == sum(len(items) for items in ranked) / 12
    if receives.lines:
        assert receives.chars > 0
    stats = receives.to_stats()
    assert set(stats["cost_per_turn"]) == {"sqlite_steps", "python_calls", "cpu_ms", "wall_ms"}


def test_the_approximation_is_kept_when_asked_for(conversations):
    engine = MnemosyneEngine(
        conversations.db_path,
        profile="hermes-approximate",
        hermes_home=conversations.directory / "hermes",
    )
    engine.recall_many(_queries(conversations, 3))
    assert engine.profile_used == "hermes-approximate"
    assert engine.describe()["options"]["profile_used"] == "hermes-approximate"
