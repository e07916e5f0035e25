"""The retrieval eval at 2,000 queries: both engines side by side, in one run.

Builds a throwaway Mnemosyne database (the sample conversations plus synthetic memories, every row
written through Mnemosyne's own ``remember`` in a contained child process), writes a 2,000-case
suite whose expectations are phrases of known memories, then evaluates it with the ``builtin`` and
``mnemosyne`` engines and prints queries per second for each and their ratio, with the metrics.

    python benchmarks/eval_2000.py [--memories 3000] [--queries 2000] [--seed 7]

Nothing outside a temp dir is touched (HOME, HERMES_HOME and MNEMOSYNE_DATA_DIR point into it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

SUBJECTS = [
    "Dana",
    "the server",
    "her sister",
    "the book club",
    "the garden",
    "the photo archive",
    "the landlord",
    "the cat",
    "the choir",
    "the bakery",
    "the cycling group",
    "the dentist",
    "the tax office",
    "the museum",
]
VERBS = [
    "mentioned",
    "scheduled",
    "cancelled",
    "moved",
    "repaired",
    "recommended",
    "ordered",
    "forgot",
    "painted",
    "booked",
    "reviewed",
    "measured",
    "photographed",
    "postponed",
]
OBJECTS = [
    "a {adj} {noun} on {day}",
    "the {adj} {noun} before {month}",
    "two {noun}s for the {adj} trip",
    "a {noun} that was {adj}",
    "the {noun} near the {adj} station",
]
ADJECTIVES = [
    "blue",
    "noisy",
    "fragile",
    "ancient",
    "cheap",
    "heavy",
    "seasonal",
    "remote",
    "shared",
    "spare",
    "electric",
    "wooden",
    "velvet",
    "crimson",
    "hollow",
    "frozen",
    "silent",
    "golden",
    "rusty",
    "quiet",
]
NOUNS = [
    "ladder",
    "kettle",
    "ticket",
    "bicycle",
    "lantern",
    "notebook",
    "violin",
    "backpack",
    "telescope",
    "printer",
    "umbrella",
    "compass",
    "teapot",
    "hammock",
    "projector",
    "microscope",
    "saxophone",
    "kayak",
    "sofa",
    "clock",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "March", "May", "July", "September", "November"]


def synthetic_memories(count: int, rng: random.Random) -> list[dict]:
    """Distinct sentences with a unique tag each, so every query has exactly one intended answer."""
    memories = []
    for number in range(count):
        phrase = rng.choice(OBJECTS).format(
            adj=rng.choice(ADJECTIVES),
            noun=rng.choice(NOUNS),
            day=rng.choice(DAYS),
            month=rng.choice(MONTHS),
        )
        tag = f"item{number:05d}"
        memories.append(
            {
                "key": tag,
                "content": f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {phrase} ({tag})",
                "source": "conversation",
            }
        )
    return memories


def build(root: Path, memories: int, queries: int, seed: int) -> tuple[Path, Path]:
    """The database and the suite in `root`."""
    from mnemo_ops.evaluation.engines.mnemosyne import run_worker
    from mnemo_ops.mnemosyne.sample_home import build_sample

    rng = random.Random(seed)
    layout = build_sample(root / "sample")
    rows = synthetic_memories(memories, rng)
    sessions = [
        {"session_id": f"bench-{start // 500}", "turns": rows[start : start + 500]}
        for start in range(0, len(rows), 500)
    ]
    started = time.perf_counter()
    run_worker(
        {"mode": "store", "db_path": str(layout.db_path), "sessions": sessions}, layout.environ()
    )
    print(
        f"stored {memories} synthetic memories through Mnemosyne in {time.perf_counter() - started:.1f} s"
    )
    suite = root / "suite.jsonl"
    with suite.open("w", encoding="utf-8") as handle:
        for number in range(queries):
            memory = rng.choice(rows)
            words = memory["content"].rsplit(" (", 1)[0].split()
            query = " ".join(rng.sample(words[1:], k=min(4, len(words) - 1)))
            tag = memory["content"].rsplit("(", 1)[1].rstrip(")")
            handle.write(
                json.dumps(
                    {"id": f"q{number}", "query": query, "expect": [tag], "category": "synthetic"}
                )
                + "\n"
            )
    return layout.db_path, suite


def main() -> None:
    """Build, evaluate with both engines, print the side-by-side table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-ops-bench-") as temporary:
        root = Path(temporary)
        os.environ.update(
            {
                "HOME": str(root / "home"),
                "HERMES_HOME": str(root / "hermes"),
                "MNEMOSYNE_DATA_DIR": str(root / "default-data"),
            }
        )
        (root / "home").mkdir()
        db_path, suite_path = build(root, arguments.memories, arguments.queries, arguments.seed)
        from mnemo_ops.evaluation.engines.builtin import BuiltinEngine
        from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
        from mnemo_ops.evaluation.evaluate import evaluate
        from mnemo_ops.evaluation.suite import load_suite

        suite = load_suite(suite_path)
        measured = {}
        for engine in (BuiltinEngine(db_path), MnemosyneEngine(db_path)):
            started = time.perf_counter()
            evaluation = evaluate(suite, engine, 10)
            elapsed = time.perf_counter() - started
            measured[engine.name] = (len(suite.cases) / elapsed, evaluation.metrics)
        print(f"\n{len(suite.cases)} queries over {arguments.memories} + sample memories, k=10")
        names = list(measured)
        print(
            f"{'engine':<12}{'queries/s':>12}"
            + "".join(f"{metric:>16}" for metric in measured[names[0]][1])
        )
        for name in names:
            rate, metrics = measured[name]
            print(
                f"{name:<12}{rate:>12.1f}"
                + "".join(f"{value:>16.3f}" for value in metrics.values())
            )
        ratio = measured["builtin"][0] / measured["mnemosyne"][0]
        print(
            f"\nbuiltin answers {ratio:.1f}x as many queries per second as mnemosyne "
            "(mnemosyne includes its snapshot copy and child process start)"
        )


if __name__ == "__main__":
    sys.exit(main())
