"""The guard measures a first sample of its probes and the rest only when the sample does not
settle the verdict; a harmful change is still refused, and the trial runs the live run's work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.samples.realistic_memories import add_realistic_memories
from mnemo_ops.core import state
from mnemo_ops.guard import probes
from mnemo_ops.guard.measure import Measurement, combine
from mnemo_ops.guard.verdict import decide, settled_by_sample
from mnemo_ops.settings.sections import GuardOptions
from tests.conftest import run_cli
from tests.guard.test_recall_guard import BURIES_ITS_SOURCES, HARMFUL, run_job, write_config

PROBES = [probes.Probe(f"m{i}", "s", "c", ("a", "b", "c"), ("d",)) for i in range(200)]
SAMPLE = PROBES[:50]
LIVE = {probe.memory_id for probe in PROBES}


def _ranks(probe_list, broken: int = 0, rank: int = 1) -> dict[str, int | None]:
    return {
        probe.memory_id: (None if number < broken else rank)
        for number, probe in enumerate(probe_list)
    }


def _settled(before: dict, after: dict, sampled: list = SAMPLE, **rules):
    tolerances = GuardOptions(**rules)
    verdict = decide(
        sampled,
        Measurement("plain", 5, before),
        Measurement("plain", 5, after),
        LIVE,
        tolerances,
    )
    return verdict, settled_by_sample(verdict, len(sampled), len(PROBES), 40, tolerances)


def test_a_sample_that_breaks_more_probes_than_allowed_settles_a_refusal():
    verdict, settled = _settled(_ranks(SAMPLE), _ranks(SAMPLE, broken=3))
    assert not verdict.accepted and settled.settled  # the 3 stay broken in the whole set


def test_a_sample_with_one_broken_probe_measures_every_probe():
    verdict, settled = _settled(_ranks(SAMPLE), _ranks(SAMPLE, broken=1))
    assert not settled.settled  # refused on the sample, but the rest may make up for it


def test_a_sample_with_no_sign_of_harm_settles_an_acceptance():
    verdict, settled = _settled(_ranks(SAMPLE), _ranks(SAMPLE))
    assert verdict.accepted and settled.settled


def test_a_lower_rank_within_tolerance_still_measures_every_probe():
    before = _ranks(SAMPLE)
    after = dict(before, m0=2)  # MRR fell a little: accepted on the sample, but not clear
    verdict, settled = _settled(before, after, mrr_tolerance=0.5)
    assert verdict.accepted and not settled.settled


def test_a_harm_outside_the_sample_is_refused_once_every_probe_is_measured():
    """The whole set is judged exactly as without sampling: the rest's broken probes count."""
    before = _ranks(PROBES)
    after = dict(before, m0=2, **{f"m{n}": None for n in range(150, 160)})
    first = decide(
        SAMPLE,
        Measurement("plain", 5, {k: before[k] for k in _ranks(SAMPLE)}),
        Measurement("plain", 5, {k: after[k] for k in _ranks(SAMPLE)}),
        LIVE,
        GuardOptions(),
    )
    assert not settled_by_sample(first, 50, 200, 40, GuardOptions()).settled
    rest = PROBES[50:]
    whole_before = combine(
        Measurement("plain", 5, {k: before[k] for k in _ranks(SAMPLE)}),
        Measurement("plain", 5, {k: before[k] for k in _ranks(rest)}),
    )
    whole_after = combine(
        Measurement("plain", 5, {k: after[k] for k in _ranks(SAMPLE)}),
        Measurement("plain", 5, {k: after[k] for k in _ranks(rest)}),
    )
    verdict = decide(PROBES, whole_before, whole_after, LIVE, GuardOptions())
    assert not verdict.accepted and len(verdict.newly_failing) == 10


@pytest.mark.skipif(
    not BURIES_ITS_SOURCES,
    reason="Mnemosyne 4.0's sleep writes summaries at tier 3 with their sources' time: "
    "no consolidation setting of it lowers recall for the guard to refuse",
)
@pytest.mark.heavy
def test_a_harmful_change_is_still_refused_with_a_small_first_sample(conversations, tmp_path):
    config = write_config(tmp_path, "guard:\n  first_sample: 10\n" + HARMFUL)
    code, result = run_job(conversations, config=config)
    assert code == 1 and "recall guard refused the change" in result["error"]
    guard = result["stats"]["guard"]
    assert guard["verdict"] == "refused"
    assert guard["sampling"]["first_sample"] == 10
    phases = guard["seconds_by_phase"]
    assert {"copy", "probes", "job_on_copy", "measure_before", "measure_after", "verdict"} <= set(
        phases
    )
    assert not list((conversations.state_dir / "guard").glob("trial-*"))


@pytest.mark.heavy
def test_the_trial_resumes_where_the_live_run_does(sample, tmp_path: Path):
    """The job on the copy reads its state (memory-maintain's cursor) under the live database's
    name: after a completed round, the trial links only the new orphans, as the live run does."""
    config = tmp_path / "config.yaml"
    config.write_text("guard:\n  probes: 40\n", encoding="utf-8")
    first = run_cli(
        sample, "--config", str(config), "--json", "run", "memory-maintain", timeout=900
    )
    assert first.returncode == 0, first.stdout
    add_realistic_memories(sample.db_path, 200, seed=27)
    completed = run_cli(
        sample, "--config", str(config), "--json", "run", "memory-maintain", "--force", timeout=900
    )
    result = json.loads(completed.stdout)
    assert completed.returncode == 0, result["error"]
    live = result["stats"]["linking"]
    trial = result["stats"]["guard"]["trial"]["stats"]["linking"]
    assert live["mode"] == trial["mode"] == "incremental"
    assert live["orphans_examined"] == trial["orphans_examined"] > 0
    assert result["stats"]["guard"]["trial"]["changes"] == result["changes"]
    ledger = state.open_state(sample.state_dir / "state.db")
    try:
        answers = probes.answered(ledger)
    finally:
        ledger.close()
    measured = result["stats"]["guard"]["sampling"]["measured"]
    assert len(answers) == measured and any(answers.values())  # kept for the next sample


def test_the_first_sample_is_spread_over_sessions():
    """The set is ordered by stratum; the sample takes one probe per session before a second."""
    grouped = [
        probes.Probe(f"{session}-{n}", session, "chat", ("a", "b", "c"), ("d",))
        for session in ("s1", "s2", "s3", "s4")
        for n in range(10)
    ]
    sample, rest = probes.spread_sample(grouped, 8)
    assert [probe.session_id for probe in sample] == ["s1", "s2", "s3", "s4"] * 2
    assert len(rest) == 32 and not {p.memory_id for p in sample} & {p.memory_id for p in rest}
    assert probes.spread_sample(grouped, 0) == (grouped, [])


def test_the_first_sample_takes_the_probes_answered_last_time_first():
    """Only a probe answered before a change can break: those fill the sample first."""
    answers = {probe.memory_id: number % 4 == 0 for number, probe in enumerate(PROBES)}
    sample, rest = probes.spread_sample(PROBES, 60, answers)
    assert sum(answers[probe.memory_id] for probe in sample) == 50  # every answered probe
    assert len(sample) == 60 and len(rest) == 140
    # A probe never measured counts as answered.
    sample, _ = probes.spread_sample(PROBES, 10, {})
    assert len(sample) == 10
    # The probes whose cost is counted lead the sample, as they lead a measurement of all.
    sample, _ = probes.spread_sample(PROBES, 60, answers, leading=40)
    assert sample[:40] == PROBES[:40] and len(sample) == 60
    assert all(answers[probe.memory_id] for probe in sample[40:])
