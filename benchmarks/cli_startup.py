"""The command line's start-up, before and after a change, side by side in one run.

Run by hand (not part of the test suite):

    python benchmarks/cli_startup.py                  # before: the merge-base with main
    python benchmarks/cli_startup.py --before HEAD~3  # or any commit
    python benchmarks/cli_startup.py --repeat 9

The before tree is checked out into a temporary ``git worktree``; each measure runs
``python -m mnemo_ops`` (or the same entry point under a probe) with ``PYTHONPATH`` pointing at one
tree or the other, the two interleaved run by run (their order swapped every round), so a loaded
machine slows both alike. Printed: the median wall time of ``--version`` and ``--help``, and for
``run backup --dry-run`` on a sample home its start-up (from the process's start until the job's
own work begins: ``mnemo_ops.jobs.run_job`` entered), its whole run and the start-up's share of it;
with the after/before ratios.

Bytecode is written to a cache of the run's own (``PYTHONPYCACHEPREFIX``), and one untimed run of
each measure fills it first, as an installed package has its bytecode: no ``__pycache__`` folder is
written beside the sources.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from mnemo_ops.mnemosyne.sample_home import SampleLayout, build_sample  # noqa: E402

STARTED_MARK = "cli-startup-probe: job started at "

PROBE = f"""
import sys, time
import mnemo_ops.jobs as jobs

run_job = jobs.run_job


def entered(*args, **kwargs):
    sys.stderr.write("{STARTED_MARK}%r\\n" % time.time())
    return run_job(*args, **kwargs)


jobs.run_job = entered  # before the command line is imported, so every version calls the probe
from mnemo_ops.cli import main

main(sys.argv[1:])
"""
"""``python -c PROBE ARGS``: the command line's own entry point, with a stamp (wall clock) on
stderr when it hands the job to ``run_job``. ``mnemo_ops.jobs`` is imported first in both trees,
which the command imports before the job starts anyway."""

RUN_BACKUP = ("run", "backup", "--dry-run")


def git(*arguments: str) -> str:
    """The output of ``git ARGUMENTS`` in the repository, stripped."""
    return subprocess.run(
        ["git", "-C", str(REPOSITORY), *arguments], check=True, capture_output=True, text=True
    ).stdout.strip()


def child_environment(layout: SampleLayout, tree: Path, pycache: Path) -> dict[str, str]:
    """The sample's environment, mnemo-ops imported from `tree`, bytecode cached in `pycache`."""
    environment = layout.environ()
    environment["PYTHONPATH"] = str(tree)
    environment["PYTHONPYCACHEPREFIX"] = str(pycache)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    return environment


def timed(
    command: list[str], environment: dict[str, str], folder: Path
) -> tuple[float, float | None]:
    """(wall seconds of `command`, seconds until the probe's stamp or None); it must exit 0.

    It runs in `folder` (not a checkout): ``python -m`` and ``-c`` put the working folder first on
    the path, where a checkout would win over ``PYTHONPATH``."""
    started = time.time()
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=folder)
    wall = time.time() - started
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {completed.returncode}:\n{completed.stderr}")
    stamps = [
        float(line[len(STARTED_MARK) :])
        for line in completed.stderr.splitlines()
        if line.startswith(STARTED_MARK)
    ]
    return wall, (stamps[0] - started if stamps else None)


def measure(
    environments: dict[str, dict[str, str]], repeat: int, folder: Path
) -> dict[str, dict[str, list[float]]]:
    """Every measure `repeat` times for each tree, interleaved: measure -> tree -> seconds."""
    python = sys.executable
    commands = {
        "--version": [python, "-m", "mnemo_ops", "--version"],
        "--help": [python, "-m", "mnemo_ops", "--help"],
        "run backup --dry-run": [python, "-c", PROBE, *RUN_BACKUP],
    }
    trees = list(environments)
    for command in commands.values():  # untimed: fills the bytecode cache
        for tree in trees:
            timed(command, environments[tree], folder)
    results: dict[str, dict[str, list[float]]] = {}
    for round_index in range(repeat):
        order = trees if round_index % 2 == 0 else trees[::-1]
        for name, command in commands.items():
            for tree in order:
                wall, startup = timed(command, environments[tree], folder)
                results.setdefault(name, {}).setdefault(tree, []).append(wall)
                if startup is not None:
                    results.setdefault("start-up", {}).setdefault(tree, []).append(startup)
                    share = startup / wall
                    results.setdefault("start-up share", {}).setdefault(tree, []).append(share)
    return results


def report(results: dict[str, dict[str, list[float]]], before: str, repeat: int) -> None:
    """One line per measure: the medians of both trees and after / before."""
    print(f"median of {repeat}; before = {before}, after = the working tree")
    print(f"{'measure':<32} {'before':>9} {'after':>9} {'after/before':>13}")
    for name, by_tree in results.items():
        old, new = (statistics.median(by_tree[tree]) for tree in ("before", "after"))
        unit = "" if name == "start-up share" else " s"
        label = name if name != "run backup --dry-run" else "run backup --dry-run (whole)"
        label = label if name != "start-up" else "run backup --dry-run: start-up"
        shown = (
            (f"{old:.0%}", f"{new:.0%}") if not unit else (f"{old:.3f}{unit}", f"{new:.3f}{unit}")
        )
        print(f"{label:<32} {shown[0]:>9} {shown[1]:>9} {new / old:>12.2f}x")


def main() -> None:
    """Check the before tree out, build the sample home, measure both trees, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--before", help="the commit to compare with (default: the merge-base with main)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per measure and tree")
    arguments = parser.parse_args()
    before = arguments.before or git("merge-base", "HEAD", "main")
    commit = git("rev-parse", "--verify", f"{before}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="mnemo-ops-cli-startup-") as scratch:
        work = Path(scratch)
        before_tree = work / "before"
        git("worktree", "add", "--detach", str(before_tree), commit)
        try:
            layout = build_sample(work / "sample")
            environments = {
                "before": child_environment(layout, before_tree, work / "pycache"),
                "after": child_environment(layout, REPOSITORY, work / "pycache"),
            }
            load = os.getloadavg()[0]
            results = measure(environments, arguments.repeat, layout.directory)
            print(f"load average at the start: {load:.1f}, at the end: {os.getloadavg()[0]:.1f}")
            report(results, f"{before} ({commit[:12]})", arguments.repeat)
        finally:
            git("worktree", "remove", "--force", str(before_tree))


if __name__ == "__main__":
    main()
