"""memory-maintain after its first pass: 1,000 new orphans, then a run with nothing new.

Run by hand (not part of the test suite):

    python benchmarks/memory_maintain_incremental.py --rows 1000000
    python benchmarks/memory_maintain_incremental.py --rows 100000 --new 1000
    python benchmarks/memory_maintain_incremental.py --rows 1000000 --assume-first-pass \
        --baseline /tmp/old-checkout          # an older checkout's run first, on an identical copy

Targets: 1,000 new orphans in a 1M-row database linked in under 5 s; a run with nothing
new under 1 s, whatever the size. A first full linking round of a million orphans takes far longer
than this benchmark should, so the database is brought to the state a completed round leaves: the
first run promotes every qualifying fact and links a few orphans (``max_rows``), and the linking
state is then marked as a completed round at the current highest rowid (as the job itself records
it). The canonical trigger is installed first, as the README asks, so the backstop's later passes
are incremental too. Then `--new` realistic rows are added by SQL (as the agent's writes would arrive), and two runs
are timed as a user runs them (``mnemo-ops --json run memory-maintain``, process start included),
each with where its seconds went: the recall guard's trial (by phase), the pre-write checkpoint,
the live work.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from devtools.samples.realistic_memories import (  # noqa: E402
    add_realistic_memories,
    cached_realistic_home,
)
from mnemo_ops.mnemosyne.sample_home import SampleLayout  # noqa: E402


def run(
    layout: SampleLayout,
    *options: str,
    command: tuple[str, ...] = (),
    code: Path = REPOSITORY,
) -> tuple[float, dict]:
    """One timed ``mnemo-ops --json [OPTIONS] COMMAND`` (default: run memory-maintain) as a user
    runs it, with the mnemo-ops code at `code` (``--baseline``: an older checkout)."""
    env = layout.environ()
    env["PYTHONPATH"] = str(code)
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "mnemo_ops", "--json", *options]
        + list(command or ("run", "memory-maintain", "--force")),
        env=env,
        capture_output=True,
        text=True,
        cwd=code,  # ``-m`` puts the working directory first on the path: the code to measure
    )
    return time.perf_counter() - started, json.loads(completed.stdout)


def mark_round_completed(layout: SampleLayout) -> int:
    """Record a completed full round and backstop pass at the current highest rowid (what the job
    stores after them)."""
    connection = sqlite3.connect(layout.db_path)
    high = connection.execute("SELECT max(rowid) FROM working_memory").fetchone()[0]
    connection.close()
    state = sqlite3.connect(layout.state_dir / "state.db")
    now = datetime.now(UTC).isoformat()
    with state:
        state.execute(
            "CREATE TABLE IF NOT EXISTS memory_maintain_cursor (db TEXT PRIMARY KEY, last_id TEXT, "
            "updated_at TEXT, high_water INTEGER, full_round_at TEXT, round_mark INTEGER, "
            "backstop_mark INTEGER, backstop_full_at TEXT)"
        )
        state.execute(
            "INSERT OR REPLACE INTO memory_maintain_cursor VALUES (?, '', ?, ?, ?, ?, ?, ?)",
            (str(layout.db_path), now, high, now, high, high, now),
        )
    state.close()
    return high


def prepare(template: SampleLayout, work: Path, rows: int, new: int, first_pass: bool):
    """A copy of the template in `work`, brought to the state a completed round leaves, with
    `new` realistic rows added after it; returns the layout and the highest rowid before them."""
    shutil.copytree(template.directory, work, symlinks=True)
    layout = SampleLayout(work)
    config = layout.data_dir / "config.yaml"
    if config.exists():
        config.write_text(config.read_text().replace(str(template.data_dir), str(layout.data_dir)))
    # As a user sets it up: the trigger first, then a first run (here without the pause for
    # an agent, since none is running, and linking only a few orphans).
    run(layout, command=("trigger", "install"))
    preparation = work.parent / f"{work.name}-prepare.yaml"
    preparation.write_text("transactions:\n  agent_share: 0\n")
    if first_pass:
        first_s, first = run(
            layout,
            "--config",
            str(preparation),
            command=("run", "memory-maintain", "--force", "-o", "max_rows=500"),
        )
        print(
            f"first run (backstop over {rows:,} rows, 500 orphans): {first_s:.1f} s, "
            f"{first.get('changes')} {first.get('error') or ''}"
        )
    high = mark_round_completed(layout)
    add_realistic_memories(layout.db_path, new, seed=99, consolidated_days=None)
    return layout, high


def describe(label: str, seconds: float, result: dict) -> list[str]:
    """The figures of one run with new rows: where its seconds went."""
    stats = result.get("stats", {})
    guard = stats.get("guard", {})
    guard_s = guard.get("seconds", 0.0)
    checkpoint_s = stats.get("checkpoint_seconds", 0.0)
    linking = stats.get("linking", {})
    sampling = guard.get("sampling") or {}
    lines = [
        f"{label}: {seconds:.2f} s, {result.get('status')} {result.get('error') or ''}".rstrip(),
        f"  the job {result.get('duration_s', 0):.2f} s: the recall guard's trial {guard_s:.2f} s "
        f"(verdict {guard.get('verdict')}), the pre-write checkpoint {checkpoint_s:.2f} s, "
        f"the live backstop and linking {result.get('duration_s', 0) - guard_s - checkpoint_s:.2f} s",
        f"  linking: mode {linking.get('mode')}, {linking.get('orphans_examined')} examined, "
        f"{result.get('changes', {}).get('edges_created')} edges; the trial: "
        f"{guard.get('trial', {}).get('changes')}",
    ]
    if guard.get("seconds_by_phase"):
        lines.append(f"  guard seconds by phase: {guard['seconds_by_phase']}")
    if sampling:
        lines.append(
            f"  probes measured {sampling.get('measured')} of {sampling.get('probes')} "
            f"(first sample {sampling.get('first_sample')}: {sampling.get('reason')})"
        )
    return lines


def main() -> None:
    """Build (or reuse) the database, prepare the state, time the incremental and no-op runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--new", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mnemo-ops-bench")
    parser.add_argument("--keep", action="store_true", help="keep the working copy")
    parser.add_argument(
        "--assume-first-pass",
        action="store_true",
        help="skip the first run (at 1M rows it takes longer than the job's 30 min timeout here) and "
        "record its state directly",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="an older checkout of mnemo-ops (e.g. `git archive main | tar -x -C DIR`): its run "
        "with the new rows is measured first on an identical copy, then this checkout's",
    )
    arguments = parser.parse_args()
    template = cached_realistic_home(arguments.dir, arguments.rows)
    work = Path(tempfile.mkdtemp(prefix="incremental-", dir=arguments.dir))
    try:
        report = []
        if arguments.baseline:
            layout, _ = prepare(
                template,
                work / "baseline",
                arguments.rows,
                arguments.new,
                not arguments.assume_first_pass,
            )
            seconds, result = run(layout, code=arguments.baseline.resolve())
            report += describe(f"baseline ({arguments.baseline})", seconds, result)
            print("\n".join(report), flush=True)
            shutil.rmtree(work / "baseline", ignore_errors=True)
        layout, high = prepare(
            template, work / "home", arguments.rows, arguments.new, not arguments.assume_first_pass
        )
        new_s, new = run(layout)
        lines = describe(
            f"{arguments.new:,} new rows after rowid {high:,} (this checkout)", new_s, new
        )
        print("\n".join(lines), flush=True)
        idle_s, idle = run(layout)
        print(
            f"nothing new: {idle_s:.2f} s, of which the job {idle['duration_s']:.2f} s (the rest is "
            f"starting Python and importing; guard {idle['stats'].get('guard', {}).get('verdict')}, "
            f"linking {idle['stats'].get('linking', {}).get('mode', 'not run: nothing new')}, "
            f"changes {idle['changes']}; target under 1 s)"
        )
    finally:
        if arguments.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
