"""Recall quality before and after each writing job, side by side, and what the recall guard costs.

Usage: python benchmarks/recall_quality.py [--sessions 8] [--turns 300] [--dir DIR] [--keep]

On a generated aged conversation home (``mnemo_ops.samples.conversations``: multi-session
conversations written through Mnemosyne's own API, with an eval suite whose cases name their evidence
turns), each writing job runs on its own copy of the same home, and recall is measured before and
after with one fixed probe set and the suite, in both profiles (``hermes``: what the Hermes plugin
injects each turn; ``plain``: Mnemosyne's top 10). Printed side by side:

- probe recall and MRR, and suite recall@10 and MRR@10, before -> after, per job and profile;
- Mnemosyne's sleep as it is (summary repair off, one summary per session) for comparison, which is
  what the guard refuses;
- the job's time with the guard against the same job without it on another copy, and the guard's
  share of the guarded run (the machine may be shared: the ratio is what counts).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mnemo_ops import database  # noqa: E402
from mnemo_ops.evaluation.suite import load_suite  # noqa: E402
from mnemo_ops.guard import probes  # noqa: E402
from mnemo_ops.guard.measure import measure  # noqa: E402
from mnemo_ops.samples.conversations import build  # noqa: E402
from mnemo_ops.samples.sample_database import SampleLayout  # noqa: E402
from mnemo_ops.settings import load_settings  # noqa: E402

JOBS = ("memory-maintain", "evening-batch", "monthly-maintenance")
AS_MNEMOSYNE_SLEEPS = "evening_batch:\n  summary_repair: false\n  max_rows_per_summary: 5000\n"


def copy_home(template: SampleLayout, target: Path) -> SampleLayout:
    """A private copy of the home, its Mnemosyne config pointed at the copy."""
    shutil.copytree(template.directory, target, symlinks=True)
    layout = SampleLayout(target)
    config = layout.data_dir / "config.yaml"
    if config.exists():
        config.write_text(config.read_text().replace(str(template.data_dir), str(layout.data_dir)))
    return layout


def figures(layout: SampleLayout, probe_set, profile: str, scratch: Path) -> dict[str, float]:
    """Probe and suite recall on `layout` in `profile`."""
    config = scratch / f"profile-{profile}.yaml"
    config.write_text(f"retrieval_eval:\n  profile: {profile}\n")
    settings = load_settings(
        db=layout.db_path, state_dir=layout.state_dir, config=config, environ=layout.environ()
    )
    os.environ.update(
        {k: v for k, v in layout.environ().items() if k in ("HERMES_HOME", "MNEMOSYNE_DATA_DIR")}
    )
    result = measure(
        settings, layout.db_path, probe_set, load_suite(layout.state_dir / "eval" / "suite.jsonl")
    )
    suite = result.suite.metrics
    return {
        "probe_recall": result.recall,
        "probe_mrr": result.mrr,
        "suite_recall": suite["recall@10"],
        "suite_mrr": suite["mrr@10"],
    }


def run(layout: SampleLayout, job: str, config_text: str, scratch: Path) -> tuple[float, dict]:
    """Run `job` on `layout` with `config_text`; return (seconds, result)."""
    config = scratch / f"{layout.directory.name}.yaml"
    config.write_text(config_text)
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "mnemo_ops", "--config", str(config), "--json", "run", job],
        env=layout.environ(),
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - started, json.loads(completed.stdout)


def main() -> None:
    """Build the home, run every job on copies, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=300, help="turns per session")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    arguments = parser.parse_args()
    root = arguments.dir or Path(tempfile.mkdtemp(prefix="mnemo-ops-recall-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        template = build(
            root / "template", sessions=arguments.sessions, turns_per_session=arguments.turns
        )
        print(
            f"home: {arguments.sessions} sessions x {arguments.turns} turns, written by Mnemosyne in "
            f"{time.perf_counter() - started:.0f} s ({root})"
        )
        connection = database.open_memory_db(template.db_path, readonly=True)
        probe_set = probes.refresh(connection, None, 200).probes
        connection.close()
        before = {
            profile: figures(template, probe_set, profile, root) for profile in ("hermes", "plain")
        }
        rows = []
        cases = [(job, "", True) for job in JOBS] + [
            ("evening-batch", AS_MNEMOSYNE_SLEEPS, False),
        ]
        for number, (job, extra, guarded) in enumerate(cases):
            label = job if extra == "" else f"{job} (Mnemosyne's sleep as it is, no guard)"
            guard_text = "" if guarded else "guard:\n  enabled: false\n"
            home = copy_home(template, root / f"run-{number}")
            seconds, result = run(home, job, guard_text + extra, root)
            unguarded_seconds = None
            if guarded:
                bare = copy_home(template, root / f"bare-{number}")
                unguarded_seconds, _ = run(bare, job, "guard:\n  enabled: false\n" + extra, root)
                shutil.rmtree(bare.directory, ignore_errors=True)
            after = {
                profile: figures(home, probe_set, profile, root) for profile in ("hermes", "plain")
            }
            guard = result.get("stats", {}).get("guard", {})
            rows.append(
                (
                    label,
                    result.get("status"),
                    guard.get("verdict", "off"),
                    seconds,
                    unguarded_seconds,
                    after,
                )
            )
            shutil.rmtree(home.directory, ignore_errors=True)
        print()
        columns = ("probe recall", "probe MRR", "suite R@10", "suite MRR")
        header = f"{'job':<55} {'status':<7} {'guard':<8} {'profile':<7} " + " ".join(
            f"{name:>14}" for name in columns
        )
        print(header)
        for profile in ("hermes", "plain"):
            b = before[profile]
            print(
                f"{'(before)':<55} {'':<7} {'':<8} {profile:<7} {b['probe_recall']:>14.3f} "
                f"{b['probe_mrr']:>14.3f} {b['suite_recall']:>14.3f} {b['suite_mrr']:>14.3f}"
            )
        for label, status, verdict, _seconds, _bare, after in rows:
            for profile in ("hermes", "plain"):
                b, a = before[profile], after[profile]
                cells = [
                    f"{b[key]:.3f}->{a[key]:.3f}"
                    for key in ("probe_recall", "probe_mrr", "suite_recall", "suite_mrr")
                ]
                print(
                    f"{label:<55} {status:<7} {verdict:<8} {profile:<7} "
                    + " ".join(f"{cell:>14}" for cell in cells)
                )
        print()
        print(f"{'job':<55} {'with guard':>11} {'without':>9} {'ratio':>7} {'guard share':>12}")
        for label, _status, _verdict, seconds, bare, _after in rows:
            if bare is None:
                continue
            print(
                f"{label:<55} {seconds:>10.1f}s {bare:>8.1f}s {seconds / bare:>6.2f}x "
                f"{(seconds - bare) / seconds:>11.0%}"
            )
    finally:
        if not arguments.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
