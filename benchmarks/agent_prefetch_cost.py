"""What a memory-maintain run costs the agent's per-turn prefetch, and where the time goes.

Run by hand (not part of the test suite), with the Hermes plugin installed (Mnemosyne 4.0):

    python benchmarks/agent_prefetch_cost.py                      # the small home, 600 remembered facts
    python benchmarks/agent_prefetch_cost.py --benchmark-size --facts 500

On a Hermes conversation home written through the plugin's own ``sync_turn``
(``devtools/samples/hermes_conversations``), the agent also calls the plugin's ``mnemosyne_remember`` tool for
facts the user states (source ``user``, veracity ``stated``, importance 0.8: the rows the canonical
trigger promotes). Two copies: as it is, and after ``mnemo-ops run memory-maintain`` with the recall
guard off (so its canonical promotions and edges land). Printed side by side: canonical facts and
edges, the agent's per-turn cost through the plugin's prefetch (SQLite VM steps, Python calls, CPU
and wall time), and a cProfile of the prefetch on each copy (the functions with the largest share).
Then the same memory-maintain with the guard on (default floors): its verdict and cost figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from devtools.samples import hermes_conversations  # noqa: E402
from mnemo_ops.evaluation.engines.base import Query  # noqa: E402
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine  # noqa: E402
from mnemo_ops.evaluation.receives import summarize  # noqa: E402
from mnemo_ops.evaluation.suite import load_suite  # noqa: E402
from mnemo_ops.mnemosyne.api import mnemosyne_environment  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import SampleLayout, copy_home  # noqa: E402

REMEMBER = r"""
import json, sqlite3, sys
import mnemosyne_hermes as plugin
home, count = sys.argv[1], int(sys.argv[2])
db = home + "/mnemosyne/data/mnemosyne.db"
connection = sqlite3.connect(db)
rows = connection.execute(
    "SELECT session_id, content FROM working_memory WHERE content LIKE '[USER] %' "
    "AND length(content) > 60 ORDER BY rowid LIMIT ?", (count,)).fetchall()
connection.close()
providers = {}
for session, content in rows:
    key = session[len("hermes_"):]
    if key not in providers:
        provider = plugin.MnemosyneMemoryProvider()
        provider.initialize(key, hermes_home=home)
        providers[key] = provider
    providers[key].handle_tool_call("mnemosyne_remember", {
        "content": content[len("[USER] "):], "source": "user", "veracity": "stated",
        "importance": 0.8})
print(len(rows))
"""

PROFILE = r"""
import cProfile, json, pstats, sys
import mnemosyne_hermes as plugin
home, queries = sys.argv[1], json.loads(sys.argv[2])
providers = {}
profiler = cProfile.Profile()
for text, key in queries:
    if key not in providers:
        provider = plugin.MnemosyneMemoryProvider()
        provider.initialize(key, hermes_home=home)
        providers[key] = provider
    profiler.enable()
    providers[key].prefetch(text, session_id=key)
    profiler.disable()
stats = pstats.Stats(profiler)
total = sum(entry[3] for entry in stats.stats.values() if entry[3])  # cumulative of roots
root = max(entry[3] for entry in stats.stats.values())
top = sorted(stats.stats.items(), key=lambda item: item[1][3], reverse=True)
print(json.dumps([
    [f"{name[2]} ({name[0].split('/')[-1]}:{name[1]})", round(entry[3] / root, 3)]
    for name, entry in top[:40] if not name[2].startswith("<")
][:12]))
"""


def _run(script: str, layout: SampleLayout, *args: str) -> str:
    environment = mnemosyne_environment(
        layout.directory / "hermes" / "mnemosyne" / "data", layout.directory / "hermes"
    )
    environment["MNEMOSYNE_NO_EMBEDDINGS"] = "1"
    completed = subprocess.run(
        [sys.executable, "-c", script, str(layout.directory / "hermes"), *args],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.strip().splitlines()[-1]


def _counts(layout: SampleLayout) -> dict[str, int]:
    import sqlite3

    connection = sqlite3.connect(layout.db_path)
    try:
        return {
            "canonical_facts": connection.execute(
                "SELECT count(*) FROM canonical_facts WHERE valid_until IS NULL"
            ).fetchone()[0],
            "graph_edges": connection.execute("SELECT count(*) FROM graph_edges").fetchone()[0],
        }
    finally:
        connection.close()


def _cost(layout: SampleLayout, queries: list[Query]) -> dict[str, float]:
    engine = MnemosyneEngine(
        layout.db_path,
        profile="hermes",
        hermes_home=layout.directory / "hermes",
        cost_sample=len(queries),
    )
    engine.recall_many(queries)
    summary = summarize(engine.last_turns)
    return {
        "profile_used": engine.profile_used,
        "lines": round(summary.lines, 2),
        "canonical_lines": round(summary.canonical_lines, 2),
        **{name: round(value, 1) for name, value in summary.cost.items()},
    }


def _maintain(layout: SampleLayout, guard: bool) -> dict:
    config = layout.directory / "bench-config.yaml"
    config.write_text(f"guard:\n  enabled: {'true' if guard else 'false'}\n")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mnemo_ops",
            "--config",
            str(config),
            "--json",
            "run",
            "memory-maintain",
        ],
        env=layout.environ(),
        capture_output=True,
        text=True,
    )
    return json.loads(completed.stdout)


def main() -> None:
    """Build, remember, maintain, measure; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=600, help="facts the agent remembers")
    parser.add_argument("--queries", type=int, default=40, help="turns measured")
    parser.add_argument("--benchmark-size", action="store_true", help="the 5,700-turn home")
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    arguments = parser.parse_args()
    root = arguments.dir or Path(tempfile.mkdtemp(prefix="mnemo-ops-prefetch-cost-"))
    size = hermes_conversations.BENCHMARK_SIZE if arguments.benchmark_size else {}
    template = hermes_conversations.build(root / "template", **size)
    remembered = _run(REMEMBER, template, str(arguments.facts))
    suite = load_suite(template.state_dir / "eval" / "suite.jsonl")
    queries = [
        Query(text=case.query, k=5, session=case.session)
        for case in suite.cases[: arguments.queries]
    ]
    plan = json.dumps([[q.text, (q.session or "")[len("hermes_") :]] for q in queries])
    before = copy_home(template, root / "before")
    after = copy_home(template, root / "after")
    changed = _maintain(after, guard=False)
    rows = {
        "before": {**_counts(before), **_cost(before, queries)},
        "after memory-maintain": {**_counts(after), **_cost(after, queries)},
    }
    print(
        f"facts remembered through the plugin: {remembered}; memory-maintain changes: "
        f"{ {k: v for k, v in changed['changes'].items() if v} }"
    )
    names = list(rows["before"])
    print(f"{'':22}" + "".join(f"{name:>17}" for name in names))
    for label, figures in rows.items():
        print(f"{label:22}" + "".join(f"{str(figures[name]):>17}" for name in names))
    for label, layout in (("before", before), ("after", after)):
        print(f"\nprefetch profile, {label} (share of the prefetch's time):")
        for function, share in json.loads(_run(PROFILE, layout, plan)):
            print(f"  {share:6.1%}  {function}")
    guarded = _maintain(copy_home(template, root / "guarded"), guard=True)
    guard = guarded["stats"].get("guard", {})
    print(
        f"\nwith the guard: {guarded['status']}, verdict {guard.get('verdict')}; "
        f"problems: {guard.get('problems')}"
    )
    print(f"cost figures: {json.dumps(guard.get('cost'))}")


if __name__ == "__main__":
    main()
