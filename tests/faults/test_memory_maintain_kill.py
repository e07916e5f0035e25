"""kill -9 in the middle of memory-maintain: the database stays consistent and the next run ends in
the same state as one uninterrupted run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from devtools.samples.synthetic_memories import add_synthetic_memories
from tests.jobs.memory_maintain.test_job import (
    copy_sample,
    current_auto_facts,
    doctor_findings,
    our_edges,
    query,
    run_job,
)

# Slow, and about mnemo-ops' own file handling rather than Mnemosyne's behaviour: CI runs it on one
# Mnemosyne line only (the "slow" marker, pyproject.toml).
pytestmark = pytest.mark.slow

JOB_ARGUMENTS = ("--option", "batch_size=20")


def _edge_count(db_path) -> int:
    try:
        return query(db_path, "SELECT count(*) FROM graph_edges WHERE edge_type = 'related_to'")[0][
            0
        ]
    except sqlite3.OperationalError:  # busy for a moment while the job commits
        return 0


def test_kill_9_mid_run_then_rerun_converges(sample, tmp_path):
    add_synthetic_memories(sample.db_path, 3000, seed=11)
    findings_before = doctor_findings(sample)
    reference = copy_sample(sample, tmp_path / "reference")
    uninterrupted = run_job(reference, *JOB_ARGUMENTS)
    total_edges = uninterrupted["changes"]["edges_created"]
    assert total_edges > 1000

    victim = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "--json", "run", "memory-maintain", *JOB_ARGUMENTS],
        env=sample.environ(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    edges_at_kill = 0
    try:
        # Kill once some batches are committed but well before the end.
        while time.monotonic() < deadline:
            edges_at_kill = _edge_count(sample.db_path)
            if edges_at_kill >= 60 or victim.poll() is not None:
                break
            time.sleep(0.01)
        assert victim.poll() is None, "the job finished before it could be killed"
        os.kill(victim.pid, signal.SIGKILL)
    finally:
        victim.wait(timeout=30)
    assert victim.returncode == -signal.SIGKILL

    # Consistent after the kill: integrity holds and every committed batch is whole.
    assert query(sample.db_path, "PRAGMA integrity_check") == [("ok",)]
    partial = _edge_count(sample.db_path)
    assert 0 < partial < total_edges
    assert query(
        sample.db_path,
        "SELECT count(*) FROM (SELECT source FROM graph_edges WHERE edge_type = 'related_to' "
        "GROUP BY source HAVING count(*) > 3)",
    ) == [(0,)]

    rerun = run_job(sample, *JOB_ARGUMENTS)
    assert rerun["stats"]["linking"]["completed_round"]
    assert rerun["changes"]["edges_created"] == total_edges - partial
    assert our_edges(sample.db_path) == our_edges(reference.db_path)
    assert current_auto_facts(sample.db_path) == current_auto_facts(reference.db_path)
    assert set(run_job(sample, *JOB_ARGUMENTS)["changes"].values()) == {0}
    assert doctor_findings(sample) == findings_before
