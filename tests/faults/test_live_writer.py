"""Every implemented job coexists with a live agent writing through Mnemosyne at the same time.

The writer must see no error (our write transactions are short and retried; the agent's 5 s busy
timeout is never exhausted), every job must succeed, and every row the writer wrote must be there.
Each job runs twice: on the machine as it is, and with every core kept busy by a spinning process
(``busy_cores``; marked ``contention`` and ``slow``), because a job that shares the CPU stretches
its transactions and the agent's machine is rarely idle.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo_ops import database
from mnemo_ops.foundation.resources import resource_dir
from mnemo_ops.jobs import implemented_jobs
from tests.conftest import run_cli

WRITER = Path(__file__).with_name("live_writer.py")
# Jobs that write to the memory DB (or read it heavily while the agent writes).
CANDIDATES = [
    "backup",
    "memory-maintain",
    "bridge-drain",
    "evening-batch",
    "monthly-maintenance",
    "nightly-selfcare",
    "retrieval-eval",
]


LOADS = [
    pytest.param("idle", id="idle"),
    pytest.param("busy", id="busy", marks=[pytest.mark.contention, pytest.mark.slow]),
]


@pytest.mark.parametrize("load", LOADS)
@pytest.mark.parametrize(
    "job", [job for job in CANDIDATES if job in implemented_jobs()] or ["none-implemented"]
)
def test_job_runs_beside_a_live_writer(sample, job, load, request):
    if job == "none-implemented":
        pytest.skip("no writing job is implemented in this version")
    if load == "busy":
        request.getfixturevalue("busy_cores")
    if job == "retrieval-eval":  # without a suite at its place the eval fails: it measures nothing
        suite = sample.state_dir / "eval" / "suite.jsonl"
        suite.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(resource_dir("fixtures") / "eval" / "sample.jsonl", suite)
    stop_file = sample.directory / "stop"
    report_file = sample.directory / "writer.json"
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(sample.db_path), str(stop_file), str(report_file)],
        env=sample.environ(),
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{report_file}.started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = run_cli(sample, "--json", "run", job, "--force")
    finally:
        stop_file.write_text("stop")
        writer.wait(timeout=60)
    data = json.loads(result.stdout)
    assert result.returncode == 0, (data.get("error"), result.stderr)
    assert data["status"] == "ok"
    report = json.loads(report_file.read_text())
    # On a failure, the job's own transactions beside the agent's errors say which one it was.
    evidence = {
        "agent": report["details"],
        "job_transactions": data["stats"].get("transactions"),
        "job_finished_at": data.get("finished_at"),
    }
    assert report["errors"] == [], json.dumps(evidence, indent=1)
    assert report["written"], "the writer wrote nothing: the test proved nothing"
    assert len(report["written"]) < report["wm_max_items"], "Mnemosyne's own trim would remove rows"
    connection = database.open_memory_db(sample.db_path, readonly=True)
    present = {
        row[0]
        for row in connection.execute(
            f"SELECT id FROM working_memory WHERE id IN ({','.join('?' * len(report['written']))})",
            report["written"],
        )
    }
    connection.close()
    assert present == set(report["written"])


def test_mnemosynes_own_trim_is_what_the_writer_raises(tmp_path):
    """The writer's limit is not cosmetic: under Mnemosyne's limit its first writes disappear.

    Mnemosyne deletes a session's oldest unconsolidated working-memory rows beyond
    MNEMOSYNE_WM_MAX_ITEMS after each remember. With no job at all and a limit of 40, the writer's
    own rows go missing; that is the failure the writer's raised limit keeps out of the job tests
    (a CI run once blamed a busy-core memory-maintain run for it).
    """
    stop_file, report_file = tmp_path / "stop", tmp_path / "writer.json"
    environment = dict(os.environ, MNEMOSYNE_WM_MAX_ITEMS="40")
    writer = subprocess.Popen(
        [
            sys.executable,
            str(WRITER),
            str(tmp_path / "memory.db"),
            str(stop_file),
            str(report_file),
        ],
        env=environment,
    )
    deadline = time.monotonic() + 60
    while not Path(f"{report_file}.started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2)
    stop_file.write_text("stop")
    writer.wait(timeout=60)
    report = json.loads(report_file.read_text())
    assert report["wm_max_items"] == 40 and len(report["written"]) > 40, report["errors"]
    connection = database.open_memory_db(tmp_path / "memory.db", readonly=True)
    kept = connection.execute("SELECT count(*) FROM working_memory").fetchone()[0]
    connection.close()
    assert kept == 40
