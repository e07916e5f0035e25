"""What seven nightly cycles do to what the agent receives, with each lever on and off, side by side.

Run by hand (not part of the test suite), with the Hermes plugin installed (Mnemosyne 4.0):

    python benchmarks/agent_receives_nights.py                     # the benchmark-size home, fresh
    python benchmarks/agent_receives_nights.py --age-days 10       # the same home, 10 days older
    python benchmarks/agent_receives_nights.py --small --nights 2  # a quick look

The Hermes conversation home (``devtools/samples/hermes_conversations``, written through the plugin's own
``sync_turn``) is copied once per arm: ``baseline`` (every sleep stage as configured, the importance
and graduation stages off), ``importance`` (the importance stage on) and ``graduation`` (importance
and graduation on: the owner's statements made global rows a new conversation receives). Each arm runs
``evening-batch`` once a night for N nights (in this process, its clock set to 21:00 of each night in
turn, so the sleep stages see N nights; Mnemosyne's own consolidation, in its child process, sees
the real clock). The recall guard is off by default (``--guard`` keeps it on: then every night costs
a trial too). Then, at the real time, the plugin's own prefetch is asked every question of the
home's suite: the evidence received (per category), lines, characters and canonical lines per turn,
the per-turn cost (SQLite VM steps and Python calls, the guard's units), and Mnemosyne's plain
recall@10 beside it; then every question again in a brand-new conversation (``new conv``: what a
fact said in any earlier conversation brings to the next one). Printed as one table, before and
after each arm.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from freezegun import freeze_time  # noqa: E402

from devtools.samples import hermes_conversations  # noqa: E402
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine  # noqa: E402
from mnemo_ops.evaluation.evaluate import evaluate  # noqa: E402
from mnemo_ops.evaluation.suite import load_suite  # noqa: E402
from mnemo_ops.jobs import run_job  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import copy_home  # noqa: E402
from mnemo_ops.settings import load_settings  # noqa: E402

ARMS = {
    "baseline": "sleep:\n  importance: false\n  graduate: false\n",
    "importance": "sleep:\n  importance: true\n  graduate: false\n",
    "graduation": "sleep:\n  importance: true\n  graduate: true\n",
}


def in_a_new_conversation(suite):
    """`suite` with every question asked in a brand-new conversation (a session key nothing was
    written in: the next CLI session, a new chat)."""
    return dataclasses.replace(
        suite, cases=[dataclasses.replace(case, session="") for case in suite.cases]
    )


def measure(layout, suite) -> dict:
    """What the plugin injects for every question where it is asked and in a new conversation,
    and plain recall@10 beside it."""
    figures = {}
    for profile, k, asked in (
        ("hermes", 5, suite),
        ("new-conversation", 5, in_a_new_conversation(suite)),
        ("plain", 10, suite),
    ):
        engine = MnemosyneEngine(
            layout.db_path,
            profile="hermes" if profile == "new-conversation" else profile,
            hermes_home=layout.hermes_home,
        )
        evaluation = evaluate(asked, engine, k=k)
        figures[profile] = {
            "profile_used": engine.profile_used,
            "hits": evaluation.passed,
            "cases": len(evaluation.outcomes),
            "per_category": {
                name: round(values.get(f"recall@{k}", 0.0), 3)
                for name, values in sorted(evaluation.per_category.items())
            },
            "receives": evaluation.receives,
        }
    return figures


def run_nights(layout, config_text: str, nights: int, guard: bool, directory: Path) -> list:
    """evening-batch once a night for `nights` nights, the last one yesterday; the runs' changes."""
    config = directory / "config.yaml"
    config.write_text(config_text + ("" if guard else "guard:\n  enabled: false\n"))
    settings = load_settings(
        db=layout.db_path, state_dir=layout.state_dir, config=config, environ=layout.environ()
    )
    today = datetime.now().replace(hour=21, minute=0, second=0, microsecond=0)
    changes = []
    for night in range(nights, 0, -1):
        with freeze_time(today - timedelta(days=night), tick=True):
            result = run_job(settings, "evening-batch", force=True, show_progress=False)
        changes.append({"status": result.status, **{k: v for k, v in result.changes.items() if v}})
        print(f"  night -{night}: {result.status} {json.dumps(changes[-1])}", flush=True)
    return changes


def row(name: str, figures: dict) -> str:
    """One line of the table."""
    hermes, plain, new = figures["hermes"], figures["plain"], figures["new-conversation"]
    receives = hermes["receives"] or {}
    cost = receives.get("cost_per_turn", {})
    return (
        f"{name:<22} {hermes['hits']:>4}/{hermes['cases']:<4} "
        f"{receives.get('lines_per_turn', 0):>6.2f} {receives.get('chars_per_turn', 0):>7.1f} "
        f"{receives.get('canonical_lines_per_turn', 0):>5.2f} {cost.get('sqlite_steps', 0):>9.0f} "
        f"{cost.get('python_calls', 0):>8.0f} {plain['hits']:>4}/{plain['cases']:<4} "
        f"{new['hits']:>4}/{new['cases']:<4}  "
        + " ".join(f"{category}={value}" for category, value in hermes["per_category"].items())
    )


def main() -> None:
    """Build the home, measure it, run each arm's nights, measure again, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--age-days", type=int, default=0)
    parser.add_argument("--nights", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="the tests' home")
    parser.add_argument("--guard", action="store_true", help="keep the recall guard on")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    arguments = parser.parse_args()
    os.environ.setdefault("MNEMOSYNE_NO_EMBEDDINGS", "1")
    work = Path(tempfile.mkdtemp(prefix="mnemo-ops-nights-"))
    sizes = {} if arguments.small else hermes_conversations.BENCHMARK_SIZE
    home = hermes_conversations.build(work / "home", age_days=arguments.age_days, **sizes)
    suite = load_suite(home.state_dir / "eval" / "suite.jsonl")
    results = {"home": {"age_days": arguments.age_days, "nights": arguments.nights}}
    print(f"home: {work / 'home'} ({len(suite.cases)} questions)", flush=True)
    results["before"] = measure(home, suite)
    for arm in arguments.arms.split(","):
        copy = copy_home(home, work / arm)
        print(f"{arm}:", flush=True)
        changes = run_nights(copy, ARMS[arm], arguments.nights, arguments.guard, work / arm)
        results[arm] = {"changes": changes, **measure(copy, suite)}
    print()
    print(
        f"{'':<22} {'received':<9} {'lines':>6} {'chars':>7} {'canon':>5} {'sqlite':>9} "
        f"{'python':>8} {'plain@10':<9} {'new conv':<9}  received per category"
    )
    print(row("before", results["before"]))
    for arm in arguments.arms.split(","):
        print(row(f"after {arguments.nights} nights, {arm}", results[arm]))
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
