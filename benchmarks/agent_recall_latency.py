"""What orphan linking costs the agent's recall: the Hermes plugin's recall timed before and after.

Run by hand (not part of the test suite):

    python benchmarks/agent_recall_latency.py                 # 100k realistic rows
    python benchmarks/agent_recall_latency.py --rows 10000 --queries 30

Mnemosyne's plain ``beam.recall`` (what the plugin calls each turn) gives every candidate a graph
bonus and counts its edges with ``LIKE '%id%'``, a full scan of ``graph_edges`` per candidate
(``docs/upstream-mnemosyne-graph-bonus-scan.md``). On one realistic home (built once into ``--dir``,
shared with the other benchmarks), two copies: as it is, and after memory-maintain has linked every
orphan (the recall guard off, so the edges land). The same known-item queries (the recall guard's
probe queries, drawn from the home) are recalled on each, one process per copy, as the plugin does:
``beam.recall(query, top_k=16, temporal_weight=0.2, temporal_halflife=48)``. Printed side by side:
the edges, and p50 / p90 / mean of the recall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from devtools.samples.realistic_memories import cached_realistic_home  # noqa: E402
from mnemo_ops import database  # noqa: E402
from mnemo_ops.guard import probes  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import SampleLayout, copy_home  # noqa: E402

TIMER = r"""
import json, sqlite3, sys, time
from pathlib import Path
from mnemosyne.core.memory import Mnemosyne
db, queries = Path(sys.argv[1]), json.loads(sys.argv[2])
instances, times = {}, []
for text, session in queries:
    memory = instances.setdefault(session, Mnemosyne(session_id=session, db_path=db))
    started = time.perf_counter()
    memory.beam.recall(text, top_k=16, temporal_weight=0.2, temporal_halflife=48)
    times.append(time.perf_counter() - started)
edges = sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
    "SELECT count(*) FROM graph_edges").fetchone()[0]
print(json.dumps({"edges": edges, "times": times}))
"""


def timed(layout: SampleLayout, queries: list[tuple[str, str]]) -> dict:
    """The recall times of `queries` on `layout`'s database, in a child process (Mnemosyne)."""
    environment = layout.environ()
    environment["PYTHONPATH"] = str(REPOSITORY)
    completed = subprocess.run(
        [sys.executable, "-c", TIMER, str(layout.db_path), json.dumps(queries)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def link_everything(layout: SampleLayout, rows: int) -> None:
    """memory-maintain with the guard off and no cap on linking, so every orphan gets its edges."""
    config = layout.directory / "link-all.yaml"
    config.write_text("guard:\n  enabled: false\ntransactions:\n  agent_share: 0\n")
    environment = layout.environ()
    environment["PYTHONPATH"] = str(REPOSITORY)
    subprocess.run(
        [sys.executable, "-m", "mnemo_ops", "--json", "--config", str(config), "run"]
        + ["memory-maintain", "--force", "-o", f"max_rows={rows * 2}"],
        env=environment,
        capture_output=True,
        check=True,
    )


def main() -> None:
    """Build or reuse the home, link a copy, time the plugin's recall on both."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mnemo-ops-bench")
    arguments = parser.parse_args()
    arguments.dir.mkdir(parents=True, exist_ok=True)
    template = cached_realistic_home(arguments.dir, arguments.rows)
    work = Path(tempfile.mkdtemp(prefix="recall-latency-", dir=arguments.dir))
    connection = database.open_memory_db(template.db_path, readonly=True)
    try:
        chosen = probes.refresh(connection, None, arguments.queries).probes
    finally:
        connection.close()
    queries = [(probe.query, probe.session_id or "default") for probe in chosen]
    before = copy_home(template, work / "as-is")
    after = copy_home(template, work / "linked")
    started = time.perf_counter()
    link_everything(after, arguments.rows)
    print(
        f"linked every orphan of {arguments.rows:,} rows in {time.perf_counter() - started:.0f} s"
    )
    for name, layout in (("as it is", before), ("linked", after)):
        figures = timed(layout, queries)
        times = sorted(figures["times"])
        print(
            f"  {name:<10} edges {figures['edges']:>9,}  recall p50 "
            f"{times[len(times) // 2] * 1000:7.1f} ms  p90 {times[int(len(times) * 0.9)] * 1000:7.1f} ms"
            f"  mean {sum(times) / len(times) * 1000:7.1f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
