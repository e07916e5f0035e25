"""The recall guard's rules for a forgetting stage (``guard.verdict.decide``), rule by rule: a probe
whose own answer the night archived is forgotten, not a regression; a probe whose answer stays live
but is now harder to reach is a regression. (A suite case whose answer is archived is refused through
the whole job in ``test_forgetting``; the forgetting experiment shows forgotten probes accepted.)"""

from __future__ import annotations

from mnemo_ops.guard.measure import Measurement
from mnemo_ops.guard.probes import Probe
from mnemo_ops.guard.verdict import decide
from mnemo_ops.settings.sections import GuardOptions

TOLERANCES = GuardOptions(recall_tolerance=0.01, mrr_tolerance=0.01, max_newly_failing=0)


def _probes(count: int) -> list[Probe]:
    return [
        Probe(f"m{number}", "s", "conversation", ("a", "b", "c"), ("d", "e", "f"))
        for number in range(count)
    ]


def test_a_probe_whose_answer_was_archived_is_forgotten_not_a_regression():
    probes = _probes(10)
    before = Measurement("hermes", 5, {probe.memory_id: 1 for probe in probes})
    after_ranks = {probe.memory_id: 1 for probe in probes}
    after_ranks["m0"] = after_ranks["m1"] = None  # archived tonight: recall cannot return them
    after = Measurement("hermes", 5, after_ranks)
    live_after = {probe.memory_id for probe in probes} - {"m0", "m1"}
    verdict = decide(probes, before, after, live_after, TOLERANCES)
    assert verdict.accepted, verdict.problems
    assert sorted(verdict.forgotten) == ["m0", "m1"] and not verdict.newly_failing


def test_a_live_answer_that_became_harder_to_reach_is_a_regression():
    """With the plain profile a ranked list is judged by rank too; with an agent profile only what
    is received (tests/guard/test_cost_rule.py)."""
    probes = _probes(10)
    before = Measurement("plain", 5, {probe.memory_id: 1 for probe in probes})
    after_ranks = {probe.memory_id: 1 for probe in probes}
    after_ranks["m3"] = 4  # still found, lower down
    after = Measurement("plain", 5, after_ranks)
    verdict = decide(probes, before, after, {probe.memory_id for probe in probes}, TOLERANCES)
    assert not verdict.accepted
    assert any("mrr" in problem for problem in verdict.problems)
    missed = dict(after_ranks, m4=None)
    verdict = decide(
        probes,
        before,
        Measurement("plain", 5, missed),
        {probe.memory_id for probe in probes},
        TOLERANCES,
    )
    assert not verdict.accepted and [probe.memory_id for probe in verdict.newly_failing] == ["m4"]
