"""Recall quality before and after each writing job, side by side, and what the recall guard costs.

Usage: python benchmarks/recall_quality.py [--sessions 8] [--turns 300] [--dir DIR] [--keep] [--sleep-only]

On a generated aged conversation home (``devtools.samples.conversations``: multi-session
conversations written through Mnemosyne's own API, with an eval suite whose cases name their evidence
turns), each writing job runs on its own copy of the same home, and recall is measured before and
after with one fixed probe set and the suite, in both profiles (``hermes``: what the Hermes plugin
injects each turn; ``plain``: Mnemosyne's top 10; ``associative``: ``recall_enhanced`` with the graph
neighbours it appends, the edges NREM and REM write). Printed side by side:

- probe recall and MRR, and suite recall@10 and MRR@10, before -> after, per job and profile;
- Mnemosyne's sleep as it is (summary repair off, one summary per session) for comparison, which is
  what the guard refuses;
- the sleep stages' NREM and REM (summaries and extends edges) against the same night without them,
  on the home as it is and after memory-maintain linked it, with the number of summaries and edges
  and the share of summaries the guard's probes count as faithful (every probed source's answer
  terms inside the summary's first 500 characters, the cut recall returns);
- the job's time with the guard against the same job without it on another copy, and the guard's
  share of the guarded run (the machine may be shared: the ratio is what counts).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devtools.samples.conversations import build  # noqa: E402
from mnemo_ops import database  # noqa: E402
from mnemo_ops.evaluation.suite import load_suite  # noqa: E402
from mnemo_ops.guard import probes  # noqa: E402
from mnemo_ops.guard.measure import measure  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import SampleLayout, copy_home  # noqa: E402
from mnemo_ops.settings import load_settings  # noqa: E402

JOBS = ("memory-maintain", "evening-batch", "monthly-maintenance")
AS_MNEMOSYNE_SLEEPS = "evening_batch:\n  summary_repair: false\n  max_rows_per_summary: 5000\n"
WITHOUT_DREAMS = "sleep:\n  nrem: false\n  rem: false\n"
PROFILES = ("hermes", "plain", "associative")
PROFILE_CONFIG = {
    "hermes": "retrieval_eval:\n  profile: hermes\n",
    "plain": "retrieval_eval:\n  profile: plain\n",
    "associative": "retrieval_eval:\n  profile: plain\n  enhanced_recall: true\n"
    "  use_associative: true\n",
}


def figures(layout: SampleLayout, probe_set, profile: str, scratch: Path) -> dict[str, float]:
    """Probe and suite recall on `layout` in `profile`."""
    config = scratch / f"profile-{profile}.yaml"
    config.write_text(PROFILE_CONFIG[profile])
    settings = load_settings(
        db=layout.db_path, state_dir=layout.state_dir, config=config, environ=layout.environ()
    )
    os.environ.update(
        {k: v for k, v in layout.environ().items() if k in ("HERMES_HOME", "MNEMOSYNE_DATA_DIR")}
    )
    result = measure(
        settings, layout.db_path, probe_set, load_suite(layout.state_dir / "eval" / "suite.jsonl")
    )
    suite = result.suite.metrics
    return {
        "probe_recall": result.recall,
        "probe_mrr": result.mrr,
        "suite_recall": suite["recall@10"],
        "suite_mrr": suite["mrr@10"],
    }


def faithfulness(layout: SampleLayout) -> dict[str, float | int]:
    """NREM's summaries, and the share the guard's probes count as faithful (module docstring)."""
    from mnemo_ops.database.fts_query import Vocabulary, tokens

    connection = database.open_memory_db(layout.db_path, readonly=True)
    try:
        vocabulary = Vocabulary(connection)
        summaries = connection.execute(
            "SELECT content, summary_of FROM episodic_memory WHERE source = 'sleep-nrem'"
        ).fetchall()
        faithful = probed_sources = covered_sources = 0
        for content, summary_of in summaries:
            held = set(tokens(content[:500], limit=4096))
            verdicts = []
            for source_id in summary_of.split(","):
                row = connection.execute(
                    "SELECT content, session_id, source FROM working_memory WHERE id = ?",
                    (source_id,),
                ).fetchone()
                probe = row and probes.make_probe(source_id, row[0], row[1], row[2], vocabulary)
                if probe is not None:
                    verdicts.append(all(term in held for term in probe.answer_terms))
            probed_sources += len(verdicts)
            covered_sources += sum(verdicts)
            faithful += bool(verdicts) and all(verdicts)
        extends = connection.execute(
            "SELECT count(*) FROM graph_edges WHERE edge_type = 'mnemo:extends'"
        ).fetchone()[0]
    finally:
        connection.close()
    return {
        "summaries": len(summaries),
        "extends": extends,
        "faithful": faithful / len(summaries) if summaries else 0.0,
        "sources_covered": covered_sources / probed_sources if probed_sources else 0.0,
    }


def run(layout: SampleLayout, job: str, config_text: str, scratch: Path) -> tuple[float, dict]:
    """Run `job` on `layout` with `config_text`; return (seconds, result)."""
    config = scratch / f"{layout.directory.name}.yaml"
    config.write_text(config_text)
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "mnemo_ops", "--config", str(config), "--json", "run", job],
        env=layout.environ(),
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - started, json.loads(completed.stdout)


def main() -> None:
    """Build the home, run every job on copies, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=300, help="turns per session")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--sleep-only", action="store_true", help="only the NREM/REM comparison (no other job)"
    )
    arguments = parser.parse_args()
    root = arguments.dir or Path(tempfile.mkdtemp(prefix="mnemo-ops-recall-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        template = build(
            root / "template", sessions=arguments.sessions, turns_per_session=arguments.turns
        )
        print(
            f"home: {arguments.sessions} sessions x {arguments.turns} turns, written by Mnemosyne in "
            f"{time.perf_counter() - started:.0f} s ({root})"
        )
        connection = database.open_memory_db(template.db_path, readonly=True)
        probe_set = probes.refresh(connection, None, 200).probes
        connection.close()
        before = {profile: figures(template, probe_set, profile, root) for profile in PROFILES}
        rows = []
        dreams = []
        # (label, job, extra config, guarded, jobs run first with the guard off)
        cases = [] if arguments.sleep_only else [(job, job, "", True, ()) for job in JOBS]
        if not arguments.sleep_only:
            cases.append(
                (
                    "evening-batch (Mnemosyne's sleep as it is, no guard)",
                    "evening-batch",
                    AS_MNEMOSYNE_SLEEPS,
                    False,
                    (),
                )
            )
        cases += [
            ("evening-batch without NREM/REM", "evening-batch", WITHOUT_DREAMS, True, ()),
            ("evening-batch with NREM/REM", "evening-batch", "", True, ()),
            (
                "memory-maintain, evening-batch without NREM/REM",
                "evening-batch",
                WITHOUT_DREAMS,
                True,
                ("memory-maintain",),
            ),
            (
                "memory-maintain, evening-batch with NREM/REM",
                "evening-batch",
                "",
                True,
                ("memory-maintain",),
            ),
        ]
        for number, (label, job, extra, guarded, first) in enumerate(cases):
            guard_text = "" if guarded else "guard:\n  enabled: false\n"
            home = copy_home(template, root / f"run-{number}")
            for earlier in first:
                run(home, earlier, "guard:\n  enabled: false\n", root)
            seconds, result = run(home, job, guard_text + extra, root)
            unguarded_seconds = None
            if guarded and not first:
                bare = copy_home(template, root / f"bare-{number}")
                unguarded_seconds, _ = run(bare, job, "guard:\n  enabled: false\n" + extra, root)
                shutil.rmtree(bare.directory, ignore_errors=True)
            after = {profile: figures(home, probe_set, profile, root) for profile in PROFILES}
            if "NREM/REM" in label:
                dreams.append((label, faithfulness(home), result.get("changes", {})))
            guard = result.get("stats", {}).get("guard", {})
            rows.append(
                (
                    label,
                    result.get("status"),
                    guard.get("verdict", "off"),
                    seconds,
                    unguarded_seconds,
                    after,
                )
            )
            shutil.rmtree(home.directory, ignore_errors=True)
        print()
        columns = ("probe recall", "probe MRR", "suite R@10", "suite MRR")
        header = f"{'job':<55} {'status':<7} {'guard':<8} {'profile':<11} " + " ".join(
            f"{name:>14}" for name in columns
        )
        print(header)
        for profile in PROFILES:
            b = before[profile]
            print(
                f"{'(before)':<55} {'':<7} {'':<8} {profile:<11} {b['probe_recall']:>14.3f} "
                f"{b['probe_mrr']:>14.3f} {b['suite_recall']:>14.3f} {b['suite_mrr']:>14.3f}"
            )
        for label, status, verdict, _seconds, _bare, after in rows:
            for profile in PROFILES:
                b, a = before[profile], after[profile]
                cells = [
                    f"{b[key]:.3f}->{a[key]:.3f}"
                    for key in ("probe_recall", "probe_mrr", "suite_recall", "suite_mrr")
                ]
                print(
                    f"{label:<55} {status:<7} {verdict:<8} {profile:<11} "
                    + " ".join(f"{cell:>14}" for cell in cells)
                )
        print()
        print(
            f"{'NREM/REM':<55} {'summaries':>9} {'extends':>8} {'faithful':>9} {'sources in':>11}"
        )
        for label, found, _changes in dreams:
            print(
                f"{label:<55} {found['summaries']:>9} {found['extends']:>8} "
                f"{found['faithful']:>9.0%} {found['sources_covered']:>11.0%}"
            )
        print()
        print(f"{'job':<55} {'with guard':>11} {'without':>9} {'ratio':>7} {'guard share':>12}")
        for label, _status, _verdict, seconds, bare, _after in rows:
            if bare is None:
                continue
            print(
                f"{label:<55} {seconds:>10.1f}s {bare:>8.1f}s {seconds / bare:>6.2f}x "
                f"{(seconds - bare) / seconds:>11.0%}"
            )
    finally:
        if not arguments.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
