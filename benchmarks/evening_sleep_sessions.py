"""evening-batch's consolidation: Mnemosyne's ``sleep_all_sessions`` against mnemo-ops' session loop.

Usage: python benchmarks/evening_sleep_sessions.py HOME_DIR [--max-sessions N] [--batch 10]

HOME_DIR holds a Hermes home with rows old enough to consolidate (``hermes_conversation_home.py
--age-days 10``, optionally with generated rows added). Two copies of its database are consolidated
side by side in one run, each in its own child process, with the same bounded batch
(``MNEMOSYNE_SLEEP_BATCH``, what ``max_rows_per_summary`` sets):

- ``sleep_all_sessions``: the former way, Mnemosyne's ``sleep_all_sessions`` repeated until it
  consolidates nothing (every cycle visits every session with work, and every session's ``sleep``
  ends with a ``degrade_episodic`` over the whole episodic table);
- ``session loop``: ``consolidation.episodic.run_sleep`` as evening-batch runs it now (each session
  slept until its rows are taken, the degradation once; at most ``--max-sessions`` sessions).

Printed per way: wall seconds, CPU seconds of the child, cycles, rows consolidated, summaries,
episodic rows degraded, sessions slept and deferred; then the ratio of the CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mnemo_ops.jobs.evening_batch.consolidation import episodic  # noqa: E402
from mnemo_ops.mnemosyne.api import mnemosyne_environment  # noqa: E402

FORMER = r"""
import json, sys
from pathlib import Path
from mnemo_ops.mnemosyne import api as mnemosyne_api
from mnemo_ops.mnemosyne.sleep import choose_model
db_path = Path(sys.argv[1])
choose_model("aaak")
with mnemosyne_api.schema_initialisation_skipped():
    from mnemosyne.core.memory import Mnemosyne
    memory = Mnemosyne(session_id="mnemo-ops", db_path=db_path)
    memory.beam._deduplicate_memoria_cross_session = lambda: {}
    cycles = items = summaries = degraded = 0
    sessions = set()
    while True:
        outcome = memory.sleep_all_sessions()
        cycles += 1
        items += int(outcome.get("items_consolidated", 0) or 0)
        summaries += int(outcome.get("summaries_created", 0) or 0)
        degradation = outcome.get("degradation") or {}
        degraded += int(degradation.get("tier1_to_tier2", 0) or 0)
        degraded += int(degradation.get("tier2_to_tier3", 0) or 0)
        sessions |= {r.get("session_id") for r in outcome.get("session_results", [])}
        if not int(outcome.get("items_consolidated", 0) or 0):
            break
print(json.dumps({"cycles": cycles, "items_consolidated": items, "summaries_created": summaries,
                  "episodic_degraded": degraded, "sessions_scanned": len(sessions),
                  "sessions_deferred": 0}))
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _copy_home(home: Path, target: Path) -> Path:
    shutil.copytree(home, target)
    return next(target.rglob("data/mnemosyne.db"))


def former(db_path: Path, batch: int) -> dict:
    """Mnemosyne's sleep_all_sessions, repeated until it takes nothing."""
    environment = mnemosyne_environment(
        db_path.parent,
        db_path.parent.parent.parent,
        variables={"MNEMOSYNE_SLEEP_BATCH": str(batch)},
    )
    environment["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    output = subprocess.run(
        [sys.executable, "-c", FORMER, str(db_path)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def session_loop(db_path: Path, batch: int, max_sessions: int | None) -> dict:
    """evening-batch's consolidation as it runs now."""
    connection = __import__("mnemo_ops.database", fromlist=["open_memory_db"]).open_memory_db(
        db_path, readonly=True
    )
    try:
        pending = episodic.pending_work(connection, 3600)
    finally:
        connection.close()
    return episodic.run_sleep(
        db_path,
        db_path.parent.parent.parent,
        dry_run=False,
        model="aaak",
        max_rows_per_summary=batch,
        pending_rows=pending["eligible"] + pending["orphan_claims"],
        max_sessions=max_sessions,
    )


def main() -> None:
    """Consolidate two copies of the home, the former way and the current way; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--max-sessions", type=int, default=None)
    parser.add_argument("--skip-former", action="store_true")
    arguments = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mnemo-ops-sleep-bench-") as scratch:
        ways = [] if arguments.skip_former else [("sleep_all_sessions", former)]
        ways.append(("session loop", None))
        for name, way in ways:
            db_path = _copy_home(arguments.home, Path(scratch) / name.replace(" ", "-"))
            cpu, wall = _children_cpu(), time.perf_counter()
            if way is None:
                summary = session_loop(db_path, arguments.batch, arguments.max_sessions)
            else:
                summary = way(db_path, arguments.batch)
            figures = {
                "way": name,
                "wall_s": round(time.perf_counter() - wall, 1),
                "cpu_s": round(_children_cpu() - cpu, 1),
                **{
                    key: summary.get(key)
                    for key in (
                        "cycles",
                        "items_consolidated",
                        "summaries_created",
                        "episodic_degraded",
                        "sessions_scanned",
                        "sessions_deferred",
                    )
                },
            }
            rows.append(figures)
            print(json.dumps(figures), flush=True)
    if len(rows) == 2 and rows[1]["cpu_s"]:
        print(f"CPU ratio former / now: {rows[0]['cpu_s'] / rows[1]['cpu_s']:.1f}x")


if __name__ == "__main__":
    main()
