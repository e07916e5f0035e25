"""The guard's cost rule: a change may not make the agent's per-turn recall cost much more.

Cost is counted in SQLite VM steps and Python calls (the same for the same data, whatever the
machine is doing); a rise past ``guard.max_cost_increase`` and past the unit's floor is refused, and
a job that names a ``costly_option`` (memory-maintain: ``link``) runs without that part instead.
"""

from __future__ import annotations

import json
from pathlib import Path

from mnemo_ops import database
from mnemo_ops.evaluation.receives import Receives
from mnemo_ops.guard import probes
from mnemo_ops.guard.measure import Measurement
from mnemo_ops.guard.verdict import decide
from mnemo_ops.samples.realistic_memories import add_realistic_memories
from mnemo_ops.settings.sections import GuardOptions
from tests.conftest import run_cli

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
