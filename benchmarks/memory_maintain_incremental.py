"""memory-maintain after its first pass: 1,000 new orphans, then a run with nothing new.

Run by hand (not part of the test suite):

    python benchmarks/memory_maintain_incremental.py --rows 1000000
    python benchmarks/memory_maintain_incremental.py --rows 100000 --new 1000

Targets (issue 19): 1,000 new orphans in a 1M-row database linked in under 5 s; a run with nothing
new under 1 s, whatever the size. A first full linking round of a million orphans takes far longer
than this benchmark should, so the database is brought to the state a completed round leaves: the
first run promotes every qualifying fact and links a few orphans (``max_rows``), and the linking
state is then marked as a completed round at the current highest rowid (as the job itself records
it). The canonical trigger is installed first, as the README asks, so the backstop's later passes
are incremental too. Then `--new` realistic rows are added by SQL (as the agent's writes would arrive), and two runs
are timed as a user runs them (``mnemo-ops --json run memory-maintain``, process start included).
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

from mnemo_ops.samples.realistic_memories import (  # noqa: E402
    add_realistic_memories,
    cached_realistic_home,
)
from mnemo_ops.samples.sample_database import SampleLayout  # noqa: E402


def run(layout: SampleLayout, *options: str, command: tuple[str, ...] = ()) -> tuple[float, dict]:
    """One timed ``mnemo-ops --json [OPTIONS] COMMAND`` (default: run memory-maintain) as a user runs it."""
    env = layout.environ()
    env["PYTHONPATH"] = str(REPOSITORY)
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "mnemo_ops", "--json", *options]
        + list(command or ("run", "memory-maintain", "--force")),
        env=env,
        capture_output=True,
        text=True,
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
    arguments = parser.parse_args()
    template = cached_realistic_home(arguments.dir, arguments.rows)
    work = Path(tempfile.mkdtemp(prefix="incremental-", dir=arguments.dir))
    try:
        shutil.copytree(template.directory, work / "home", symlinks=True)
        layout = SampleLayout(work / "home")
        config = layout.data_dir / "config.yaml"
        if config.exists():
            config.write_text(
                config.read_text().replace(str(template.data_dir), str(layout.data_dir))
            )
        # As a user sets it up: the trigger first, then a first run (here without the pause for
        # an agent, since none is running, and linking only a few orphans).
        run(layout, command=("trigger", "install"))
        preparation = work / "prepare.yaml"
        preparation.write_text("transactions:\n  agent_share: 0\n")
        if not arguments.assume_first_pass:
            first_s, first = run(
                layout,
                "--config",
                str(preparation),
                command=("run", "memory-maintain", "--force", "-o", "max_rows=500"),
            )
            print(
                f"first run (backstop over {arguments.rows:,} rows, 500 orphans): {first_s:.1f} s, "
                f"{first.get('changes')} {first.get('error') or ''}"
            )
        high = mark_round_completed(layout)
        add_realistic_memories(layout.db_path, arguments.new, seed=99, consolidated_days=None)
        new_s, new = run(layout)
        linking = new["stats"]["linking"]
        print(
            f"{arguments.new:,} new rows after rowid {high:,}: {new_s:.2f} s "
            f"(mode {linking['mode']}, {linking['orphans_examined']} examined, "
            f"{new['changes']['edges_created']} edges; target under 5 s)"
        )
        idle_s, idle = run(layout)
        print(
            f"nothing new: {idle_s:.2f} s, of which the job {idle['duration_s']:.2f} s (the rest is "
            f"starting Python and importing; guard {idle['stats'].get('guard', {}).get('verdict')}, "
            f"linking {idle['stats'].get('linking', {}).get('mode', 'not run: nothing new')}, "
            f"changes {idle['changes']}; target under 1 s)"
        )
        guard_s = new["stats"].get("guard", {}).get("seconds", 0.0)
        checkpoint_s = new["stats"].get("checkpoint_seconds", 0.0)
        print(
            f"the run with {arguments.new:,} new rows: the job {new['duration_s']:.2f} s "
            f"(backstop {new['stats']['canonical']['mode']}): the recall guard's trial {guard_s:.2f} s "
            f"(copy, the job on it, recall measured before and after), the pre-write checkpoint "
            f"{checkpoint_s:.2f} s, the live backstop and linking "
            f"{new['duration_s'] - guard_s - checkpoint_s:.2f} s"
        )
    finally:
        if arguments.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
