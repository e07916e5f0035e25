"""The sleep stages at 10k / 100k / 1M memories: time per night, growth per 10x rows, peak memory.

Run by hand (not part of the test suite):

    python benchmarks/sleep_stages.py                           # 10k and 100k
    python benchmarks/sleep_stages.py --sizes 10000,100000,1000000

For each size a realistic home (``devtools.samples.realistic_memories``: the sample home written by
Mnemosyne, grown by SQL with Zipf-distributed text, recurring casts and topics, 5% near-duplicate
turns, a summary per 40 rows; each row's ``memory_type`` then given by Mnemosyne's own classifier,
as ``remember`` does, and the canonical lineage rows the promotion trigger writes for the user's
stated facts) is built once into ``--dir`` and reused by later runs; every run works on a
fresh copy. Each night runs in its own child process (so its wall time and peak RSS are its
own), the four sleep steps through the job's runner (lock, ledger row, metered transactions; the
recall guard off, its cost is ``benchmarks/recall_quality.py``'s) on a clock frozen at that night:

- **first night**: every memory seen for the first time: a state row for each, the age pass over
  all, restatements checked up to ``sleep.reinforcement_rows_per_night`` (20 000), up to 50
  archived;
- **next night**: 1% new memories arrived since (realistic turns, their near-duplicates among
  them); the incremental night: the merge pass, the new rows checked, the age pass;
- **same night again**: nothing new; what a second run of the night costs (it must write nothing).

Printed side by side, all measured in this run: seconds per night (wall, and the CPU time of the
night's process, which a shared machine's load does not inflate), the growth in time per 10x rows
(linear is x10), each night's peak RSS, the longest write transaction on the memory database, and
the counts written. The machine may be shared: the nights run one after the other, never in parallel.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from devtools.samples.realistic_memories import cached_realistic_home  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import SampleLayout, copy_home  # noqa: E402

NEW_SHARE = 0.01
NEW_SEED = 11


def build(directory: Path, rows: int) -> SampleLayout:
    """The realistic home of `rows` rows, built once in a child (reused when present)."""
    layout = SampleLayout(directory / f"sleep-realistic-{rows}")
    if not layout.db_path.exists():
        started = time.perf_counter()
        cached_realistic_home(directory, rows, name=layout.directory.name)
        subprocess.run(
            [sys.executable, __file__, "--child", str(layout.directory), "classify"],
            check=True,
            env={**layout.environ(), "PYTHONPATH": str(REPOSITORY)},
            stdout=subprocess.DEVNULL,
        )
        print(f"built {rows:,} rows in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return layout


def promote(layout: SampleLayout, after_rowid: int = 0) -> int:
    """In a child: the canonical lineage rows the promotion trigger would have written.

    Every live working row that qualifies (a user statement, veracity stated, importance >= 0.7)
    gets its ``auto:<id>`` lineage in ``canonical_facts``, as ``mnemo-ops trigger install`` makes
    Mnemosyne's own writes do; those rows are exempt from forgetting, and the forgetting stage
    checks for them inside its write transactions, so the benchmark must have them.
    """
    from mnemo_ops.jobs.memory_maintain.trigger import (
        PROMOTION_MIN_IMPORTANCE,
        PROMOTION_SOURCES,
        PROMOTION_VERACITY,
    )

    connection = sqlite3.connect(layout.db_path)
    try:
        with connection:
            connection.execute(
                "INSERT INTO canonical_facts (owner_id, category, name, body, source, confidence, "
                "version, valid_from) SELECT 'default', 'auto:' || coalesce(nullif(memory_type, ''), "
                "'unknown'), id, content, 'auto:' || id, importance, 1, timestamp FROM working_memory "
                f"WHERE rowid > ? AND source IN ({','.join('?' * len(PROMOTION_SOURCES))}) "
                "AND veracity = ? AND importance >= ? AND trim(content) <> ''",
                (after_rowid, *PROMOTION_SOURCES, PROMOTION_VERACITY, PROMOTION_MIN_IMPORTANCE),
            )
            promoted = connection.total_changes
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return promoted


def classify(layout: SampleLayout, after_rowid: int = 0) -> dict:
    """In a child: each generated row's ``memory_type`` as Mnemosyne's own classifier gives it.

    The generator labels every row ``fact`` or ``preference``; Mnemosyne's ``remember`` runs its
    regex classifier on the text, which calls most conversation turns ``context`` (so the sleep
    stages give them the event kind, the fastest decay) and some ``instruction`` or ``fact``.
    """
    from mnemosyne.core.typed_memory import classify_memory

    connection = sqlite3.connect(layout.db_path)
    counts: dict[str, int] = {}
    try:
        rows = connection.execute(
            "SELECT rowid, content FROM working_memory WHERE rowid > ?", (after_rowid,)
        ).fetchall()
        updates = []
        for rowid, content in rows:
            memory_type = classify_memory(content or "").memory_type.value
            counts[memory_type] = counts.get(memory_type, 0) + 1
            updates.append((memory_type, rowid))
        with connection:
            connection.executemany(
                "UPDATE working_memory SET memory_type = ? WHERE rowid = ?", updates
            )
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return counts


def newest_timestamp(db_path: Path) -> datetime:
    """The newest working-memory timestamp (the generated history ends there)."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        text = connection.execute("SELECT max(timestamp) FROM working_memory").fetchone()[0]
    finally:
        connection.close()
    return datetime.fromisoformat(text)


def _child(layout: SampleLayout, *arguments: str) -> dict:
    """Run this script's `arguments` in a child; its JSON output and wall seconds."""
    environment = layout.environ()
    environment["PYTHONPATH"] = str(REPOSITORY)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", str(layout.directory), *arguments],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    output, errors = process.communicate()
    elapsed = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"child {arguments} failed:\n{errors[-3000:]}")
    result = json.loads(output.strip().splitlines()[-1])
    result["wall_s"] = round(elapsed, 2)
    return result


def add_new(layout: SampleLayout, rows: int, moment: str) -> dict:
    """In a child: 1% new realistic memories, written in the hours before `moment`."""
    from devtools.samples.realistic_memories import add_realistic_memories

    end = datetime.fromisoformat(moment)
    connection = sqlite3.connect(layout.db_path)
    before = connection.execute("SELECT max(rowid) FROM working_memory").fetchone()[0]
    connection.close()
    count = max(1, int(rows * NEW_SHARE))
    written = add_realistic_memories(
        layout.db_path, count, seed=NEW_SEED, end=end, consolidated_days=None
    )
    written["classified"] = classify(layout, after_rowid=before)
    written["promoted"] = promote(layout, after_rowid=before)
    # The generator spreads rows a day per session; put tonight's arrivals in the last hours, in
    # their order (a later turn restates an earlier one), a second apart.
    connection = sqlite3.connect(layout.db_path)
    try:
        with connection:
            connection.execute(
                "UPDATE working_memory SET timestamp = strftime('%Y-%m-%dT%H:%M:%f', ?, "
                "'+' || (rowid - ?) || ' seconds') WHERE rowid > ?",
                ((end - timedelta(seconds=count + 60)).isoformat(), before, before),
            )
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return written


def night(layout: SampleLayout, moment: str) -> dict:
    """In a child: the four sleep steps at `moment` through the runner; seconds, changes, peak RSS."""
    import resource

    from freezegun import freeze_time

    from mnemo_ops import jobs
    from mnemo_ops.core import runner
    from mnemo_ops.jobs.evening_batch.consolidation.batch import Step, run_steps
    from mnemo_ops.jobs.evening_batch.sleep import steps
    from mnemo_ops.settings import load_settings

    sleep_steps = (
        Step("reinforcement", steps.reinforcement_step),
        Step("prominence", steps.prominence_step),
        Step("forgetting", steps.forgetting_step),
        Step("edges", steps.edges_step),
    )
    settings = load_settings(
        db=layout.db_path, state_dir=layout.state_dir, environ=layout.environ()
    ).updated(guard={"enabled": False})
    with freeze_time(datetime.fromisoformat(moment), tick=True):
        cpu_started = time.process_time()
        started = time.perf_counter()
        result = runner.run_job(
            settings,
            "evening-batch",
            jobs.metered(lambda ctx: run_steps(ctx, sleep_steps)),
            show_progress=False,
            hooks=jobs.HOOKS,
        )
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
    if result.status != "ok":
        raise SystemExit(f"night failed: {result.error}")
    sleep = result.stats["sleep"]
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu_seconds, 2),
        "steps": {step["name"]: step["duration_s"] for step in result.stats["steps"]},
        "changes": result.changes,
        "observed": sleep.get("observed"),
        "reinforcement": sleep.get("reinforcement"),
        "longest_txn_ms": result.stats["transactions"]["longest_write_transaction_ms"],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def run_size(template: SampleLayout, rows: int, work_root: Path) -> dict:
    """The three nights on a fresh copy of the `rows` home."""
    work = Path(tempfile.mkdtemp(prefix="sleep-", dir=work_root))
    try:
        layout = copy_home(template, work / "home")
        first_moment = newest_timestamp(layout.db_path).replace(
            hour=21, minute=30, second=0, microsecond=0
        ) + timedelta(days=1)
        following = first_moment + timedelta(days=1)
        first = _child(layout, "night", first_moment.isoformat())
        added = _child(layout, "add", str(rows), (following - timedelta(hours=1)).isoformat())
        second = _child(layout, "night", following.isoformat())
        again = _child(layout, "night", following.isoformat())
        return {
            "rows": rows,
            "added": added,
            "first": first,
            "next": second,
            "again": again,
            "db_mb": round(layout.db_path.stat().st_size / (1 << 20), 1),
            "state_mb": round((layout.state_dir / "state.db").stat().st_size / (1 << 20), 1),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _growth(small: float, large: float, factor: float) -> str:
    ratio = large / max(small, 1e-9)
    return f"x{ratio ** (1 / math.log10(factor)):.1f}"


def main() -> None:
    """Measure the three nights at every size; print the table and the growth per 10x rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()) / "mnemo-ops-sleep-bench"
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        layout = SampleLayout(Path(arguments.child[0]))
        action, values = arguments.child[1], arguments.child[2:]
        if action == "classify":
            output = {"types": classify(layout), "promoted": promote(layout)}
        elif action == "add":
            output = add_new(layout, int(values[0]), values[1])
        else:
            output = night(layout, values[0])
        print(json.dumps(output))
        return
    arguments.dir.mkdir(parents=True, exist_ok=True)
    results = []
    for rows in [int(size) for size in arguments.sizes.split(",") if size.strip()]:
        template = build(arguments.dir, rows)
        result = run_size(template, rows, arguments.dir)
        results.append(result)
        print(json.dumps(result), file=sys.stderr, flush=True)
    print(
        f"{'memories':>10} {'first night':>12} {'next night':>11} {'same night':>11} "
        f"{'peak RSS first/next/same':>25} {'longest txn':>12} {'archived':>9} "
        f"{'confirmed':>10} {'db MB':>7} {'state MB':>9}"
    )
    for result in results:
        first, following, again = result["first"], result["next"], result["again"]
        nights = (first, following)
        print(
            f"{result['rows']:>10,} {first['seconds']:>11.1f}s {following['seconds']:>10.1f}s "
            f"{again['seconds']:>10.1f}s {first['peak_rss_mb']:>11.0f}/{following['peak_rss_mb']:.0f}/"
            f"{again['peak_rss_mb']:.0f} MB "
            f"{max(night['longest_txn_ms'] for night in nights):>9.1f} ms "
            f"{sum(night['changes'].get('memories_archived', 0) for night in nights):>9} "
            f"{sum(night['changes'].get('confirmations', 0) for night in nights):>10} "
            f"{result['db_mb']:>7.0f} {result['state_mb']:>9.0f}"
        )
    print("CPU seconds of the night's process (what the night costs, whatever the machine's load):")
    for result in results:
        print(
            f"{result['rows']:>10,} first {result['first']['cpu_seconds']:.1f} s, next "
            f"{result['next']['cpu_seconds']:.1f} s, same night {result['again']['cpu_seconds']:.1f} s"
        )
    for smaller, larger in zip(results, results[1:]):
        factor = larger["rows"] / smaller["rows"]
        print(
            f"{smaller['rows']:,} -> {larger['rows']:,}, growth per 10x rows: first night "
            + _growth(smaller["first"]["seconds"], larger["first"]["seconds"], factor)
            + ", next night "
            + _growth(smaller["next"]["seconds"], larger["next"]["seconds"], factor)
            + ", same night "
            + _growth(smaller["again"]["seconds"], larger["again"]["seconds"], factor)
            + ", CPU next night "
            + _growth(smaller["next"]["cpu_seconds"], larger["next"]["cpu_seconds"], factor)
            + ", peak RSS (next night) "
            + _growth(smaller["next"]["peak_rss_mb"], larger["next"]["peak_rss_mb"], factor)
        )
    for result in results:
        print(
            f"{result['rows']:,}: steps (s), first night {result['first']['steps']}; "
            f"next night {result['next']['steps']}; same night {result['again']['steps']}; "
            f"same night changes {result['again']['changes']}"
        )
    print("seconds: the run inside its child (runner included); the machine may be shared.")


if __name__ == "__main__":
    main()
