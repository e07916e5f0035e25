"""The guard's cost rule: a change may not make the agent's per-turn recall cost much more.

Cost is counted in SQLite VM steps and Python calls (the same for the same data, whatever the
machine is doing); a rise past ``guard.max_cost_increase`` and past the unit's floor is refused, and
a job that names a ``costly_option`` (memory-maintain: ``link``) runs without that part instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.samples import hermes_conversations
from devtools.samples.realistic_memories import add_realistic_memories
from mnemo_ops import database
from mnemo_ops.evaluation.receives import Receives
from mnemo_ops.guard import probes
from mnemo_ops.guard.measure import Measurement
from mnemo_ops.guard.verdict import decide
from mnemo_ops.settings.sections import GuardOptions
from tests.conftest import run_cli

HAS_PLUGIN = (
    subprocess.run(
        [sys.executable, "-c", "import mnemosyne_hermes"], capture_output=True
    ).returncode
    == 0
)
PROBES = [probes.Probe(f"m{i}", "s", "c", ("a", "b", "c"), ("d",)) for i in range(4)]


def _measured(steps: float, calls: float) -> Measurement:
    return Measurement(
        "hermes",
        5,
        {probe.memory_id: 1 for probe in PROBES},
        receives=Receives(
            turns=4,
            lines=3,
            chars=300,
            canonical_lines=0,
            cost_turns=4,
            cost={"sqlite_steps": steps, "python_calls": calls, "cpu_ms": 1.0, "wall_ms": 1.0},
        ),
    )


def _decide(before: Measurement, after: Measurement, **rules) -> object:
    live = {probe.memory_id for probe in PROBES}
    return decide(PROBES, before, after, live, GuardOptions(**rules))


def test_a_rise_past_the_limit_and_the_floor_is_refused_and_only_for_cost():
    verdict = _decide(_measured(400_000, 90_000), _measured(900_000, 95_000))
    assert not verdict.accepted and verdict.refused_for_cost_only
    assert verdict.problems == [
        "the agent's recall costs 125% more sqlite steps per turn (400000 -> 900000; at most 25% "
        "allowed)"
    ]
    assert verdict.to_stats()["cost"]["increase"]["sqlite_steps"] == 1.25


def test_a_rise_under_the_floor_or_the_limit_is_accepted():
    small_home = _decide(_measured(4_000, 6_000), _measured(19_000, 20_000))  # 4x, a millisecond
    assert small_home.accepted
    within_limit = _decide(_measured(2_000_000, 0), _measured(2_400_000, 0))  # +20%
    assert within_limit.accepted
    # With the floors at 0 the small home's rise is judged, and refused.
    strict = _decide(
        _measured(4_000, 6_000),
        _measured(19_000, 20_000),
        cost_floor_sqlite_steps=0,
        cost_floor_python_calls=0,
    )
    assert not strict.accepted and len(strict.problems) == 2


def test_a_recall_drop_is_not_a_cost_only_refusal():
    before, after = _measured(400_000, 0), _measured(900_000, 0)
    after.ranks["m0"] = None
    after.ranks["m1"] = None
    verdict = _decide(before, after, max_newly_failing=0)
    assert not verdict.accepted and not verdict.refused_for_cost_only


def _orphan_home(sample, tmp_path: Path):
    """The sample home with realistic orphans to link: linking adds edges that every recall
    candidate pays for (Mnemosyne counts a candidate's edges with a full scan of graph_edges)."""
    add_realistic_memories(sample.db_path, 3_000, seed=26)
    config = tmp_path / "config.yaml"
    # Floors at 0: on this small home the rise is a fraction of a millisecond, but the rule is
    # the same one a large home meets at the default floors. Recall's tolerances are wide, so
    # that the cost is what the guard judges here.
    config.write_text(
        "guard:\n  probes: 40\n  cost_floor_sqlite_steps: 0\n  cost_floor_python_calls: 0\n"
        "  recall_tolerance: 0.2\n  mrr_tolerance: 0.2\n  max_newly_failing: 20\n"
        "retrieval_eval:\n  profile: plain\n",
        encoding="utf-8",
    )
    return config


def _edges(db_path: Path) -> int:
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return connection.execute("SELECT count(*) FROM graph_edges").fetchone()[0]
    finally:
        connection.close()


@pytest.mark.heavy
def test_memory_maintain_defers_linking_that_costs_the_agent_too_much(sample, tmp_path):
    config = _orphan_home(sample, tmp_path)
    edges_before = _edges(sample.db_path)
    completed = run_cli(
        sample, "--config", str(config), "--json", "run", "memory-maintain", timeout=900
    )
    result = json.loads(completed.stdout)
    assert completed.returncode == 0, result["error"]
    deferred = result["stats"]["guard_deferred"]
    assert deferred["option"] == "link"
    assert any("more sqlite steps per turn" in problem for problem in deferred["problems"])
    assert "guard-deferred-costly-part" in {warning["code"] for warning in result["warnings"]}
    assert result["stats"]["guard"]["verdict"] == "ok"  # the rest, tried alone, was accepted
    assert _edges(sample.db_path) == edges_before  # no edge reached the live database
    assert result["changes"].get("edges_created", 0) == 0


REMEMBER_FACTS = r"""
import sqlite3, sys
import mnemosyne_hermes as plugin
home = sys.argv[1]
connection = sqlite3.connect(home + "/mnemosyne/data/mnemosyne.db")
rows = connection.execute(
    "SELECT session_id, content FROM working_memory WHERE content LIKE '[USER] %'"
).fetchall()
connection.close()
providers = {}
for session, content in rows:
    key = session[len("hermes_"):]
    if key not in providers:
        providers[key] = plugin.MnemosyneMemoryProvider()
        providers[key].initialize(key, hermes_home=home)
    providers[key].handle_tool_call("mnemosyne_remember", {
        "content": content[len("[USER] "):], "source": "user", "veracity": "stated",
        "importance": 0.8})
"""


@pytest.mark.skipif(
    not HAS_PLUGIN, reason="the plugin's per-turn cost needs mnemosyne-hermes (4.0)"
)
def test_the_guard_refuses_the_promotions_that_make_the_plugins_prefetch_slower(tmp_path):
    """The change the issue measured: memory-maintain promotes every fact the agent remembered
    (source user, stated, 0.8) into a canonical fact, and the plugin tokenises every canonical
    fact on every turn. Measured through the plugin, the guard sees the cost and refuses."""
    home = hermes_conversations.build(tmp_path / "home")
    environment = home.environ()
    subprocess.run(
        [sys.executable, "-c", REMEMBER_FACTS, str(home.directory / "hermes")],
        env=environment,
        check=True,
        capture_output=True,
    )
    config = tmp_path / "config.yaml"
    # Recall's tolerances wide and the floors at 0 on this small home (a few hundred facts cost a
    # large home's agent a hundred milliseconds a turn): the cost is what is judged here.
    config.write_text(
        "guard:\n  probes: 40\n  cost_floor_sqlite_steps: 0\n  cost_floor_python_calls: 0\n"
        "  recall_tolerance: 1\n  mrr_tolerance: 1\n  max_newly_failing: 1000\n"
        "memory_maintain:\n  link: false\n",
        encoding="utf-8",
    )
    completed = run_cli(
        home, "--config", str(config), "--json", "run", "memory-maintain", timeout=900
    )
    result = json.loads(completed.stdout)
    guard = result["stats"]["guard"]
    assert completed.returncode == 1 and guard["verdict"] == "refused"
    assert guard["trial"]["changes"]["canonical_promoted"] > 50
    assert guard["problems"] and all(
        "more python calls" in p or "more sqlite" in p for p in guard["problems"]
    )
    assert guard["cost"]["increase"]["python_calls"] > 1.0  # the tokenising of every fact
    connection = database.open_memory_db(home.db_path, readonly=True)
    try:
        assert connection.execute("SELECT count(*) FROM canonical_facts").fetchone()[0] == 0
    finally:
        connection.close()


def test_with_an_agent_profile_only_what_is_received_is_judged():
    """The plugin puts all of its (at most five) lines in the prompt at once: a line moving from
    first to second place is reported, not refused; a line no longer received is refused."""
    before = Measurement("hermes", 5, {probe.memory_id: 1 for probe in PROBES})
    reordered = Measurement("hermes", 5, {**before.ranks, "m0": 2})
    assert _decide(before, reordered).accepted
    plain_before = Measurement("plain", 10, dict(before.ranks))
    assert not _decide(plain_before, Measurement("plain", 10, dict(reordered.ranks))).accepted
    lost = Measurement("hermes", 5, {**before.ranks, "m0": None})
    assert not _decide(before, lost, max_newly_failing=5).accepted
