"""Every job's cost at 10k / 100k / 1M realistic rows: time and peak memory, the share of the
recall guard's trial and of the pre-write checkpoint, and the growth per 10x.

Run by hand (not part of the test suite):

    python benchmarks/jobs_scaling.py                              # 10k and 100k
    python benchmarks/jobs_scaling.py --sizes 10000,100000,1000000
    python benchmarks/jobs_scaling.py --jobs memory-maintain,backup --sizes 10000,100000

For each size, a realistic database (``mnemo_ops.samples.realistic_memories``) is built once into
``--dir`` (reused by later runs). Each job then runs as a user would run it (``mnemo-ops --json run
JOB --force``) on a fresh copy, in a child process whose wall time and peak memory (the child's
max RSS, from ``wait4``) are measured. memory-maintain runs uncapped by default
so its time covers linking every orphan (``--max-rows`` caps it; the run after a completed round is
measured by ``benchmarks/memory_maintain_incremental.py``). Printed:
one row per job and size (with the seconds of the guard's trial and of the checkpoint, and their
share of the run; the guard's seconds by phase below it), and for each job the growth in time per
10x rows (a job whose time grows faster than about 13x per 10x rows, i.e. 1.3x per row, is
flagged). The machine may be shared: the
figures of one size are measured one job after the other, never in parallel.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from mnemo_ops.samples.realistic_memories import cached_realistic_home  # noqa: E402
from mnemo_ops.samples.sample_database import SampleLayout, copy_home  # noqa: E402

JOBS = [
    "backup",
    "nightly-selfcare",
    "memory-maintain",
    "evening-batch",
    "bridge-drain",
    "retrieval-eval",
    "monthly-maintenance",
]


def run_measured(layout: SampleLayout, arguments: list[str]) -> tuple[float, float, dict]:
    """Run ``mnemo-ops ARGS`` in a child; (wall seconds, peak RSS MiB, the JSON result)."""
    env = layout.environ()
    env["PYTHONPATH"] = str(REPOSITORY)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "--json", *arguments],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    try:
        result = json.loads(output)
    except ValueError:
        result = {"status": f"exit {os.waitstatus_to_exitcode(status)}"}
    # ru_maxrss is the largest child of the process tree that was waited for, in KiB on Linux.
    return elapsed, usage.ru_maxrss / 1024, result


def prepare(layout: SampleLayout, job: str, rows: int, max_rows: int) -> list[list[str]]:
    """What to run for `job` (and set up: eval suite, queue items); the last command is timed."""
    if job == "memory-maintain":
        return [["run", "memory-maintain", "--force", "-o", f"max_rows={max_rows or rows * 2}"]]
    if job == "retrieval-eval":
        suite = layout.state_dir / "eval" / "suite.jsonl"
        suite.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPOSITORY / "fixtures" / "eval" / "sample.jsonl", suite)
    if job == "bridge-drain":
        new = layout.state_dir / "queue" / "new"
        new.mkdir(parents=True, exist_ok=True)
        (new / "scaling.jsonl").write_text(
            "".join(
                json.dumps({"content": f"captured note {n} about the allotment", "source": "shell"})
                + "\n"
                for n in range(200)
            )
        )
    return [["run", job, "--force"]]


def main() -> None:
    """Measure every job at every size and print the table and the growth."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--jobs", default=",".join(JOBS))
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mnemo-ops-bench")
    parser.add_argument(
        "--max-rows",
        type=int,
        default=0,
        help="memory-maintain: orphans linked per run (0: all; its backstop always runs whole)",
    )
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    jobs = arguments.jobs.split(",")
    arguments.dir.mkdir(parents=True, exist_ok=True)
    figures: dict[tuple[str, int], tuple[float, float]] = {}
    for rows in sizes:
        template = cached_realistic_home(arguments.dir, rows)
        for job in jobs:
            work = Path(tempfile.mkdtemp(prefix="scaling-", dir=arguments.dir))
            try:
                layout = copy_home(template, work / "home")
                commands = prepare(layout, job, rows, arguments.max_rows)
                for command in commands[:-1]:
                    run_measured(layout, command)
                elapsed, peak_mib, result = run_measured(layout, commands[-1])
            finally:
                shutil.rmtree(work, ignore_errors=True)
            figures[(job, rows)] = (elapsed, peak_mib)
            stats = result.get("stats", {})
            longest = stats.get("transactions", {})
            guard_s = (stats.get("guard") or {}).get("seconds", 0.0)
            checkpoint_s = stats.get("checkpoint_seconds", 0.0)
            print(
                f"{rows:>9,} rows  {job:<24} {result.get('status', '?'):<8} {elapsed:8.1f} s  "
                f"peak {peak_mib:7.0f} MiB  longest txn "
                f"{longest.get('longest_write_transaction_ms', 0):7.1f} ms  "
                f"guard {guard_s:6.1f} s ({guard_s / max(elapsed, 1e-9):4.0%})  "
                f"checkpoint {checkpoint_s:6.1f} s ({checkpoint_s / max(elapsed, 1e-9):4.0%})",
                flush=True,
            )
            phases = (stats.get("guard") or {}).get("seconds_by_phase")
            if phases:
                print(f"{'':>16}guard by phase: {phases}", flush=True)
    print("\ngrowth in time per 10x rows (flagged past 13x, about 1.3x per row per 10x):")
    for job in jobs:
        steps = []
        for small, large in zip(sizes, sizes[1:]):
            if (job, small) in figures and (job, large) in figures:
                ratio = figures[(job, large)][0] / max(figures[(job, small)][0], 1e-9)
                per_10x = ratio ** (1 / math.log10(large / small))
                flag = "  <- grows faster than the rows" if per_10x > 13 else ""
                steps.append(f"{small:,} -> {large:,}: x{per_10x:.1f} per 10x{flag}")
        print(f"  {job:<24} " + "; ".join(steps))
    print("\nwall time and peak RSS of each run's process tree; the machine may be shared.")


if __name__ == "__main__":
    main()
