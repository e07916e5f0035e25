"""The live agent's write latency alone and while each writing job runs, side by side.

Run by hand (not part of the test suite):

    python benchmarks/live_agent_latency.py                    # 100k realistic rows, every job
    python benchmarks/live_agent_latency.py --rows 10000 --jobs backup,memory-maintain
    python benchmarks/live_agent_latency.py --home DIR --jobs evening-batch   # a home of your own

A database of `--rows` rows of realistic text (``devtools.samples.realistic_memories``: the
sample home written by Mnemosyne, grown by SQL) is built once into ``--dir``. For each job, on a
fresh copy: a separate process plays the agent, writing through the real ``Mnemosyne.remember``
every 20 ms (the Hermes plugin's 50 writes/s, every fourth a user-stated fact); its latencies are
measured for ``--alone`` seconds on its own, then while the job runs (``mnemo-ops run JOB
--force``; memory-maintain twice: the first run and the resumed one), then alone again for as long.
Printed per job: the agent's writes, errors, p50 / p99 / max latency alone and with the job, the p99
ratio against the agent alone before and against it alone after (target at most 2x: the agent's own
cost grows with its session, see `measure`) and the job's longest write transaction (its
``stats.transactions``). The machine may be shared with other work: the sides of each ratio are
measured one right after the other on one copy.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from devtools.samples.realistic_memories import cached_realistic_home  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import SampleLayout, copy_home  # noqa: E402

AGENT = r"""
import json, sys, time
from pathlib import Path
from mnemosyne.core.memory import Mnemosyne
db, stop, report, interval = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
memory = Mnemosyne(session_id="live-agent", db_path=db)
samples, number = [], 0
Path(f"{report}.started").write_text("1")
while not stop.exists():
    number += 1
    fact = number % 4 == 0
    if number % 1000 == 0:
        # A new conversation every 1,000 writes, as the Hermes plugin starts a session per
        # conversation: Mnemosyne trims a session's working memory on every remember (a DELETE ...
        # NOT IN over the session's newest 10,000 rows, holding the write lock), so one endless
        # session at 50 writes/s would soon hold the lock most of the time by itself.
        memory.session_id = memory.beam.session_id = f"live-agent-{number // 1000}"
    started = time.perf_counter()
    error = None
    try:
        memory.remember(f"live agent note number {number} about the garden and the server",
                        source="user" if fact else "conversation", importance=0.8 if fact else 0.3,
                        veracity="stated" if fact else "unknown")
    except Exception as exception:
        error = f"{type(exception).__name__}: {exception}"
    elapsed = time.perf_counter() - started
    samples.append([time.time(), elapsed * 1000, error])
    time.sleep(max(0.0, interval - elapsed))
report.write_text(json.dumps(samples))
"""

JOBS = [
    "backup",
    "memory-maintain",
    "evening-batch",
    "bridge-drain",
    "monthly-maintenance",
    "self-reflection",
    "memory-block-migrate",
]
RUNS = {"memory-maintain": 2}  # the first run, then the resumed one


def prepare(layout: SampleLayout, job: str) -> tuple[Path | None, dict[str, str]]:
    """What `job` needs beyond the home: a config file and environment, or (None, {}).

    bridge-drain gets 300 captured items; self-reflection a week of sessions written through
    Mnemosyne and the test model of ``tests/models`` (the llm call path, no network);
    memory-block-migrate the full memory blocks of ``fixtures/memory_blocks``.
    """
    if job == "bridge-drain":
        queue_items(layout, 300)
    if job == "self-reflection":
        from devtools.samples import reflection_week
        from tests.models.plugin import model_plugin_environment

        reflection_week.add_week(layout)
        config = layout.directory / "reflection.yaml"
        config.write_text("owner: dana\nmodels:\n  model: mnemo-test\n  remote: false\n")
        return config, model_plugin_environment(layout.directory / "model")
    if job == "memory-block-migrate":
        layout.memory_blocks_dir.mkdir(parents=True, exist_ok=True)
        for block in (REPOSITORY / "fixtures" / "memory_blocks").iterdir():
            shutil.copyfile(block, layout.memory_blocks_dir / block.name)
    return None, {}


def environment(layout: SampleLayout) -> dict[str, str]:
    """The sample's environment, with this repository importable in children."""
    env = layout.environ()
    env["PYTHONPATH"] = str(REPOSITORY)
    return env


def queue_items(layout: SampleLayout, count: int) -> None:
    """`count` captured items waiting in the spool, for bridge-drain."""
    new = layout.state_dir / "queue" / "new"
    new.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {"content": f"captured note {n} about the allotment and the server", "source": "shell"}
        )
        for n in range(count)
    ]
    (new / "benchmark.jsonl").write_text("\n".join(lines) + "\n")


def percentile(values: list[float], share: float) -> float:
    """The `share` percentile of `values` (nearest rank)."""
    ordered = sorted(values) or [0.0]
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def measure(
    layout: SampleLayout,
    job: str,
    alone_s: float,
    config: Path | None = None,
    extra_environment: dict[str, str] | None = None,
) -> dict:
    """Agent latencies alone, then during the job's runs; the job's longest transaction."""
    stop, report = layout.directory / "stop", layout.directory / "agent.json"
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(layout.db_path), str(stop), str(report), "0.02"],
        env=environment(layout),
    )
    while not Path(f"{report}.started").exists():
        time.sleep(0.05)
    time.sleep(alone_s)
    job_started = time.time()
    results = []
    for _ in range(RUNS.get(job, 1)):
        completed = subprocess.run(
            [sys.executable, "-m", "mnemo_ops", "--json"]
            + (["--config", str(config)] if config else [])
            + ["run", job, "--force"],
            env={**environment(layout), **(extra_environment or {})},
            capture_output=True,
            text=True,
        )
        results.append(json.loads(completed.stdout))
    job_finished = time.time()
    # The agent alone again: Mnemosyne's own write cost grows with its session (each remember
    # trims working memory with a DELETE ... NOT IN over the session's rows, inside its write
    # transaction), so a long job would otherwise be compared with a younger, faster agent.
    time.sleep(alone_s)
    stop.write_text("stop")
    agent.wait()
    samples = json.loads(report.read_text())
    alone = [ms for at, ms, error in samples if at < job_started and not error]
    during = [ms for at, ms, error in samples if job_started <= at <= job_finished]
    after = [ms for at, ms, error in samples if at > job_finished and not error]
    errors = sum(1 for at, _, error in samples if error and at >= job_started)
    return {
        "job": job,
        "status": [result["status"] for result in results],
        "job_s": round(job_finished - job_started, 1),
        "writes": len(during),
        "errors": errors,
        "alone": [statistics(alone, share) for share in (0.5, 0.99)] + [max(alone or [0])],
        "after": [statistics(after, share) for share in (0.5, 0.99)] + [max(after or [0])],
        "during": [statistics(during, share) for share in (0.5, 0.99)] + [max(during or [0])],
        "longest_transaction_ms": max(
            result["stats"].get("transactions", {}).get("longest_write_transaction_ms", 0)
            for result in results
        ),
        "transactions": sum(
            result["stats"].get("transactions", {}).get("count", 0) for result in results
        ),
        # Where the job's time went: the guard (its trial included) and each step of the live run.
        "guard_s": [result["stats"].get("guard", {}).get("seconds") for result in results],
        "steps_s": [
            {step["name"]: step.get("duration_s") for step in result["stats"].get("steps", [])}
            for result in results
        ],
    }


def statistics(values: list[float], share: float) -> float:
    """A rounded percentile."""
    return round(percentile(values, share), 1)


def main() -> None:
    """Measure every job and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--jobs", default=",".join(JOBS))
    parser.add_argument("--alone", type=float, default=10.0, help="seconds of the agent alone")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mnemo-ops-bench")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    parser.add_argument("--config", type=Path, help="a mnemo-ops config file for the jobs")
    parser.add_argument(
        "--home",
        type=Path,
        help="a home to copy for each job instead of generated rows (e.g. an aged conversation "
        "home from hermes_conversation_home.py, grown with generated rows): its folder holding hermes/",
    )
    arguments = parser.parse_args()
    arguments.dir.mkdir(parents=True, exist_ok=True)
    if arguments.home is not None:
        template = SampleLayout(arguments.home.absolute())
    else:
        template = cached_realistic_home(arguments.dir, arguments.rows)
    rows = []
    for job in arguments.jobs.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"latency-{job}-", dir=arguments.dir))
        try:
            layout = copy_home(template, work / "home")
            config, extra_environment = prepare(layout, job)
            rows.append(
                measure(layout, job, arguments.alone, arguments.config or config, extra_environment)
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        row = rows[-1]
        print(
            f"{row['job']:<20} {'/'.join(row['status']):<10} {row['job_s']:>7.1f} s "
            f"writes {row['writes']:>5} errors {row['errors']:>4}  "
            f"p50 {row['alone'][0]:>6.1f} -> {row['during'][0]:>6.1f} ms  "
            f"p99 {row['alone'][1]:>6.1f} -> {row['during'][1]:>6.1f} ms "
            f"(x{row['during'][1] / max(row['alone'][1], 0.001):.2f}; alone after "
            f"{row['after'][1]:.1f} ms: x{row['during'][1] / max(row['after'][1], 0.001):.2f})  "
            f"max {row['during'][2]:>7.1f} ms  longest txn {row['longest_transaction_ms']:>6.1f} ms "
            f"({row['transactions']} txns)",
            flush=True,
        )
    size = f"the home {arguments.home}" if arguments.home else f"{arguments.rows:,} realistic rows"
    print(
        f"\n{size}; agent = Mnemosyne.remember every 20 ms; "
        "alone and with the job measured back to back on one copy; the machine may be shared."
    )
    if arguments.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
