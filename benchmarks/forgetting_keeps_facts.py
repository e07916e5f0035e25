"""Issue 42's goals over 60 days of nights: forgetting archives the noise and never loses a fact.

Run by hand (not part of the test suite), on either Mnemosyne line:

    python benchmarks/forgetting_keeps_facts.py                    # six conversations: <= 10 min
    python benchmarks/forgetting_keeps_facts.py --small            # the tests' home: a quick look
                                                                   # (its noise is too young to go)
    python benchmarks/forgetting_keeps_facts.py --schedule 1,7,30,60 --arms rule-on
    python benchmarks/forgetting_keeps_facts.py --conversations 10 # the benchmark-size home
    python benchmarks/forgetting_keeps_facts.py --repeat 4         # four homes: the spread

**One home is not enough to judge a point or two of recall.** The same conversations built twice
give a recall over every session a few questions apart before any night (top 5: 136 to 140 of 180
on 3.15): every build writes new memory ids and times, and near-ties fall differently. The change
a night makes moves with them. `--repeat` builds several homes and prints each home's before and
after and the mean change.

**The home.** A Hermes conversation home (``devtools/samples/hermes_conversations``: sessions as
Hermes makes them, written through the plugin's own ``sync_turn`` where ``mnemosyne-hermes`` is
installed, else through ``BeamMemory`` with the plugin's arguments), aged so that its last session
is the day before the first night: `CONVERSATIONS` (6) of the benchmark size's conversations (19
sessions of 30 turns each, 180 questions), so one run of both arms on one Mnemosyne line stays
within ten minutes on the shared 2-core machine (``--conversations 10``: the benchmark size). Into
it go **50 planted noise rows** (`NOISE`), written the way
the plugin writes a user turn (``[USER] <text>``, source ``conversation``, importance 0.5, scope
``session``; one Hermes session, so one provider, per row; in the conversations' own chats, each
at noon of one of their session days), every one of them content-free (``facts.is_chatter``).
**Five of them are important**: three pinned (Mnemosyne's ``pinned`` flag, the user's "keep this")
and two at importance 0.9 (what the agent's remember tool stores when told to keep something). A
greeting carries nothing a question could ask about, so its importance cannot come from its words:
it is important only because someone marked it so, and pinning or a high stored importance are the
two marks Mnemosyne keeps.

**The nights.** One copy of the home per arm: ``rule-on`` (the defaults: ``sleep.forget_keeps_facts:
true``) and ``rule-off`` (``forget_keeps_facts: false``, the old behaviour: any old, unused row).
Each runs ``evening-batch`` on the nights of ``--schedule``, days after the home's last session
(default: every night of the first week, then weekly, and day 60: 15 runs over 60 days), in this
process with its clock set to 21:00 of each night (freezegun); Mnemosyne's own consolidation, in its
child process, sees the real clock. The recall guard is off (``--guard`` keeps it on) and so is
``sleep.protect_eval_answers`` (``--protect-answers`` keeps it on): a real user's eval suite names a
handful of answers, not every fact, so the forgetting itself is what is measured.

**Printed**, before and after each arm, side by side:

- Mnemosyne's recall over every session (plain profile, no session): a question is a hit when its
  evidence row, or a current row derived from it, is in the top 5 / top 10. Derived: an episodic
  row whose ``summary_of`` names it (Mnemosyne's consolidation, NREM's summaries), a
  ``mnemo:derives`` edge from a current row to it, or a current canonical fact of source
  ``auto:<id>``;
- what the agent receives where it is asked: the plugin's prefetch (``MnemosyneEngine(profile=
  "hermes")``, the question's own session), evidence within the top 5 (as
  ``agent_receives_nights.py``);
- lost questions: all evidence rows no longer current, and no current working row that holds their
  facts (``database.facts.find_survivor`` on the changed database) is in the question's plain top
  10 (goal 0); beside it, how many have such a row anywhere;
- the planted noise archived (goal >= 45 of 50) and the important kept (goal 5 of 5);
- the share of working rows whose importance the importance stage raised (goal <= half) and
  ``database.importance_distribution``;
- the rows archived per rule (``chatter``, ``duplicate``, ``unused``) and the fact holders kept.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from datetime import date, datetime, timedelta
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from freezegun import freeze_time  # noqa: E402

from devtools.samples import hermes_conversations  # noqa: E402
from mnemo_ops import database  # noqa: E402
from mnemo_ops.database import facts  # noqa: E402
from mnemo_ops.evaluation.engines.base import Query  # noqa: E402
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine  # noqa: E402
from mnemo_ops.evaluation.evaluate import evaluate  # noqa: E402
from mnemo_ops.evaluation.suite import load_suite  # noqa: E402
from mnemo_ops.foundation.child_process import child_main, run_child  # noqa: E402
from mnemo_ops.jobs import run_job  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import copy_home  # noqa: E402
from mnemo_ops.settings import load_settings  # noqa: E402

ARMS = {
    "rule-on": "sleep:\n  forget_keeps_facts: true\n",
    "rule-off": "sleep:\n  forget_keeps_facts: false\n",
}
SCHEDULE = "1,2,3,4,5,6,7,14,21,28,35,42,49,56,60"
"""Nights, in days after the home's last session: every night for a week, then weekly, day 60."""

OPENERS = (
    "hi there",
    "hello again",
    "hey hey",
    "good morning",
    "good evening",
    "ok thanks",
    "thanks a lot",
    "haha nice",
    "lol okay",
    "hmm okay",
)
CLOSERS = ("!", " 🙂", ", sounds good", ", cool cool", " haha")
NOISE = [opener + closer for closer in CLOSERS for opener in OPENERS]
"""The 50 content-free user turns planted (ten openers times five endings, all different)."""
CONVERSATIONS = 6
"""Conversations in the default home (the benchmark size has 10; six keep a run of both arms
within ten minutes on the shared machine)."""
PINNED, HIGH = 3, 2
"""The important ones: the first three pinned, the next two at importance 0.9."""
HIGH_IMPORTANCE = 0.9


def _current(connection: sqlite3.Connection, table: str) -> set[str]:
    return {
        row[0]
        for row in connection.execute(
            f"SELECT id FROM {table} WHERE valid_until IS NULL "
            "AND (superseded_by IS NULL OR superseded_by = '')"
        )
    }


def plant(spec: dict) -> dict:
    """Runs in the child (the home's own Mnemosyne): write the noise rows as the plugin would, one
    Hermes session each, then give them their session's time and mark the important ones."""
    db_path, hermes_home = Path(spec["db_path"]), Path(spec["hermes_home"])
    writer = hermes_conversations._open_writer("auto", hermes_home, db_path, ["user"])
    connection = sqlite3.connect(db_path)
    rows_before = connection.execute("SELECT count(*) FROM working_memory").fetchone()[0]
    connection.close()
    ids, times = [], {}
    for text, (chat_key, day) in zip(spec["texts"], spec["places"]):
        writer.start(chat_key)
        memory_id = writer.write(chat_key, text, "").get("user")
        writer.end()
        if memory_id is None:
            raise RuntimeError(f"the writer stored no row for {text!r}")
        ids.append(memory_id)
        times[memory_id] = datetime.combine(date.fromisoformat(day), datetime.min.time()) + (
            timedelta(hours=12, seconds=len(ids))
        )
    writer.close()
    connection = sqlite3.connect(db_path)
    hermes_conversations.backdate(connection, times)
    with connection:
        connection.executemany(
            "UPDATE working_memory SET pinned = 1 WHERE id = ?", [(i,) for i in ids[:PINNED]]
        )
        connection.executemany(
            "UPDATE working_memory SET importance = ? WHERE id = ?",
            [(HIGH_IMPORTANCE, i) for i in ids[PINNED : PINNED + HIGH]],
        )
    rows_after = connection.execute("SELECT count(*) FROM working_memory").fetchone()[0]
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return {"ids": ids, "writer": writer.name, "rows_before": rows_before, "rows_after": rows_after}


def plant_noise(home) -> dict:
    """The planted rows' ids (the first `PINNED` + `HIGH` important), written in a child."""
    manifest = hermes_conversations.read_manifest(home)
    chats = manifest["conversations_written"]
    places = []
    for index in range(len(NOISE)):
        chat = chats[index % len(chats)]
        days = chat["session_days"]
        places.append((chat["chat_key"], days[(index // len(chats)) % len(days)]))
    base = {name: value for name, value in os.environ.items() if not name.startswith("MNEMOSYNE_")}
    # No trim and no auto-sleep while planting: the home's rows are already old.
    variables = {"MNEMOSYNE_NO_EMBEDDINGS": "1", "MNEMOSYNE_WM_TTL_HOURS": "1000000"}
    return run_child(
        "benchmarks.forgetting_keeps_facts",
        {
            "db_path": str(home.db_path),
            "hermes_home": str(home.hermes_home),
            "texts": NOISE,
            "places": places,
        },
        timeout=None,
        environment={**home.environ(base=base, variables=variables), "MNEMO_OPS_BENCH_CHILD": "1"},
    )


def lineage(db_path: Path) -> dict[str, set[str]]:
    """Row id -> the current rows derived from it (summaries, derives edges, canonical facts)."""
    derived: dict[str, set[str]] = {}
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        for summary_id, summary_of in connection.execute(
            "SELECT id, summary_of FROM episodic_memory WHERE valid_until IS NULL "
            "AND (superseded_by IS NULL OR superseded_by = '') AND coalesce(summary_of, '') != ''"
        ):
            for source in summary_of.split(","):
                derived.setdefault(source.strip(), set()).add(str(summary_id))
        if "graph_edges" in tables:
            current = _current(connection, "episodic_memory") | _current(
                connection, "working_memory"
            )
            for source, target in connection.execute(
                "SELECT source, target FROM graph_edges WHERE edge_type = 'mnemo:derives'"
            ):
                if str(source) in current:
                    derived.setdefault(str(target), set()).add(str(source))
        if "canonical_facts" in tables:
            for fact_id, source in connection.execute(
                "SELECT id, source FROM canonical_facts WHERE valid_until IS NULL "
                "AND source LIKE 'auto:%'"
            ):
                derived.setdefault(source[5:], set()).add(str(fact_id))
    finally:
        connection.close()
    return derived


def recall_everywhere(layout, suite) -> list[list[str]]:
    """Mnemosyne's plain recall of every question with no session: the top 10 ids per question."""
    engine = MnemosyneEngine(layout.db_path, profile="plain", hermes_home=layout.hermes_home)
    ranked = engine.recall_many(
        [Query(text=case.query, k=10, session=None) for case in suite.cases]
    )
    return [list(dict.fromkeys(item.id for item in found))[:10] for found in ranked]


def hits(suite, ranked: list[list[str]], derived: dict[str, set[str]], k: int) -> int:
    """Questions whose evidence, or a current row derived from it, is in the top `k`."""
    count = 0
    for case, found in zip(suite.cases, ranked):
        wanted = set(case.relevant)
        for evidence in case.relevant:
            wanted |= derived.get(evidence, set())
        count += bool(wanted & set(found[:k]))
    return count


def measure(layout, suite) -> dict:
    """Recall over every session (with lineage), what the plugin injects, importance's spread."""
    ranked = recall_everywhere(layout, suite)
    derived = lineage(layout.db_path)
    hermes = MnemosyneEngine(layout.db_path, profile="hermes", hermes_home=layout.hermes_home)
    received = evaluate(suite, hermes, k=5)
    connection = database.open_memory_db(layout.db_path, readonly=True)
    try:
        distribution = database.importance_distribution(connection)
    finally:
        connection.close()
    return {
        "ranked": ranked,
        "plain@5": hits(suite, ranked, derived, 5),
        "plain@10": hits(suite, ranked, derived, 10),
        "plain@10_evidence_only": hits(suite, ranked, {}, 10),
        "hermes_profile": hermes.profile_used,
        "received": received.passed,
        "received_lines": (received.receives or {}).get("lines_per_turn", 0),
        "importance": distribution,
    }


def run_nights(layout, config_text: str, schedule: list[int], guard: bool, protect: bool):
    """evening-batch on each night of `schedule` (days after the home's last session, the last
    one yesterday), at 21:00 of that night."""
    config = layout.directory / "bench-config.yaml"
    config.write_text(
        config_text
        + ("" if protect else "  protect_eval_answers: false\n")
        + ("" if guard else "guard:\n  enabled: false\n")
    )
    settings = load_settings(
        db=layout.db_path, state_dir=layout.state_dir, config=config, environ=layout.environ()
    )
    today = datetime.now().replace(hour=21, minute=0, second=0, microsecond=0)
    last = max(schedule)
    for day in schedule:
        started = time.monotonic()
        with freeze_time(today - timedelta(days=1 + last - day), tick=True):
            result = run_job(settings, "evening-batch", force=True, show_progress=False)
        changes = {k: v for k, v in result.changes.items() if v}
        print(
            f"  day {day:>3}: {result.status} {json.dumps(changes)} "
            f"({time.monotonic() - started:.0f} s)",
            flush=True,
        )
    return settings.state_db_path


def outcome(home, copy, suite, state_db: Path, noise: list[str], after: dict) -> dict:
    """What the nights archived and kept, and which questions lost their fact."""
    state = sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)
    try:
        archive = state.execute(
            "SELECT memory_key, detail FROM sleep_archive WHERE reason = 'forgotten' "
            "AND applied = 1 AND restored_at IS NULL"
        ).fetchall()
        raised = state.execute(
            "SELECT count(*) FROM sleep_importance WHERE applied = 1 AND restored_at IS NULL"
        ).fetchone()[0]
        holders = state.execute("SELECT count(*) FROM sleep_fact_holders").fetchone()[0]
    finally:
        state.close()
    forgotten = {key.partition(":")[2] for key, _ in archive}
    by_rule: dict[str, int] = {}
    for _, detail in archive:
        rule = json.loads(detail or "{}").get("rule") or "unused"
        by_rule[rule] = by_rule.get(rule, 0) + 1
    before_db = sqlite3.connect(f"file:{home.db_path}?mode=ro", uri=True)
    working_rows = before_db.execute("SELECT count(*) FROM working_memory").fetchone()[0]
    contents = dict(before_db.execute("SELECT id, content FROM working_memory"))
    before_db.close()
    after_db = sqlite3.connect(f"file:{copy.db_path}?mode=ro", uri=True)
    current = _current(after_db, "working_memory") | _current(after_db, "episodic_memory")
    after_db.close()
    connection = database.open_memory_db(copy.db_path, readonly=True)
    lost = lost_anywhere = evidence_archived = 0
    examples = []
    try:
        for case, found in zip(suite.cases, after["ranked"]):
            evidence_archived += sum(1 for memory_id in case.relevant if memory_id in forgotten)
            if any(memory_id in current for memory_id in case.relevant):
                continue
            survivors = {
                facts.find_survivor(connection, contents.get(memory_id), case.relevant)
                for memory_id in case.relevant
            } - {None}
            if not survivors:
                lost_anywhere += 1
            if not survivors & set(found[:10]):
                lost += 1
                if len(examples) < 3:
                    examples.append((contents.get(case.relevant[0]) or "")[:100])
    finally:
        connection.close()
    important = set(noise[: PINNED + HIGH])
    return {
        "archived": len(forgotten),
        "by_rule": by_rule,
        "kept_fact_holders": holders,
        "evidence_rows_archived": evidence_archived,
        "lost_questions": lost,
        "lost_questions_no_survivor_anywhere": lost_anywhere,
        "lost_examples": examples,
        "noise_archived": sum(1 for memory_id in noise if memory_id in forgotten),
        "noise_gone": sum(1 for memory_id in noise if memory_id not in current),
        "important_kept": sum(1 for memory_id in important if memory_id in current),
        "raised": raised,
        "working_rows": working_rows,
    }


def main() -> None:
    """Build the home, plant the noise, measure, run each arm's nights, measure again, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the tests' home")
    parser.add_argument("--schedule", default=SCHEDULE, help="nights, days after the last session")
    parser.add_argument("--guard", action="store_true", help="keep the recall guard on")
    parser.add_argument(
        "--protect-answers", action="store_true", help="keep sleep.protect_eval_answers on"
    )
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--conversations",
        type=int,
        default=None,
        help=f"conversations in the home (default {CONVERSATIONS}; the benchmark size: 10)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="build this many homes (each with its own memory ids) and print the spread",
    )
    arguments = parser.parse_args()
    schedule = sorted({int(day) for day in arguments.schedule.split(",")})
    os.environ.setdefault("MNEMOSYNE_NO_EMBEDDINGS", "1")
    started = time.monotonic()
    print(f"load average at the start {', '.join(f'{v:.1f}' for v in os.getloadavg())}", flush=True)
    every = [one_home(arguments, schedule) for _ in range(max(1, arguments.repeat))]
    if len(every) > 1:
        print_spread(every, arguments.arms.split(","))
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"total {time.monotonic() - started:.0f} s (load average at the end {load})")
    if arguments.json:
        data = every[0] if len(every) == 1 else every
        arguments.json.write_text(json.dumps(data, indent=1, default=str))


def print_spread(every: list[dict], arms: list[str]) -> None:
    """Each home's change of recall over every session, and the mean: every build writes new
    memory ids and times, so one home's figures move by a few questions from home to home before
    any night."""
    print()
    print(f"{len(every)} homes, recall over every session before -> after (change):")
    for arm in arms:
        for metric in ("plain@5", "plain@10"):
            changes = [home[arm][metric] - home["before"][metric] for home in every]
            pairs = ", ".join(f"{home['before'][metric]}->{home[arm][metric]}" for home in every)
            mean = sum(changes) / len(changes)
            print(f"  {arm} {metric}: {pairs}; mean change {mean:+.1f} (min {min(changes):+d})")


def one_home(arguments, schedule: list[int]) -> dict:
    """Build one home, measure it, run each arm's nights on a copy, measure again, print."""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="mnemo-ops-forgetting-"))
    sizes = {} if arguments.small else dict(hermes_conversations.BENCHMARK_SIZE)
    if not arguments.small:
        sizes["conversations"] = arguments.conversations or CONVERSATIONS
    home = hermes_conversations.build(work / "home", age_days=max(schedule), **sizes)
    planted = plant_noise(home)
    noise = planted["ids"]
    suite = load_suite(home.state_dir / "eval" / "suite.jsonl")
    manifest = hermes_conversations.read_manifest(home)
    print(
        f"home: {work / 'home'} ({len(suite.cases)} questions, {planted['rows_after']} working "
        f"rows, {len(noise)} noise rows planted by {planted['writer']}, Mnemosyne "
        f"{manifest['versions']}; built in {time.monotonic() - started:.0f} s)",
        flush=True,
    )
    results = {"schedule": schedule, "before": measure(home, suite)}
    for arm in arguments.arms.split(","):
        arm_started = time.monotonic()
        copy = copy_home(home, work / arm)
        print(f"{arm}:", flush=True)
        state_db = run_nights(copy, ARMS[arm], schedule, arguments.guard, arguments.protect_answers)
        after = measure(copy, suite)
        results[arm] = {**after, **outcome(home, copy, suite, state_db, noise, after)}
        results[arm]["seconds"] = round(time.monotonic() - arm_started)
    cases = len(suite.cases)
    before = results["before"]
    print()
    print(
        f"{cases} questions; nights on days {','.join(map(str, schedule))}; received through "
        f"the {before['hermes_profile']} profile (the question's own session, top 5)"
    )
    print(
        f"{'':<10} {'plain@5':>8} {'plain@10':>9} {'received':>9} {'lost':>5} {'noise':>6} "
        f"{'kept':>5} {'raised':>12} {'>=0.65':>7}  archived by rule, fact holders kept"
    )
    print(
        f"{'before':<10} {before['plain@5']:>8} {before['plain@10']:>9} {before['received']:>9} "
        f"{'':>5} {'':>6} {'':>5} {'':>12} {before['importance']['at_or_above_cut']:>7}"
    )
    for arm in arguments.arms.split(","):
        figures = results[arm]
        print(
            f"{arm:<10} {figures['plain@5']:>8} {figures['plain@10']:>9} "
            f"{figures['received']:>9} {figures['lost_questions']:>5} "
            f"{figures['noise_archived']:>3}/{len(noise):<2} "
            f"{figures['important_kept']:>3}/{PINNED + HIGH} "
            f"{figures['raised'] / figures['working_rows']:>12.1%} "
            f"{figures['importance']['at_or_above_cut']:>7}  "
            f"{figures['archived']} {json.dumps(figures['by_rule'])}, "
            f"{figures['kept_fact_holders']} kept ({figures['seconds']} s)"
        )
    for arm in arguments.arms.split(","):
        figures = results[arm]
        print(
            f"{arm}: evidence rows archived {figures['evidence_rows_archived']}; questions with "
            f"no current evidence and no fact holder anywhere "
            f"{figures['lost_questions_no_survivor_anywhere']}; noise gone (any cause) "
            f"{figures['noise_gone']}; importance {json.dumps(figures['importance']['bands'])}"
        )
        for example in figures["lost_examples"]:
            print(f"  lost: {example!r}")
    print(f"importance before: {json.dumps(before['importance']['bands'])}")
    print(
        "goals: plain@5/@10 and received not lower than before; lost 0 with the rule on; "
        f"noise >= 45/{len(noise)}; kept {PINNED + HIGH}/{PINNED + HIGH}; raised <= 50%"
    )
    print(f"this home: {time.monotonic() - started:.0f} s", flush=True)
    return results


if __name__ == "__main__":
    if os.environ.get("MNEMO_OPS_BENCH_CHILD"):
        child_main(plant)
    main()
