"""Benchmark: the topic map at 100k live memories, full build vs incremental update after 1% change.

Builds a Mnemosyne database (schema made by the real mnemosyne-memory package, through the sample
builder), fills it by SQL with synthetic memories on a few hundred themes, then times, side by side
in one run, the evening-batch topic-map step (a) as a full build (``--rebuild``) and (b) as the
incremental update after 1% of the memories changed (half edited, half new). It also times the
seed-map step. Target: incremental <= 5% of the full build.

Usage: python benchmarks/topic_map.py [--memories 100000] [--change 0.01] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import apsw

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.manifests import get_manifest
from mnemo_ops.core.results import JobResult
from mnemo_ops.database import transactions
from mnemo_ops.jobs.evening_batch.consolidation.batch import BatchState
from mnemo_ops.jobs.evening_batch.topics import steps as map_steps
from mnemo_ops.mnemosyne.sample_home import build_sample
from mnemo_ops.settings import load_settings

SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "ti",
    "vo",
    "ze",
    "pa",
    "qui",
    "dor",
    "fen",
    "gal",
    "hum",
    "jor",
]


def pseudo_word(generator: random.Random, syllables: int) -> str:
    """A pronounceable made-up word (so the vocabulary has a realistic spread of frequencies)."""
    return "".join(generator.choice(SYLLABLES) for _ in range(syllables))


def synthetic_contents(count: int, seed: int = 7) -> list[str]:
    """`count` memories: each has two words of one of 400 themes plus common and rare filler words."""
    generator = random.Random(seed)
    themes = [[pseudo_word(generator, 3) for _ in range(6)] for _ in range(400)]
    common = [pseudo_word(generator, 2) for _ in range(300)]
    rare = [pseudo_word(generator, 4) for _ in range(20000)]
    contents = []
    for _ in range(count):
        theme = generator.choice(themes)
        words = generator.sample(theme, 2) + generator.sample(common, 5) + generator.sample(rare, 4)
        generator.shuffle(words)
        contents.append(" ".join(words))
    return contents


def fill(db_path: Path, contents: list[str], prefix: str = "b") -> None:
    """Insert the memories as working rows (Mnemosyne's FTS triggers index them), in batches."""
    connection = apsw.Connection(str(db_path))
    rows = [
        (f"{prefix}{number:0{16 - len(prefix)}x}", content)
        for number, content in enumerate(contents)
    ]
    for batch in transactions.batched(rows, 5000):
        with transactions.immediate_transaction(connection):
            connection.executemany(
                "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance) "
                "VALUES (?, ?, 'conversation', datetime('now', 'localtime'), 'bench', 0.5)",
                batch,
            )
    connection.close()


def change(db_path: Path, share: float, total: int, seed: int = 11) -> int:
    """Edit half of `share` of the original rows and add the other half as new rows; return how many changed."""
    generator = random.Random(seed)
    amount = int(total * share)
    edited = generator.sample(range(total), amount // 2)
    new_contents = synthetic_contents(amount - len(edited), seed=seed)
    connection = apsw.Connection(str(db_path))
    with transactions.immediate_transaction(connection):
        for number in edited:
            connection.execute(
                "UPDATE working_memory SET content = content || ' edited' WHERE id = ?",
                (f"b{number:015x}",),
            )
    connection.close()
    fill(db_path, new_contents, prefix=f"n{seed:x}")
    return amount


def timed_step(settings, step, rebuild: bool) -> tuple[float, JobResult]:
    """Run one evening-batch step with a real JobContext; return seconds and the result."""
    result = JobResult(job="evening-batch")
    context = JobContext(
        settings=settings,
        manifest=get_manifest(settings, "evening-batch"),
        dry_run=False,
        result=result,
        options=settings.evening_batch.model_copy(update={"rebuild": rebuild}),
    )
    started = time.perf_counter()
    step(context, BatchState())
    return time.perf_counter() - started, result


def main() -> int:
    """Build the database, run both measurements, print the ratio."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--change", type=float, default=0.01)
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="measure each side N times and compare the fastest (other work on the machine only adds)",
    )
    parser.add_argument("--keep", type=Path, help="build in DIR and keep it")
    arguments = parser.parse_args()

    directory = arguments.keep or Path(tempfile.mkdtemp(prefix="mnemo-ops-bench-"))
    try:
        layout = build_sample(directory)
        started = time.perf_counter()
        fill(layout.db_path, synthetic_contents(arguments.memories))
        print(
            f"filled {arguments.memories:,} memories in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        settings = load_settings(
            db=layout.db_path, state_dir=layout.state_dir, environ=layout.environ()
        )

        full_runs, incremental_runs = [], []
        for attempt in range(arguments.repeat):
            full_runs.append(timed_step(settings, map_steps.topic_map_step, rebuild=True))
            seed_full_s, _ = timed_step(settings, map_steps.seed_map_step, rebuild=False)
            changed = change(
                layout.db_path, arguments.change, arguments.memories, seed=11 + attempt
            )
            incremental_runs.append(timed_step(settings, map_steps.topic_map_step, rebuild=False))
            seed_incremental_s, _ = timed_step(settings, map_steps.seed_map_step, rebuild=False)
            print(
                f"run {attempt + 1}: full {full_runs[-1][0]:.2f} s, incremental {incremental_runs[-1][0]:.2f} s "
                f"({incremental_runs[-1][0] / full_runs[-1][0]:.1%})",
                file=sys.stderr,
            )
        full_s, full = min(full_runs, key=lambda pair: pair[0])
        incremental_s, incremental = min(incremental_runs, key=lambda pair: pair[0])

        print(f"live memories:            {full.stats['topic_map']['live_memories']:,}")
        print(
            f"topics:                   {full.stats['topic_map']['topics']:,} "
            f"({full.stats['topic_map']['unclustered']:,} memories in no topic)"
        )
        print(
            f"full build (fastest of {arguments.repeat}): {full_s:.2f} s (mode {full.stats['topic_map']['mode']})"
        )
        print(
            f"incremental after {changed:,} changes (fastest of {arguments.repeat}): {incremental_s:.2f} s "
            f"(mode {incremental.stats['topic_map']['mode']}, {incremental.changes['memories_mapped']:,} mapped)"
        )
        print(f"ratio incremental / full: {incremental_s / full_s:.1%} (target <= 5%)")
        print(
            f"seed map: {seed_full_s:.2f} s after the full build, {seed_incremental_s:.2f} s after the update "
            f"({seed_incremental_s / full_s:.1%} of the full topic-map build)"
        )
        return 0 if incremental_s <= 0.05 * full_s else 1
    finally:
        if arguments.keep is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
