"""Orphan linking at 10k / 100k / 1M live rows, and associative recall before and after linking.

Run by hand (not part of the test suite):

    python benchmarks/orphan_linking.py               # 10k and 100k
    python benchmarks/orphan_linking.py --sizes 10000,100000,1000000
    python benchmarks/orphan_linking.py --sizes 0 --recall # only the recall figure
    python benchmarks/orphan_linking.py --segments 10000,100000,1000000  # CPU per orphan, merged
    python benchmarks/orphan_linking.py --round 100000 --max-rows 20000  # a round over runs

For each size a fresh database is created by Mnemosyne itself (its own schema, triggers and FTS
tables), the rows of realistic text are written by SQL (devtools.samples.realistic_memories: Zipf
words, a recurring cast, topics that come back), and one uncapped linking pass
runs through the same code the job uses. Printed side by side: orphans per second, and for each size
step the growth in rows against the growth in time (target: 10x rows cost at most 12x time).

--recall builds the sample database, derives a small suite from it (each sample memory as a query;
the other memories of its session are the relevant answers) and measures Mnemosyne's
recall_enhanced(top_k=3, use_associative=True) with MNEMOSYNE_ENHANCED_RECALL=1 (and
MNEMOSYNE_CROSS_SESSION=1) before and after
memory-maintain links the orphans, each on its own copy (recall writes counters and a query cache).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

import apsw  # noqa: E402

from devtools.samples.realistic_memories import (  # noqa: E402
    add_realistic_memories,
    cached_realistic_home,
)
from mnemo_ops.database import fts_segments  # noqa: E402
from mnemo_ops.foundation.clock import local_timestamp  # noqa: E402
from mnemo_ops.guard import probes  # noqa: E402
from mnemo_ops.guard.measure import measure  # noqa: E402
from mnemo_ops.jobs.memory_maintain import orphans  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import SampleLayout, build_sample, copy_home  # noqa: E402
from mnemo_ops.settings import load_settings  # noqa: E402

CREATE_SCHEMA = """
import sys
from pathlib import Path
from mnemo_ops.mnemosyne.api import open_mnemosyne
open_mnemosyne(Path(sys.argv[1]), session_id="benchmark")
"""

RECALL_SUITE = r"""
import json, os, sys
from pathlib import Path
from mnemo_ops.mnemosyne.api import open_mnemosyne
cases = json.loads(Path(sys.argv[2]).read_text())
sessions = {}
total = found_any = 0.0
for case in cases:
    # The agent recalls inside its session (Mnemosyne's default scope), or across all sessions
    # when the copy's config.yaml says cross_session: true.
    if case["session"] not in sessions:
        sessions[case["session"]] = open_mnemosyne(Path(sys.argv[1]), session_id=case["session"])
    memory = sessions[case["session"]]
    results = memory.beam.recall_enhanced(case["query"], top_k=3, use_associative=True, use_cache=False)
    ids = {result["id"] for result in results}
    relevant = set(case["relevant"])
    total += len(ids & relevant) / len(relevant)
    found_any += bool(ids & relevant)
print(json.dumps({"recall": total / len(cases), "hit_rate": found_any / len(cases), "cases": len(cases)}))
"""


def _environment(directory: Path) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update(
        {
            "HOME": str(directory / "home"),
            "HERMES_HOME": str(directory / "hermes"),
            "MNEMOSYNE_DATA_DIR": str(directory / "data"),
            "PYTHONPATH": str(REPOSITORY),
        }
    )
    return environment


def build_database(directory: Path, rows: int) -> tuple[Path, float]:
    """A Mnemosyne-created database with `rows` realistic live rows; returns it and the fill time."""
    (directory / "home").mkdir(parents=True)
    (directory / "data").mkdir()
    db_path = directory / "data" / "mnemosyne.db"
    subprocess.run(
        [sys.executable, "-c", CREATE_SCHEMA, str(db_path)],
        env=_environment(directory),
        check=True,
        capture_output=True,
    )
    started = time.perf_counter()
    add_realistic_memories(db_path, rows, seed=5)
    return db_path, time.perf_counter() - started


def link_once(db_path: Path) -> tuple[orphans.LinkTotals, float]:
    """One uncapped real linking pass, timed (wall clock, counting the orphans included)."""
    connection = apsw.Connection(str(db_path))
    connection.set_busy_timeout(5000)
    options = orphans.LinkOptions(max_rows=10**9)
    started = time.perf_counter()
    totals = orphans.link_orphans(
        orphans.LinkRun(connection=connection, options=options, dry_run=False)
    )
    elapsed = time.perf_counter() - started
    connection.close()
    return totals, elapsed


def scaling(sizes: list[int], keep: bool, repeat: int) -> None:
    """Print the linking rate per size and the growth ratios between sizes.

    The machine is shared, so each size below 1M rows is linked `repeat` times on fresh copies of the
    same filled database and the fastest pass counts (the least disturbed by other processes).
    """
    measured = []
    for size in sizes:
        directory = Path(tempfile.mkdtemp(prefix=f"orphan-linking-{size}-"))
        try:
            db_path, fill_s = build_database(directory / "filled", size)
            passes = []
            attempts = repeat if size < 1_000_000 else 1
            for attempt in range(attempts):
                if attempt == attempts - 1:  # the last pass may use the filled database itself
                    passes.append(link_once(db_path))
                    break
                trial = directory / f"pass-{attempt}"
                shutil.copytree(db_path.parent, trial)
                passes.append(link_once(trial / db_path.name))
                shutil.rmtree(trial)
            totals, elapsed = min(passes, key=lambda measured_pass: measured_pass[1])
            measured.append((size, totals, elapsed))
            spread = ", ".join(f"{seconds:.1f}" for _, seconds in passes)
            print(
                f"{size:>9,} rows: {totals.orphans_found:>9,} orphans  {totals.orphans_examined:>9,} examined  "
                f"{totals.edges_created:>9,} edges  {totals.orphans_unmatched:>6,} unmatched  "
                f"link {elapsed:8.1f} s  ({totals.orphans_found / elapsed:8.0f} orphans/s, "
                f"{totals.orphans_examined / elapsed:6.0f} examined/s)  [passes: {spread} s; fill {fill_s:.1f} s]",
                flush=True,
            )
        finally:
            if not keep:
                shutil.rmtree(directory, ignore_errors=True)
    for (small, _, small_s), (large, _, large_s) in zip(measured, measured[1:]):
        print(
            f"{small:,} -> {large:,}: rows x{large / small:.1f}, time x{large_s / small_s:.2f} "
            f"(target: at most x{1.2 * large / small:.0f})"
        )


QUALITY_SUITE = r"""
import json, sys
from pathlib import Path
from mnemo_ops.mnemosyne.api import open_mnemosyne
cases = json.loads(Path(sys.argv[2]).read_text())
memories = {}
hits = shared = 0.0
for case in cases:
    if case["session"] not in memories:
        memories[case["session"]] = open_mnemosyne(Path(sys.argv[1]), session_id=case["session"])
    results = memories[case["session"]].beam.recall_enhanced(
        case["query"], top_k=3, use_associative=True, use_cache=False)
    ids = [result["id"] for result in results if result["id"] != case["id"]]
    same = sum(1 for memory_id in ids if memory_id in case["relevant"])
    hits += bool(same)
    shared += same / max(1, len(ids))
print(json.dumps({"hit_rate": hits / len(cases), "precision": shared / len(cases)}))
"""


def link_with(db_path: Path, budget: int | None) -> orphans.LinkTotals:
    """One uncapped linking pass with the given match budget (None: the exact linker)."""
    connection = apsw.Connection(str(db_path))
    connection.set_busy_timeout(5000)
    totals = orphans.link_orphans(
        orphans.LinkRun(
            connection=connection,
            options=orphans.LinkOptions(max_rows=10**9, match_budget=budget),
            dry_run=False,
        )
    )
    connection.close()
    return totals


def quality(rows: int, budgets: list[int], cases: int) -> None:
    """Associative recall after linking with the exact linker and with each bounded one.

    One realistic database; each linker on its own copy. The suite: `cases` memories (every n-th
    by id) as queries, recalled in their session with ``recall_enhanced(top_k=3,
    use_associative=True)`` (MNEMOSYNE_ENHANCED_RECALL=1, cross-session on); a hit is another memory
    of the same session among the results (the top 3 and up to 5 graph neighbours).

    The recall guard's probes too (200 known-item probes drawn from the filled database, recalled
    the way the Hermes plugin's prefetch asks, as the guard measures them): recall and MRR per
    linker, so a linker that helps associative recall but costs the agent's prefetch shows it.
    """
    root = Path(tempfile.mkdtemp(prefix="orphan-linking-quality-"))
    try:
        db_path, _ = build_database(root / "filled", rows)
        connection = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
        probe_set = probes.refresh(connection, None, 200).probes
        everything = connection.execute(
            "SELECT id, content, session_id FROM working_memory WHERE session_id LIKE 'session-%' "
            "ORDER BY id"
        ).fetchall()
        by_session: dict[str, list[str]] = {}
        for row_id, _, session in everything:
            by_session.setdefault(session, []).append(row_id)
        step = max(1, len(everything) // cases)
        suite = [
            {"id": row_id, "query": content, "session": session, "relevant": by_session[session]}
            for row_id, content, session in everything[::step][:cases]
        ]
        # The matcher's decisions for the suite's rows: how often the budget changed the query.
        matcher = orphans.Matcher(connection, orphans.LinkOptions(), local_timestamp())
        matcher.prime([content for _, content, _ in everything])
        changed = scanned = 0
        for _, content, _ in everything:
            terms, scan = matcher.plan_query(content)
            scanned += scan
            changed += scan or len(terms) < len(matcher.terms_for(content))
        connection.close()
        (root / "suite.json").write_text(json.dumps(suite))
        print(
            f"{rows:,} realistic rows, {len(suite)} cases; default budget "
            f"{orphans.LinkOptions().match_budget}: the budget changed the query of "
            f"{changed / len(everything):.1%} of rows ({scanned / len(everything):.1%} by a scan)"
        )
        figures = {}
        for budget in [None, *budgets]:
            trial = root / f"budget-{budget}"
            shutil.copytree(root / "filled", trial, symlinks=True)
            trial_db = trial / "data" / db_path.name
            started = time.perf_counter()
            totals = link_with(trial_db, budget)
            elapsed = time.perf_counter() - started
            environment = _environment(trial) | {
                "MNEMOSYNE_ENHANCED_RECALL": "1",
                "MNEMOSYNE_CROSS_SESSION": "1",
            }
            completed = subprocess.run(
                [sys.executable, "-c", QUALITY_SUITE, str(trial_db), str(root / "suite.json")],
                env=environment,
                capture_output=True,
                text=True,
                check=True,
            )
            figures[budget] = json.loads(completed.stdout.strip().splitlines()[-1])
            settings = load_settings(
                db=trial_db, state_dir=trial / "state", environ=_environment(trial)
            )
            guard = measure(settings, trial_db, probe_set)
            figures[budget].update({"probe_recall": guard.recall, "probe_mrr": guard.mrr})
            name = "exact (every match scored)" if budget is None else f"budget {budget}"
            versus = (
                f"  (vs exact: hit rate {figures[budget]['hit_rate'] - figures[None]['hit_rate']:+.3f}"
                f", probe recall {guard.recall - figures[None]['probe_recall']:+.3f})"
                if budget is not None
                else ""
            )
            print(
                f"  {name:<28} edges {totals.edges_created:>7,}  link {elapsed:6.1f} s  "
                f"hit rate {figures[budget]['hit_rate']:.3f}  precision "
                f"{figures[budget]['precision']:.3f}  guard probes ({guard.profile}) recall "
                f"{guard.recall:.3f} MRR {guard.mrr:.3f}" + versus,
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _link_sample(
    source: Path, directory: Path, sample: int, budget: int | None, merged: bool = False
):
    """Link `sample` orphans on a fresh copy; (examined, seconds, SQLite steps, CPU seconds).

    With `merged`, the copy's FTS5 indexes are first merged towards one segment as memory-maintain
    does before linking (``database.fts_segments``, untimed).
    """
    work = Path(tempfile.mkdtemp(prefix="per-row-", dir=directory))
    try:
        copy = work / "mnemosyne.db"
        shutil.copyfile(source, copy)
        connection = apsw.Connection(str(copy))
        connection.set_busy_timeout(5000)
        if merged:
            for table in ("fts_working", "fts_episodes"):
                fts_segments.merge_segments(connection, table, 200, 10**6)
        # SQLite's own unit of work (virtual-machine steps, counted every 100), which the
        # machine's load does not change.
        steps = [0]

        def count(steps: list[int] = steps) -> bool:
            steps[0] += 100
            return False

        connection.set_progress_handler(count, 100)
        started, cpu = time.perf_counter(), time.process_time()
        totals = orphans.link_orphans(
            orphans.LinkRun(
                connection=connection,
                options=orphans.LinkOptions(max_rows=sample, match_budget=budget),
                dry_run=False,
            )
        )
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        connection.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return totals.orphans_examined, elapsed, steps[0], cpu


def complete_round(rows: int, max_rows: int, directory: Path, guard: bool) -> None:
    """A complete linking round on a copy of the `rows` home, spread over runs of `max_rows`.

    Each run is ``mnemo-ops run memory-maintain -o max_rows=N`` as a user runs it (the recall guard
    on unless `guard` is False), one after the other until a run completes the round. Printed per
    run: wall seconds, the CPU seconds of the run's processes, orphans examined, edges, the FTS5
    merge it made, the guard's verdict and the trial's seconds.
    """
    template = cached_realistic_home(directory, rows)
    work = Path(tempfile.mkdtemp(prefix="round-", dir=directory))
    try:
        layout = copy_home(template, work / "home")
        environment = layout.environ() | {"PYTHONPATH": str(REPOSITORY)}
        options = ["-o", f"max_rows={max_rows}"] + ([] if guard else ["-o", "guard.enabled=false"])
        for number in range(1, 100):
            cpu, started = _children_cpu(), time.perf_counter()
            completed = subprocess.run(
                [sys.executable, "-m", "mnemo_ops", "--json", "run", "memory-maintain", *options],
                env=environment,
                capture_output=True,
                text=True,
            )
            wall, cpu = time.perf_counter() - started, _children_cpu() - cpu
            result = json.loads(completed.stdout)
            linking = result["stats"].get("linking", {})
            merge = result["stats"].get("fts_merge", {}).get("merged", {})
            guard_stats = result["stats"].get("guard", {})
            print(
                f"run {number}: {result['status']:<7} {wall:6.1f} s wall  {cpu:6.1f} s CPU  "
                f"{linking.get('orphans_examined', 0):>7,} examined  "
                f"{result['changes'].get('edges_created', 0):>7,} edges  "
                f"merged {json.dumps({t: (m['segments_before'], m['segments_after']) for t, m in merge.items()})}  "
                f"guard {guard_stats.get('verdict')} (trial "
                f"{(guard_stats.get('trial') or {}).get('seconds', '-')} s)",
                flush=True,
            )
            if result["status"] != "ok" or linking.get("completed_round"):
                break
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def segments_cost(sizes: list[int], sample: int, directory: Path) -> None:
    """CPU seconds per linked orphan at each size, the index as built and merged to one segment.

    The marginal cost as in `per_row_cost` (`sample`, then 2 x `sample` orphans, each on a fresh
    copy, the difference per row), in CPU seconds of this process (the linking runs in it), with a
    warm page cache (the copy was just written). Printed: the segments of fts_working, the cost per
    orphan as built and merged, and each size's cost against the smallest size's.
    """
    rows: list[tuple[int, int, float, float]] = []
    for size in sizes:
        source = cached_realistic_home(directory, size).db_path
        reader = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
        segments = fts_segments.segment_count(reader, "fts_working")
        reader.close()
        costs = []
        for merged in (False, True):
            small = _link_sample(source, directory, sample, 400, merged)
            large = _link_sample(source, directory, 2 * sample, 400, merged)
            costs.append(max(1e-9, (large[3] - small[3]) / max(1, large[0] - small[0])))
        rows.append((size, segments, costs[0], costs[1]))
        print(
            f"{size:>9,} rows  fts_working {segments:>3} segments  CPU per orphan "
            f"{costs[0] * 1000:6.2f} ms as built, {costs[1] * 1000:6.2f} ms merged",
            flush=True,
        )
    base = rows[0]
    for size, _, built, merged in rows[1:]:
        print(
            f"  {base[0]:,} -> {size:,}: as built x{built / base[2]:.2f}, merged "
            f"x{merged / base[3]:.2f} (target: at most x1.3)"
        )


def per_row_cost(sizes: list[int], sample: int, budgets: list[int | None], directory: Path) -> None:
    """The marginal cost per examined orphan at each size, per budget.

    A full first pass at 1M rows takes hours on a shared 2-core machine, and what decides how the
    pass grows is whether the cost per row stays flat as the table grows (time = rows x cost per
    row). So `sample` and then 2 x `sample` orphans are linked, each on a fresh copy, and the cost
    per row is the difference divided by `sample`: the once-per-run work (counting the orphans, the
    vocabulary's size) drops out, as it does in a full pass over all the rows.
    """
    measured: dict[tuple[int, int | None], tuple[float, float]] = {}
    for size in sizes:
        source = cached_realistic_home(directory, size).db_path
        for budget in budgets:
            small = _link_sample(source, directory, sample, budget)
            large = _link_sample(source, directory, 2 * sample, budget)
            rows = max(1, large[0] - small[0])
            per_row_s = max(1e-9, (large[1] - small[1]) / rows)
            per_row_steps = (large[2] - small[2]) / rows
            measured[(size, budget)] = (per_row_s, per_row_steps)
            name = "exact" if budget is None else f"budget {budget}"
            print(
                f"{size:>9,} rows  {name:<11} {per_row_steps:>8,.0f} SQLite steps per row  "
                f"{per_row_s * 1000:6.2f} ms per row ({1 / per_row_s:6.0f} rows/s; all {size:,} "
                f"orphans in about {size * per_row_s:,.0f} s)",
                flush=True,
            )
    for budget in budgets:
        name = "exact" if budget is None else f"budget {budget}"
        steps = [
            f"{small:,} -> {large:,}: steps per row "
            f"x{measured[(large, budget)][1] / measured[(small, budget)][1]:.2f}, time per row "
            f"x{measured[(large, budget)][0] / measured[(small, budget)][0]:.2f}"
            for small, large in zip(sizes, sizes[1:])
        ]
        print(f"  {name}: " + "; ".join(steps))


def recall_figure() -> None:
    """Print Mnemosyne's associative recall on the sample suite before and after linking."""
    root = Path(tempfile.mkdtemp(prefix="orphan-linking-recall-"))
    try:
        layout = build_sample(root / "before")
        after = SampleLayout(root / "after")
        shutil.copytree(layout.directory, after.directory, symlinks=True)
        sessions = {}
        connection = apsw.Connection(str(layout.db_path), flags=apsw.SQLITE_OPEN_READONLY)
        for row_id, content, session in connection.execute(
            "SELECT id, content, session_id FROM working_memory ORDER BY id"
        ).fetchall():
            sessions.setdefault(session, []).append((row_id, content))
        connection.close()
        cases = [
            {
                "query": content,
                "session": session,
                "relevant": [other for other, _ in members if other != row_id],
            }
            for session, members in sessions.items()
            for row_id, content in members
            if len(members) > 1
        ]
        suite = root / "suite.json"
        suite.write_text(json.dumps(cases))
        linked = subprocess.run(
            [sys.executable, "-m", "mnemo_ops", "--json", "run", "memory-maintain"],
            env=after.environ() | {"PYTHONPATH": str(REPOSITORY)},
            capture_output=True,
            text=True,
        )
        edges = json.loads(linked.stdout)["changes"]["edges_created"]
        print(
            f"associative recall on the sample suite ({len(cases)} cases: each memory as the query, the other "
            f"memories of its session relevant; recall_enhanced top_k=3 plus up to 5 graph neighbours; "
            f"{edges} edges made by memory-maintain):"
        )
        for scope in ("in-session", "cross-session"):
            figures = {}
            for name, copy in (("before", layout), ("after", after)):
                trial = SampleLayout(root / f"{scope}-{name}")
                shutil.copytree(copy.directory, trial.directory, symlinks=True)
                config = trial.data_dir / "config.yaml"
                text = config.read_text()
                config.write_text(
                    text.replace(
                        "cross_session: false",
                        f"cross_session: {str(scope == 'cross-session').lower()}",
                    )
                )
                environment = trial.environ() | {
                    "MNEMOSYNE_ENHANCED_RECALL": "1",
                    "PYTHONPATH": str(REPOSITORY),
                }
                completed = subprocess.run(
                    [sys.executable, "-c", RECALL_SUITE, str(trial.db_path), str(suite)],
                    env=environment,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                figures[name] = json.loads(completed.stdout.strip().splitlines()[-1])
            print(
                f"  {scope:>13}: recall before {figures['before']['recall']:.3f} -> after "
                f"{figures['after']['recall']:.3f}"
                f"  (x{figures['after']['recall'] / max(figures['before']['recall'], 1e-9):.2f});  hit rate "
                f"{figures['before']['hit_rate']:.3f} -> {figures['after']['hit_rate']:.3f}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Parse the arguments and run the chosen measurements."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="10000,100000", help="comma-separated row counts (0: none)"
    )
    parser.add_argument(
        "--recall", action="store_true", help="also measure associative recall before/after"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated databases")
    parser.add_argument(
        "--repeat", type=int, default=3, help="linking passes per size below 1M (fastest counts)"
    )
    parser.add_argument(
        "--quality", type=int, default=0, help="rows for the exact-vs-bounded recall comparison"
    )
    parser.add_argument("--budgets", default="400,100", help="match budgets compared with exact")
    parser.add_argument("--cases", type=int, default=300, help="queries of the quality suite")
    parser.add_argument(
        "--per-row", default="", help="sizes for the cost per examined orphan (e.g. 10000,1000000)"
    )
    parser.add_argument(
        "--sample", type=int, default=3000, help="orphans linked per size (--per-row)"
    )
    parser.add_argument(
        "--segments",
        default="",
        help="sizes for the CPU per orphan as built and merged to one segment (e.g. 10000,1000000)",
    )
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mnemo-ops-bench")
    parser.add_argument(
        "--round", type=int, default=0, help="rows of the home for a complete round over runs"
    )
    parser.add_argument("--max-rows", type=int, default=20000, help="max_rows per run (--round)")
    parser.add_argument("--no-guard", action="store_true", help="--round with the guard off")
    arguments = parser.parse_args()
    if arguments.round:
        arguments.dir.mkdir(parents=True, exist_ok=True)
        complete_round(arguments.round, arguments.max_rows, arguments.dir, not arguments.no_guard)
        return
    if arguments.segments:
        arguments.dir.mkdir(parents=True, exist_ok=True)
        segments_cost(
            [int(size) for size in arguments.segments.split(",")], arguments.sample, arguments.dir
        )
        return
    if arguments.per_row:
        arguments.dir.mkdir(parents=True, exist_ok=True)
        per_row_cost(
            [int(size) for size in arguments.per_row.split(",")],
            arguments.sample,
            [int(b) or None for b in arguments.budgets.split(",")],
            arguments.dir,
        )
        return
    if arguments.quality:
        quality(arguments.quality, [int(b) for b in arguments.budgets.split(",")], arguments.cases)
    sizes = [int(size) for size in arguments.sizes.split(",") if int(size) > 0]
    if sizes:
        scaling(sizes, arguments.keep, max(1, arguments.repeat))
    if arguments.recall:
        recall_figure()


if __name__ == "__main__":
    main()
