"""The recall guard on an aged multi-session conversation home written by Mnemosyne.

Recall is measured here the way the guard measures it (the Hermes plugin's prefetch, since the home
is a Hermes home), with one probe set fixed before the job, on the live database before and after.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo_ops import database
from mnemo_ops.core import state
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.guard import history, probes
from mnemo_ops.guard.measure import Measurement, measure
from mnemo_ops.jobs.evening_batch.consolidation import episodic
from mnemo_ops.mnemosyne import versions
from mnemo_ops.settings import load_settings
from tests.conftest import run_cli
from tests.purity import assert_unchanged, sample_snapshot

JOB = "evening-batch"
LINE = versions.installed_line()
BURIES_ITS_SOURCES = LINE == "3.15"
"""Mnemosyne 3.15's sleep writes summaries at tier 1 stamped with the time of the sleep; 4.0's at tier 3
with their sources' time (upstream's fix), which is what the summary repair does."""
HARMFUL = "evening_batch:\n  summary_repair: false\n  max_rows_per_summary: 5000\n"
"""Mnemosyne 3.15's sleep as it is: summaries of whole sessions at tier 1 with the time of the sleep."""
TOLERANCE = 0.01
PROBES = 80
"""Fewer probes than the default 200 keep these tests quick; the rules are the same."""


def write_config(tmp_path: Path, text: str = "") -> str:
    path = tmp_path / "config.yaml"
    guard = f"guard:\n  probes: {PROBES}\n"
    text = guard + (text[len("guard:\n") :] if text.startswith("guard:\n") else text)
    path.write_text(text, encoding="utf-8")
    return str(path)


def probe_set(layout) -> list[probes.Probe]:
    connection = database.open_memory_db(layout.db_path, readonly=True)
    try:
        return probes.refresh(connection, None, PROBES).probes
    finally:
        connection.close()


def recall(layout, probe_list) -> Measurement:
    """Probe and suite recall on the live database, as the agent gets it."""
    settings = load_settings(
        db=layout.db_path, state_dir=layout.state_dir, environ=layout.environ()
    )
    suite = load_suite(layout.state_dir / "eval" / "suite.jsonl")
    return measure(settings, layout.db_path, probe_list, suite)


def summaries(db: Path) -> list[tuple]:
    """Mnemosyne's summaries (not the sleep stages' NREM summaries, which nothing repairs)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return connection.execute(
            "SELECT id, tier, timestamp, summary_of FROM episodic_memory "
            "WHERE coalesce(source, '') != 'sleep-nrem' ORDER BY id"
        ).fetchall()
    finally:
        connection.close()


def consolidated_rows(db: Path) -> int:
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return connection.execute(
            "SELECT count(*) FROM working_memory WHERE consolidated_at IS NOT NULL"
        ).fetchone()[0]
    finally:
        connection.close()


def within(before: Measurement, after: Measurement, tolerance: float) -> bool:
    suite_ok = all(
        before.suite.metrics[name] - after.suite.metrics[name] <= tolerance + 1e-9
        for name in ("recall@10", "mrr@10")
    )
    return (
        before.recall - after.recall <= tolerance + 1e-9
        and before.mrr - after.mrr <= tolerance + 1e-9
        and suite_ok
    )


def run_job(layout, *args: str, config: str) -> tuple[int, dict]:
    completed = run_cli(layout, "--config", config, "--json", "run", JOB, *args, timeout=600)
    return completed.returncode, json.loads(completed.stdout)


@pytest.mark.heavy
def test_evening_batch_keeps_recall_and_the_guard_accepts(conversations, tmp_path):
    fixed = probe_set(conversations)
    before = recall(conversations, fixed)

    code, result = run_job(conversations, config=write_config(tmp_path))

    assert code == 0, result["error"]
    assert result["changes"]["items_consolidated"] > 800
    assert result["changes"]["summaries_created"] > 0
    # On 3.15 every new summary needs the repair; on 4.0 Mnemosyne already writes them that way.
    repaired = result["changes"]["summaries_created"] if BURIES_ITS_SOURCES else 0
    assert result["changes"]["summaries_repaired"] == repaired
    assert result["stats"]["guard"]["verdict"] == "ok"
    after = recall(conversations, fixed)
    assert within(before, after, TOLERANCE), (before.metrics(), after.metrics())
    # Bounded: no summary covers more rows than evening_batch.max_rows_per_summary (10).
    assert max(len(row[3].split(",")) for row in summaries(conversations.db_path)) <= 10
    assert {row[1] for row in summaries(conversations.db_path)} == {3}


@pytest.mark.heavy
def test_without_the_repair_and_the_guard_the_same_measurement_sees_the_drop(
    conversations, tmp_path
):
    """The test above can fail: Mnemosyne's sleep as it is lowers what the agent recalls."""
    fixed = probe_set(conversations)
    before = recall(conversations, fixed)
    config = write_config(tmp_path, "guard:\n  enabled: false\n" + HARMFUL)

    code, result = run_job(conversations, config=config)

    assert code == 0 and result["changes"]["items_consolidated"] > 800
    after = recall(conversations, fixed)
    if BURIES_ITS_SOURCES:
        assert not within(before, after, TOLERANCE), (before.metrics(), after.metrics())
    else:  # 4.0's own sleep keeps recall: the upstream fix, measured the same way
        assert within(before, after, TOLERANCE), (before.metrics(), after.metrics())


@pytest.mark.skipif(
    not BURIES_ITS_SOURCES,
    reason="Mnemosyne 4.0's sleep writes summaries at tier 3 with their sources' time: "
    "no consolidation setting of it lowers recall for the guard to refuse",
)
@pytest.mark.heavy
def test_a_harmful_change_is_refused_and_the_live_database_is_untouched(conversations, tmp_path):
    fixed = probe_set(conversations)
    before = recall(conversations, fixed)
    config = write_config(tmp_path, HARMFUL)
    original = sample_snapshot(conversations)

    code, result = run_job(conversations, config=config)

    assert code == 1 and "recall guard refused the change" in result["error"]
    guard = result["stats"]["guard"]
    assert guard["verdict"] == "refused" and guard["problems"]
    assert guard["trial"]["changes"]["items_consolidated"] > 800  # the trial did consolidate
    [warning] = [w for w in result["warnings"] if w["code"] == "recall-guard-refused"]
    assert warning["severity"] == "error" and "fell from" in warning["message"]
    assert summaries(conversations.db_path) == [] and consolidated_rows(conversations.db_path) == 0
    after = recall(conversations, fixed)
    # Mnemosyne's recency scoring ages with the clock, so on a slow machine a tie between two
    # memories may break the other way between the two measurements: within the guard's tolerance.
    # The database's bytes, checked below, are the proof that nothing changed.
    assert after.recall == before.recall
    assert after.mrr == pytest.approx(before.mrr, abs=0.01)
    assert after.suite.metrics == pytest.approx(before.suite.metrics, abs=0.01)
    assert not list((conversations.state_dir / "guard").glob("trial-*"))  # the copy is gone
    now = sample_snapshot(conversations)
    assert (original["db"], original["wal"]) == (now["db"], now["wal"])

    # The same refused change is not tried again while nothing it depends on changed ...
    code, again = run_job(conversations, config=config)
    assert code == 1 and again["stats"]["guard"]["verdict"] == "not-retried"
    assert "trial" in again["stats"]["guard"]  # the figures of the refusal, not a new trial
    assert summaries(conversations.db_path) == []
    # ... and --force tries it (and refuses it) again.
    code, forced = run_job(conversations, "--force", config=config)
    assert code == 1 and forced["stats"]["guard"]["verdict"] == "refused"
    ledger = state.open_state(conversations.state_dir / "state.db")
    try:
        verdicts = [row["verdict"] for row in reversed(history.recent(ledger, job=JOB))]
    finally:
        ledger.close()
    assert verdicts == ["refused", "not-retried", "refused"]


@pytest.mark.heavy
def test_dry_run_changes_nothing_and_counts_what_the_real_run_does(conversations, tmp_path):
    before = sample_snapshot(conversations)
    code, dry = run_job(conversations, "--dry-run", config=write_config(tmp_path))
    assert code == 0 and dry["status"] == "dry-run"
    assert_unchanged(before, sample_snapshot(conversations))
    code, real = run_job(conversations, config=write_config(tmp_path))
    assert code == 0
    for name in ("items_consolidated", "summaries_created", "summaries_repaired"):
        assert dry["changes"][name] == real["changes"][name], name


@pytest.mark.e2e
def test_kill_9_during_the_trial_leaves_the_live_database_alone_and_the_rerun_converges(
    conversations, tmp_path
):
    environment = conversations.environ()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mnemo_ops",
            "--config",
            write_config(tmp_path),
            "--json",
            "run",
            JOB,
        ],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    guard_dir = conversations.state_dir / "guard"
    deadline = time.monotonic() + 120
    # Wait until the trial consolidation is under way (summaries appear in the trial copy).
    while time.monotonic() < deadline:
        trials = list(guard_dir.glob("trial-*/data/mnemosyne.db"))
        if trials and _trial_has_summaries(trials[0]):
            break
        time.sleep(0.05)
    else:
        process.kill()
        pytest.fail("the trial never started consolidating")
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()

    assert summaries(conversations.db_path) == [] and consolidated_rows(conversations.db_path) == 0
    assert list(guard_dir.glob("trial-*"))  # left behind by the kill ...
    code, result = run_job(conversations, config=write_config(tmp_path))
    assert code == 0 and result["stats"]["guard"]["verdict"] == "ok"
    assert not list(guard_dir.glob("trial-*"))  # ... and removed by the next run
    rows = summaries(conversations.db_path)
    assert rows and {row[1] for row in rows} == {3}
    assert consolidated_rows(conversations.db_path) == result["changes"]["items_consolidated"]


def _trial_has_summaries(db: Path) -> bool:
    try:
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.1)
        try:
            return connection.execute("SELECT count(*) FROM episodic_memory").fetchone()[0] > 0
        finally:
            connection.close()
    except sqlite3.Error:
        return False


@pytest.mark.e2e
def test_summaries_of_mnemosynes_own_sleep_are_repaired_and_recall_comes_back(
    conversations, tmp_path, monkeypatch
):
    """Auto-sleep (the Hermes plugin leaves it on) consolidated the home before mnemo-ops ran."""
    fixed = probe_set(conversations)
    unconsolidated = recall(conversations, fixed)
    for key, value in conversations.environ().items():
        if key in ("HERMES_HOME", "MNEMOSYNE_DATA_DIR"):
            monkeypatch.setenv(key, value)  # restored after the test: later tests get their own
    slept = episodic.run_sleep(conversations.db_path, conversations.hermes_home, dry_run=False)
    assert slept["items_consolidated"] > 800
    collapsed = recall(conversations, fixed)
    assert within(unconsolidated, collapsed, TOLERANCE) is not BURIES_ITS_SOURCES

    # The repair alone: the sleep stages (and NREM's summaries) have their own guarded nights, and
    # on this home they may trade a few probes for better ranks (recall@5 0.512 -> 0.500 with MRR
    # 0.400 -> 0.475, seen once), which the guard refuses; that would hide what is measured here.
    repair_only = write_config(tmp_path, "sleep:\n  enabled: false\n")
    code, result = run_job(conversations, config=repair_only)

    expected = slept["summaries_created"] if BURIES_ITS_SOURCES else 0  # 4.0: nothing to repair
    assert code == 0, (result["error"], result["stats"].get("guard"))
    assert result["changes"]["summaries_repaired"] == expected
    assert result["changes"]["items_consolidated"] == 0
    repaired = recall(conversations, fixed)
    assert within(unconsolidated, repaired, 0.02), (unconsolidated.metrics(), repaired.metrics())
    code, again = run_job(conversations, config=repair_only)
    assert code == 0 and again["changes"]["summaries_repaired"] == 0  # idempotent
    # Nothing written on the trial copy: recall cannot have changed and the guard measured nothing.
    assert again["stats"]["guard"]["unchanged"] is True and "before" not in again["stats"]["guard"]

    if not BURIES_ITS_SOURCES:
        return  # nothing was repaired, so there is nothing to revert
    # The originals were recorded: reverting puts Mnemosyne's values back.
    listed = json.loads(run_cli(conversations, "--json", "summaries", "list").stdout)
    assert len(listed["repairs"]) == slept["summaries_created"]
    assert {entry["tier_before"] for entry in listed["repairs"]} == {1}
    reverted = json.loads(run_cli(conversations, "--json", "summaries", "revert").stdout)
    assert reverted["reverted"] == slept["summaries_created"]
    assert {row[1] for row in summaries(conversations.db_path)} == {1}


@pytest.mark.e2e
def test_a_full_nightly_cycle_keeps_mnemosynes_recall_at_10(conversations, tmp_path):
    """Trigger install, memory-maintain, evening-batch, monthly-maintenance: recall@10 and MRR@10 of
    Mnemosyne's own recall (plain profile) end at or above where they started; nothing is deleted."""
    config = write_config(tmp_path, "retrieval_eval:\n  profile: plain\n")
    settings = load_settings(
        db=conversations.db_path,
        state_dir=conversations.state_dir,
        config=config,
        environ=conversations.environ(),
    )
    fixed = probe_set(conversations)
    suite = load_suite(conversations.state_dir / "eval" / "suite.jsonl")
    before = measure(settings, conversations.db_path, fixed, suite)
    counts_before = _row_counts(conversations.db_path)

    assert run_cli(conversations, "trigger", "install").returncode == 0
    for job in ("memory-maintain", "evening-batch", "monthly-maintenance"):
        completed = run_cli(conversations, "--config", config, "--json", "run", job, timeout=600)
        assert completed.returncode == 0, completed.stdout[-2000:]

    after = measure(settings, conversations.db_path, fixed, suite)
    assert before.cutoff == 10
    assert within(before, after, TOLERANCE), (before.metrics(), after.metrics())
    counts_after = _row_counts(conversations.db_path)
    assert all(counts_after[table] >= counts_before[table] for table in counts_before)


def _row_counts(db: Path) -> dict[str, int]:
    connection = database.open_memory_db(db, readonly=True)
    try:
        return {
            table: count
            for table, count in database.row_counts(connection).items()
            if count is not None
        }
    finally:
        connection.close()
