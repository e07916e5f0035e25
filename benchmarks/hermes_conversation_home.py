"""Build the benchmark-size Hermes conversation home and report what it holds and how long it took.

Usage: python benchmarks/hermes_conversation_home.py [--dir DIR] [--age-days 10]
       [--timeline sessions|written] [--sync-roles user,assistant] [--writer auto|plugin|mnemosyne]
       [--small] [--grow ROWS]

The home of issue 26 (``devtools.samples.hermes_conversations``, `BENCHMARK_SIZE`): ten gateway
chats of 19 sessions of 30 turns (5,700 turns), about 300 questions whose evidence turns are known,
written through the Hermes plugin's own ``sync_turn`` where ``mnemosyne-hermes`` is importable (the
4.0 venv), else through BeamMemory with the plugin's arguments. ``--small`` builds the tests' size
instead. Run it with the interpreter of the venv whose Mnemosyne (and plugin) should write it; the
home is left in DIR (default: a folder under /tmp/mnemo-ops-bench/) for the eval to measure.
``--grow ROWS`` then appends ROWS generated realistic rows (``realistic_memories``: sessions a day
apart up to now, those older than 7 days already consolidated, as Mnemosyne's auto-sleep leaves a
long history): the scaled home of the evening-batch measurement (``--age-days 10 --grow 113000``:
117k rows), run with ``live_agent_latency.py --home DIR --jobs evening-batch``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devtools.samples import hermes_conversations, realistic_memories  # noqa: E402


def main() -> None:
    """Build the home and print its manifest's figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--age-days", type=int, default=0)
    parser.add_argument("--timeline", choices=hermes_conversations.TIMELINES, default="sessions")
    parser.add_argument("--sync-roles", default="user,assistant")
    parser.add_argument("--writer", choices=hermes_conversations.WRITERS, default="auto")
    parser.add_argument("--small", action="store_true", help="the tests' size")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--grow", type=int, default=0, help="generated rows to append")
    arguments = parser.parse_args()
    os.environ.setdefault("MNEMOSYNE_NO_EMBEDDINGS", "1")
    sizes = {} if arguments.small else hermes_conversations.BENCHMARK_SIZE
    name = f"hermes-{'small' if arguments.small else 'benchmark'}-{arguments.timeline}"
    name += f"-aged{arguments.age_days}" if arguments.age_days else ""
    directory = arguments.dir or Path("/tmp/mnemo-ops-bench") / name
    started = time.monotonic()
    layout = hermes_conversations.build(
        directory,
        age_days=arguments.age_days,
        seed=arguments.seed,
        sync_roles=tuple(role.strip() for role in arguments.sync_roles.split(",") if role.strip()),
        writer=arguments.writer,
        timeline=arguments.timeline,
        **sizes,
    )
    grown = {}
    if arguments.grow:
        grown = realistic_memories.add_realistic_memories(layout.db_path, arguments.grow)
    seconds = time.monotonic() - started
    manifest = hermes_conversations.read_manifest(layout)
    shown = {
        key: manifest[key]
        for key in (
            "writer",
            "versions",
            "timeline",
            "age_days",
            "sync_roles",
            "turns",
            "rows",
            "questions",
            "episodic_rows",
            "unanswered",
            "write_seconds",
        )
    }
    if grown:
        shown["grown"] = grown
    print(json.dumps(shown, indent=2))
    print(f"built in {seconds:.1f} s: {layout.hermes_home}")


if __name__ == "__main__":
    main()
