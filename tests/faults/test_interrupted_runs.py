"""SIGTERM and SIGINT in the middle of a real memory-maintain: the job stops at a safe point, is
recorded as interrupted with its stage, releases the lock and exits 143 / 130; the database stays
whole, the next run finishes the work, and the morning report shows the stop once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from devtools.samples.synthetic_memories import add_synthetic_memories
from tests.conftest import run_cli
from tests.jobs.memory_maintain.test_job import copy_sample, our_edges, query, run_job

JOB_ARGUMENTS = ("--option", "batch_size=20")


def _edge_count(db_path) -> int:
    try:
        return query(db_path, "SELECT count(*) FROM graph_edges WHERE edge_type = 'related_to'")[0][
            0
        ]
    except sqlite3.OperationalError:  # busy for a moment while the job commits
        return 0


def _ledger(state_db) -> list[dict]:
    connection = sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute("SELECT * FROM runs ORDER BY id")]
    finally:
        connection.close()


def _stop_mid_run(sample, number: int) -> subprocess.CompletedProcess:
    """Start memory-maintain, send signal `number` once some batches are committed on the live
    database (the recall guard's trial is over), and wait for it to end."""
    victim = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "--json", "run", "memory-maintain", *JOB_ARGUMENTS],
        env=sample.environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if _edge_count(sample.db_path) >= 60 or victim.poll() is not None:
                break
            time.sleep(0.01)
        assert victim.poll() is None, "the job finished before it could be stopped"
        os.kill(victim.pid, number)
        stdout, stderr = victim.communicate(timeout=60)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
    return subprocess.CompletedProcess(victim.args, victim.returncode, stdout, stderr)


@pytest.mark.parametrize(
    ("number", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["term", "int"]
)
def test_a_signal_mid_run_is_recorded_and_the_next_run_finishes(
    sample, tmp_path, number, exit_code
):
    add_synthetic_memories(sample.db_path, 3000, seed=11)
    reference = copy_sample(sample, tmp_path / "reference")
    total_edges = run_job(reference, *JOB_ARGUMENTS)["changes"]["edges_created"]
    assert total_edges > 1000

    stopped = _stop_mid_run(sample, number)
    name = signal.Signals(number).name
    assert stopped.returncode == exit_code, stopped.stderr
    result = json.loads(stopped.stdout)
    assert result["status"] == "interrupted"
    assert result["stats"]["interrupted"] == {"signal": name, "stage": "orphan-linking"}
    assert "Traceback" not in stopped.stderr

    # The ledger has the run, its signal and its stage; nothing else was recorded for it.
    rows = _ledger(sample.state_dir / "state.db")
    last = rows[-1]
    assert (last["job"], last["status"], last["exit_code"]) == (
        "memory-maintain",
        "interrupted",
        exit_code,
    )
    assert f"interrupted by {name} during orphan-linking" in last["error"]
    assert json.loads(last["result_json"])["stats"]["interrupted"]["stage"] == "orphan-linking"

    # Whole transactions only: the database is consistent, and the committed batches stay.
    assert query(sample.db_path, "PRAGMA integrity_check") == [("ok",)]
    partial = _edge_count(sample.db_path)
    assert 0 < partial < total_edges

    # The morning report, before the next run: the stop is an open warning, with its run.
    report = json.loads(run_cli(sample, "--json", "report", "--no-write").stdout)
    assert report["runs"]["counts"]["interrupted"] == 1
    open_codes = [(w["job"], w["code"]) for w in report["warnings"]]
    assert ("memory-maintain", "run-interrupted") in open_codes

    # The lock was released (the next run takes it at once) and the next run finishes the work.
    rerun = run_job(sample, *JOB_ARGUMENTS)
    assert rerun["stats"]["linking"]["completed_round"]
    assert rerun["changes"]["edges_created"] == total_edges - partial
    assert our_edges(sample.db_path) == our_edges(reference.db_path)

    # Then the report shows it once more, as resolved by that run, and no longer as open.
    report = json.loads(run_cli(sample, "--json", "report", "--no-write").stdout)
    assert ("memory-maintain", "run-interrupted") not in [
        (w["job"], w["code"]) for w in report["warnings"]
    ]
    resolved = [entry for entry in report["resolved"] if entry["code"] == "run-interrupted"]
    assert len(resolved) == 1 and resolved[0]["job"] == "memory-maintain"


def test_sigterm_during_evening_batch_consolidation_is_recorded_and_the_next_run_completes(
    sample, sample_template, tmp_path
):
    from mnemo_ops.jobs.evening_batch.job import STEPS
    from tests.faults.test_evening_batch_kill import _add_old_turns, _progress, _state

    config = tmp_path / "config.yaml"
    # Claims of a child ended mid-sleep become reclaimable after this many seconds.
    config.write_text("evening_batch:\n  reclaim_stale_seconds: 1\n")
    _add_old_turns(sample)
    before = _state(sample.db_path)
    reference = copy_sample(sample, tmp_path / "reference")
    assert run_cli(reference, "--config", str(config), "run", "evening-batch").returncode == 0
    expected = _state(reference.db_path)["consolidated"]

    victim = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "--config", str(config), "--json"]
        + ["run", "evening-batch"],
        env=sample.environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    try:
        # Once the live database is being consolidated (the guard's trial is over).
        while time.monotonic() < deadline and victim.poll() is None:
            progress = _progress(sample.db_path)
            if progress["consolidated"] or progress["claimed_open"]:
                break
            time.sleep(0.01)
        assert victim.poll() is None, "the batch finished before it could be stopped"
        victim.send_signal(signal.SIGTERM)
        stdout, stderr = victim.communicate(timeout=120)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
    assert victim.returncode == 143, stderr
    result = json.loads(stdout)
    stage = result["stats"]["interrupted"]["stage"]
    assert result["status"] == "interrupted" and stage in {step.name for step in STEPS}, stage
    assert {"name": stage, "status": "interrupted"}.items() <= result["stats"]["steps"][-1].items()
    last = _ledger(sample.state_dir / "state.db")[-1]
    assert (last["job"], last["status"], last["exit_code"]) == ("evening-batch", "interrupted", 143)
    assert f"during {stage}" in last["error"]

    middle = _state(sample.db_path)
    assert middle["integrity"] == "ok"
    assert middle["working"] == before["working"] and middle["fts"] == middle["working"]
    assert middle["consolidated"] < expected

    time.sleep(1.2)  # let a claim left by the ended child go stale
    final = run_cli(sample, "--json", "--config", str(config), "run", "evening-batch")
    assert final.returncode == 0, final.stderr
    assert _state(sample.db_path)["consolidated"] == expected
