"""Every writing job beside a live agent, on a database large enough that each job needs many batches.

Issue 20: on a small sample every job finishes in a few short transactions, so a live writer never
notices; on a real database of 100k rows memory-maintain made 89% of the agent's writes fail. Here
the agent is a separate process writing through the real ``Mnemosyne.remember`` at the Hermes
plugin's pace (50 writes/s, every fourth a user-stated fact), beside each job on 50k generated rows
of realistic text (``tests/conftest.py``: built once per session, copied per test). Required: the
job succeeds and changes something, the agent sees zero errors, and every row it wrote is there
afterwards. The jobs that write through Mnemosyne's own ``remember`` (self-reflection with the test
model on a week of sessions written into the home, memory-block-migrate on full blocks) are here too.

Each job's work is capped so the suite stays within its budget (memory-maintain links a few
thousand orphans per run, twice: the first run and a resumed one); the caps keep the work large
enough to need many write transactions. The recall guard is off here: it would first run each job
on a copy (doubling the time) and may refuse a change on this generated text, and then nothing would
be written beside the agent; the guard has its own tests (tests/guard/).
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.samples import reflection_week
from mnemo_ops import database
from tests.conftest import run_cli
from tests.jobs.memory_block_migrate.helpers import install_full_blocks
from tests.models.plugin import model_plugin_environment

pytestmark = pytest.mark.realistic

WRITER = Path(__file__).with_name("live_writer.py")
AGENT_INTERVAL_S = 0.02  # 50 writes per second, the Hermes plugin's pace

# Each case: the runs of one job (memory-maintain twice: the first run, then the resumed one).
RUNS = {
    "backup": [["run", "backup"]],
    "memory-maintain": [
        ["run", "memory-maintain", "-o", "max_rows=4000"],
        ["run", "memory-maintain", "-o", "max_rows=4000"],
    ],
    "evening-batch": [["run", "evening-batch"]],
    "bridge-drain": [["run", "bridge-drain"]],
    "monthly-maintenance": [["run", "monthly-maintenance"]],
    # The two jobs that write through Mnemosyne's own remember (each new job is tried as it
    # lands): the week's lessons from the test model, and the full memory blocks moved.
    "self-reflection": [["run", "self-reflection"]],
    "memory-block-migrate": [["run", "memory-block-migrate"]],
}


def _prepare(layout, job: str, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """What `job` needs beyond the home: config text and environment (the test model, the blocks)."""
    if job == "self-reflection":
        # The generated text holds no lesson the test model finds: the week of sessions that
        # does is written into the large home through Mnemosyne first.
        reflection_week.add_week(layout)
        environment = model_plugin_environment(tmp_path / "model")
        return "owner: dana\nmodels:\n  model: mnemo-test\n  remote: false\n", environment
    if job == "memory-block-migrate":
        install_full_blocks(layout)
    return "", {}


def _start_writer(layout, report_file: Path, stop_file: Path) -> subprocess.Popen:
    writer = subprocess.Popen(
        [
            sys.executable,
            str(WRITER),
            str(layout.db_path),
            str(stop_file),
            str(report_file),
            str(AGENT_INTERVAL_S),
        ],
        env=layout.environ(),
    )
    deadline = time.monotonic() + 60
    while not Path(f"{report_file}.started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # a few writes alone first
    return writer


def _describe(report: dict) -> str:
    latencies = sorted(report["latencies_ms"]) or [0.0]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return (
        f"{len(report['errors'])} of {len(latencies)} agent writes failed; latency p50 "
        f"{statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms, max {latencies[-1]:.1f} ms; "
        f"first errors: {json.dumps(report['details'], indent=1)[:3000]}"
    )


BUSY = ("evening-batch", "memory-maintain", "monthly-maintenance")
"""The jobs also run with every core kept busy (``busy_cores``): the two that write the most
transactions of their own (the others write through Mnemosyne's remember, or a few at most), and
the nightly consolidation, the longest job of a night."""


@pytest.mark.parametrize(
    "job",
    sorted(RUNS)
    + [
        pytest.param(f"{job}:busy", marks=[pytest.mark.contention, pytest.mark.slow])
        for job in BUSY
    ],
)
def test_job_beside_a_live_agent_at_realistic_size(realistic, job, tmp_path, request):
    job, _, load = job.partition(":")
    if load == "busy":
        request.getfixturevalue("busy_cores")
    extra_config, environment = _prepare(realistic, job, tmp_path)
    config = realistic.directory / "no-guard.yaml"
    config.write_text("guard:\n  enabled: false\n" + extra_config)
    stop_file = realistic.directory / "stop"
    report_file = realistic.directory / "writer.json"
    writer = _start_writer(realistic, report_file, stop_file)
    results = []
    try:
        for arguments in RUNS[job]:
            results.append(
                run_cli(
                    realistic,
                    "--json",
                    "--config",
                    str(config),
                    *arguments,
                    "--force",
                    # Generous: what is tested is the agent's writes, not the job's speed (one CI
                    # run on 4.0 saw a capped memory-maintain pass 600 s here, 54 s alone).
                    timeout=1200,
                    env=environment or None,
                )
            )
    finally:
        stop_file.write_text("stop")
        writer.wait(timeout=120)
    report = json.loads(report_file.read_text())
    assert report["errors"] == [], _describe(report)
    for result in results:
        data = json.loads(result.stdout)
        assert result.returncode == 0, (data.get("error"), result.stderr[-2000:])
        assert data["status"] == "ok"
        wrote = any(data["changes"].values()) or data["stats"]["transactions"]["count"]
        assert wrote, f"{job} changed nothing: the test proved nothing"
        # The longest write transaction of the run is in its stats (and so in the ledger).
        assert "longest_write_transaction_ms" in data["stats"]["transactions"], data["stats"]
    assert report["written"], "the agent wrote nothing: the test proved nothing"
    # Past this count Mnemosyne's own trim deletes the agent's first rows (tests/faults/live_writer.py).
    assert len(report["written"]) < report["wm_max_items"]
    connection = database.open_memory_db(realistic.db_path, readonly=True)
    present = {
        row[0]
        for row in connection.execute(
            f"SELECT id FROM working_memory WHERE id IN ({','.join('?' * len(report['written']))})",
            report["written"],
        )
    }
    connection.close()
    assert present == set(report["written"])
