"""Every job's cost at 10k / 100k / 1M realistic rows: wall time, CPU time, peak memory, bytes
written, the share of the recall guard's trial and of the pre-write checkpoint, the growth per 10x.

Run by hand (not part of the test suite):

    python benchmarks/jobs_scaling.py                              # 10k and 100k
    python benchmarks/jobs_scaling.py --sizes 10000,100000,1000000 --timeout-s 1500
    python benchmarks/jobs_scaling.py --jobs memory-maintain,backup --sizes 10000,100000

For each size, a realistic database (``devtools.samples.realistic_memories``) is built once into
``--dir`` (reused by later runs). Each job then runs as a user would run it (``mnemo-ops --json run
JOB --force``) on a fresh copy, in a child process (its own session, so a job past ``--timeout-s``
is killed with its whole process group and printed as ``timeout``; the run goes on) whose wall
time, CPU time, peak memory and bytes written are measured (from ``wait4``, see `run_measured`).
memory-maintain runs uncapped by default
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
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from devtools.samples.realistic_memories import cached_realistic_home  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import SampleLayout, copy_home  # noqa: E402

JOBS = [
    "backup",
    "nightly-selfcare",
    "memory-maintain",
    "evening-batch",
    "bridge-drain",
    "retrieval-eval",
    "monthly-maintenance",
]


class Measurement(NamedTuple):
    """What one run of a job cost, and its JSON result."""

    elapsed_s: float
    cpu_s: float
    peak_mib: float
    written_bytes: int
    result: dict
    timed_out: bool


def run_measured(layout: SampleLayout, arguments: list[str], timeout_s: float) -> Measurement:
    """Run ``mnemo-ops ARGS`` in a child and measure it; past `timeout_s`, kill its process group.

    All but the wall time come from the rusage of ``wait4``, which covers the child and every
    descendant it waited for: CPU is user + system seconds; peak memory is the largest max RSS
    among them; bytes written is ``ru_oublock`` * 512, the bytes the tree sent towards the block
    layer. Linux counts a buffered write when the page becomes dirty, not when it is flushed, so
    writes still in the page cache at exit are counted, a page rewritten while still dirty is
    counted once, files deleted before being flushed (temporary files) still count, and a file on
    tmpfs counts nothing. It is not the growth of the home on disk.
    """
    environment = layout.environ()
    environment["PYTHONPATH"] = str(REPOSITORY)
    # A file, not a pipe: the output is read after wait4, so a killed job leaves nothing to drain.
    with tempfile.TemporaryFile(mode="w+") as output:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "mnemo_ops", "--json", *arguments],
            env=environment,
            stdout=output,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its own process group, so the kill reaches its children
        )
        killed = threading.Event()

        def kill_group() -> None:
            killed.set()
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended just before the deadline
                pass

        timer = threading.Timer(timeout_s, kill_group)
        timer.start()
        # wait4 rather than Popen.wait: only wait4 returns the rusage of the process tree.
        _, status, usage = os.wait4(process.pid, 0)
        timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
        elapsed = time.perf_counter() - started
        output.seek(0)
        text = output.read()
    try:
        result = json.loads(text)
    except ValueError:
        result = {"status": f"exit {process.returncode}"}
    if killed.is_set():
        result = {"status": "timeout"}
    return Measurement(
        elapsed_s=elapsed,
        cpu_s=usage.ru_utime + usage.ru_stime,
        # ru_maxrss is in KiB on Linux.
        peak_mib=usage.ru_maxrss / 1024,
        written_bytes=usage.ru_oublock * 512,
        result=result,
        timed_out=killed.is_set(),
    )


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
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=1800.0,
        help="seconds one job may run before it is killed and printed as timeout (the run goes on)",
    )
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    jobs = arguments.jobs.split(",")
    arguments.dir.mkdir(parents=True, exist_ok=True)
    figures: dict[tuple[str, int], Measurement] = {}
    for rows in sizes:
        template = cached_realistic_home(arguments.dir, rows)
        for job in jobs:
            work = Path(tempfile.mkdtemp(prefix="scaling-", dir=arguments.dir))
            try:
                layout = copy_home(template, work / "home")
                commands = prepare(layout, job, rows, arguments.max_rows)
                for command in commands[:-1]:
                    run_measured(layout, command, arguments.timeout_s)
                measured = run_measured(layout, commands[-1], arguments.timeout_s)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            result = measured.result
            elapsed = measured.elapsed_s
            if not measured.timed_out:  # a killed run's time is its limit, not its cost
                figures[(job, rows)] = measured
            stats = result.get("stats", {})
            longest = stats.get("transactions", {})
            guard_s = (stats.get("guard") or {}).get("seconds", 0.0)
            checkpoint_s = stats.get("checkpoint_seconds", 0.0)
            print(
                f"{rows:>9,} rows  {job:<24} {result.get('status', '?'):<8} {elapsed:8.1f} s  "
                f"cpu {measured.cpu_s:8.1f} s  peak {measured.peak_mib:7.0f} MiB  "
                f"written {measured.written_bytes / 2**20:8.1f} MiB  longest txn "
                f"{longest.get('longest_write_transaction_ms', 0):7.1f} ms  "
                f"guard {guard_s:6.1f} s ({guard_s / max(elapsed, 1e-9):4.0%})  "
                f"checkpoint {checkpoint_s:6.1f} s ({checkpoint_s / max(elapsed, 1e-9):4.0%})",
                flush=True,
            )
            if result.get("status") not in ("ok", "timeout"):
                # A job may fail through its error-level warnings alone, with no error text.
                causes = [result.get("error")] + [
                    f"{warning['code']}: {warning['message']}"
                    for warning in result.get("warnings", [])
                    if warning.get("severity") == "error"
                ]
                print(f"{'':>16}error: {' | '.join(str(cause) for cause in causes)}", flush=True)
            phases = (stats.get("guard") or {}).get("seconds_by_phase")
            if phases:
                print(f"{'':>16}guard by phase: {phases}", flush=True)
    print("\ngrowth in time per 10x rows (flagged past 13x, about 1.3x per row per 10x):")
    for job in jobs:
        steps = []
        for small, large in zip(sizes, sizes[1:]):
            if (job, small) in figures and (job, large) in figures:
                ratio = figures[(job, large)].elapsed_s / max(figures[(job, small)].elapsed_s, 1e-9)
                per_10x = ratio ** (1 / math.log10(large / small))
                flag = "  <- grows faster than the rows" if per_10x > 13 else ""
                steps.append(f"{small:,} -> {large:,}: x{per_10x:.1f} per 10x{flag}")
        print(f"  {job:<24} " + "; ".join(steps))
    print(
        "\nwall time, CPU, peak RSS and bytes written of each run's process tree; the machine may"
        " be shared; a run that timed out is left out of the growth."
    )


if __name__ == "__main__":
    main()
