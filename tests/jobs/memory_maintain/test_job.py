"""memory-maintain against the sample database written by the real Mnemosyne API, through the CLI."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.samples.synthetic_memories import add_synthetic_memories
from mnemo_ops.jobs.memory_maintain.orphans import edge_weight
from mnemo_ops.mnemosyne.sample_home import SampleLayout
from tests.conftest import run_cli
from tests.jobs.memory_maintain.test_trigger import _run_scenario
from tests.purity import assert_unchanged, sample_snapshot

LIVE = (
    "superseded_by IS NULL AND (valid_until IS NULL "
    "OR valid_until > strftime('%Y-%m-%dT%H:%M:%f', 'now', 'localtime'))"
)


def query(db_path: Path, sql: str, parameters=()) -> list[tuple]:
    """One read on a connection that is closed at once (none stays open across file hashing)."""
    connection = sqlite3.connect(db_path)
    try:
        return connection.execute(sql, parameters).fetchall()
    finally:
        connection.close()


def run_job(layout: SampleLayout, *arguments: str, env: dict[str, str] | None = None) -> dict:
    """``mnemo-ops --json run memory-maintain ARGS`` in a subprocess; the parsed result."""
    completed = run_cli(layout, "--json", "run", "memory-maintain", *arguments, env=env)
    assert completed.returncode == 0, completed.stderr + completed.stdout
    return json.loads(completed.stdout)


def doctor_findings(layout: SampleLayout) -> list[tuple]:
    """``mnemosyne doctor --format json`` findings (code, severity) for the sample database."""
    completed = subprocess.run(
        [
            str(Path(sys.executable).parent / "mnemosyne"),
            "doctor",
            "--db",
            str(layout.db_path),
            "--format",
            "json",
        ],
        env=layout.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(completed.stdout)
    assert report["reference_contracts"]["graph_edges"]["dangling_memory_endpoints"] == 0
    assert report["reference_contracts"]["canonical_facts"]["duplicate_current_slots"] == 0
    return sorted((finding["code"], finding["severity"]) for finding in report["findings"])


def orphans(db_path: Path) -> set[str]:
    """Live working rows with no edge at either end."""
    return {
        row[0]
        for row in query(
            db_path,
            (
                f"SELECT id FROM working_memory w WHERE {LIVE} "
                "AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.source = w.id OR e.target = w.id)"
            ),
        )
    }


def our_edges(db_path: Path) -> list[tuple]:
    """The related_to edges (source, target, weight) in a stable order."""
    return sorted(
        query(
            db_path, "SELECT source, target, weight FROM graph_edges WHERE edge_type = 'related_to'"
        )
    )


def current_auto_facts(db_path: Path) -> list[tuple]:
    """Current auto canonical rows without their timestamps and ids."""
    return sorted(
        query(
            db_path,
            (
                "SELECT owner_id, category, name, body, source, round(confidence, 6), version FROM canonical_facts "
                "WHERE source LIKE 'auto:%' AND valid_until IS NULL"
            ),
        )
    )


def copy_sample(layout: SampleLayout, target: Path) -> SampleLayout:
    """A second, independent copy of a sample home."""
    shutil.copytree(layout.directory, target, symlinks=True)
    return SampleLayout(target)


@pytest.mark.heavy
def test_dry_run_counts_what_the_real_run_does_and_a_second_run_does_nothing(sample):
    findings_before = doctor_findings(sample)
    orphans_before = orphans(sample.db_path)
    assert (
        len(orphans_before) == 35
    )  # the sample's own edges join gist_/fact_ nodes, never working ids

    before = sample_snapshot(sample)
    dry = run_job(sample, "--dry-run")
    assert_unchanged(before, sample_snapshot(sample))
    assert dry["status"] == "dry-run"

    real = run_job(sample)
    assert real["status"] == "ok"
    assert real["changes"] == dry["changes"]
    assert real["stats"]["linking"] == dry["stats"]["linking"]
    assert (
        real["changes"]["canonical_promoted"] == 10
    )  # the sample's user-stated rows of importance >= 0.7
    assert real["changes"]["edges_created"] == len(our_edges(sample.db_path)) > 0

    # After a completed round the next run is incremental: nothing new, nothing examined.
    second = run_job(sample)
    assert set(second["changes"].values()) == {0}
    assert second["stats"]["linking"]["mode"] == "incremental"
    assert second["stats"]["linking"]["orphans_examined"] == 0
    # A full round (here forced) tries the unmatched rows again, and still changes nothing.
    full = run_job(sample, "-o", "full_round_days=0")
    assert set(full["changes"].values()) == {0}
    remaining = orphans(sample.db_path)
    assert full["stats"]["linking"]["mode"] == "full"
    assert full["stats"]["linking"]["orphans_examined"] == len(remaining)
    assert full["stats"]["linking"]["orphans_unmatched"] == len(remaining)
    assert real["stats"]["linking"]["orphans_unmatched"] == len(remaining)
    assert doctor_findings(sample) == findings_before


@pytest.mark.heavy
def test_incremental_runs_link_only_new_rows(sample):
    first = run_job(sample)
    assert first["stats"]["linking"]["mode"] == "full"
    add_synthetic_memories(sample.db_path, 120, seed=8)
    second = run_job(sample)
    linking = second["stats"]["linking"]
    assert linking["mode"] == "incremental"
    assert linking["orphans_found"] == linking["orphans_examined"] == 120
    assert second["changes"]["edges_created"] > 0
    third = run_job(sample)
    assert third["stats"]["linking"]["orphans_examined"] == 0
    assert set(third["changes"].values()) == {0}


def test_edges_follow_mnemosynes_linking_rules(sample):
    orphans_before = orphans(sample.db_path)
    live_targets = {
        row[0] for row in query(sample.db_path, f"SELECT id FROM working_memory WHERE {LIVE}")
    }
    result = run_job(sample, "--option", "k=2")
    edges = our_edges(sample.db_path)
    assert edges and result["changes"]["edges_created"] == len(edges)

    pairs = [frozenset((source, target)) for source, target, _ in edges]
    assert len(set(pairs)) == len(pairs), "a pair linked twice (in either direction)"
    by_source: dict[str, list[float]] = {}
    for source, target, weight in edges:
        assert source != target
        assert source in orphans_before and target in live_targets
        by_source.setdefault(source, []).append(weight)
    for weights in by_source.values():
        assert len(weights) <= 2
        assert sorted(weights, reverse=True) == [edge_weight(rank) for rank in range(len(weights))]
    # Every orphan either got edges, became some other orphan's target, or is counted as unmatched.
    targets = {target for _, target, _ in edges}
    unmatched = orphans_before - set(by_source) - targets
    assert unmatched == orphans(sample.db_path)
    assert result["stats"]["linking"]["orphans_unmatched"] == len(unmatched)


@pytest.mark.heavy
def test_backstop_closes_and_promotes_by_the_trigger_rules(sample):
    first = run_job(sample)
    assert first["changes"]["canonical_promoted"] == 10
    promoted = [row[2] for row in current_auto_facts(sample.db_path)]
    expired, superseded, changed, deleted = promoted[:4]
    # Changes made while no trigger is installed (as if by Mnemosyne before `trigger install`).
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.execute(
            "UPDATE working_memory SET valid_until = '2000-01-01T00:00:00' WHERE id = ?", (expired,)
        )
        connection.execute(
            "UPDATE working_memory SET superseded_by = ?, valid_until = '2000-01-01' WHERE id = ?",
            (changed, superseded),
        )
        connection.execute(
            "UPDATE working_memory SET content = content || ' (corrected)' WHERE id = ?", (changed,)
        )
        connection.execute("DELETE FROM working_memory WHERE id = ?", (deleted,))
        connection.execute(
            "INSERT INTO working_memory (id, content, source, veracity, importance, memory_type) "
            "VALUES ('newfact000000001', 'Dana keeps a sourdough starter named Bubbles', 'fact', 'stated', 0.9, 'fact')"
        )
    connection.close()

    dry = run_job(sample, "--dry-run")
    real = run_job(sample)
    assert dry["changes"] == real["changes"]
    assert real["changes"]["canonical_closed"] == 4
    assert real["changes"]["canonical_promoted"] == 2
    assert real["stats"]["canonical"]["close_reasons"] == {
        "closed": 2,
        "deleted": 1,
        "content-changed": 1,
    }

    current = {row[2]: row for row in current_auto_facts(sample.db_path)}
    assert not {expired, superseded, deleted} & set(current)
    assert current[changed][3].endswith("(corrected)") and current[changed][6] == 2
    assert current["newfact000000001"][1] == "auto:fact" and current["newfact000000001"][6] == 1
    history = query(
        sample.db_path,
        "SELECT version, valid_until IS NOT NULL FROM canonical_facts "
        "WHERE source = ? ORDER BY version",
        (f"auto:{changed}",),
    )
    assert history == [(1, 1), (2, 0)]
    assert set(run_job(sample)["changes"].values()) == {0}


@pytest.mark.heavy
def test_backstop_reaches_the_state_the_trigger_keeps(sample, tmp_path):
    with_trigger = sample
    without_trigger = copy_sample(sample, tmp_path / "without-trigger")
    assert run_cli(with_trigger, "trigger", "install", "--owner", "dana").returncode == 0
    _run_scenario(with_trigger)
    _run_scenario(without_trigger)
    # The sample's own rows predate the trigger in both copies: the backstop promotes them in both.
    run_job(with_trigger)
    run_job(without_trigger, env={"MNEMOSYNE_DEFAULT_OWNER": "dana"})

    def current(layout):
        # Versions differ by design: the trigger saw the content change (v1 closed, v2), the backstop only
        # the end; Mnemosyne's ids hash the time, so the two copies' new rows differ in id (name, source).
        rows = current_auto_facts(layout.db_path)
        assert all(source == f"auto:{name}" for _, _, name, _, source, _, _ in rows)
        return sorted(
            (owner, category, body, confidence)
            for owner, category, _, body, _, confidence, _ in rows
        )

    assert current(with_trigger) == current(without_trigger)
    assert len(current(with_trigger)) == 11


@pytest.mark.e2e
def test_per_run_cap_resumes_and_ends_where_one_run_ends(sample, tmp_path):
    add_synthetic_memories(sample.db_path, 400, seed=3)
    reference = copy_sample(sample, tmp_path / "reference")
    run_job(reference)

    results = [run_job(sample, "--option", "max_rows=60", "--option", "batch_size=25")]
    while not results[-1]["stats"]["linking"]["completed_round"]:
        results.append(run_job(sample, "--option", "max_rows=60", "--option", "batch_size=25"))
        assert len(results) < 30
    assert len(results) > 2
    assert results[0]["stats"]["linking"]["orphans_examined"] == 60
    assert results[1]["stats"]["linking"]["resumed_after"] is not None
    assert any(warning["code"] == "orphan-linking-capped" for warning in results[0]["warnings"])
    assert our_edges(sample.db_path) == our_edges(reference.db_path)
    assert current_auto_facts(sample.db_path) == current_auto_facts(reference.db_path)
    assert set(run_job(sample)["changes"].values()) == {0}


@pytest.mark.heavy
@pytest.mark.parametrize("option", ["k=0", "min_score=2", "colour=blue", "max_rows=many"])
def test_bad_options_are_usage_errors(sample, option):
    completed = run_cli(sample, "run", "memory-maintain", "--option", option)
    assert completed.returncode == 2
    assert completed.stderr.strip().count("\n") == 0


def test_closed_rows_never_become_targets_even_when_they_match_best(sample):
    """The orphan's best matches are closed or superseded rows: it still gets its live match."""
    add_synthetic_memories(
        sample.db_path, 400, seed=2
    )  # so 10 rows sharing a word are not "common"
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.execute(
            "INSERT INTO working_memory (id, content, source, importance) VALUES "
            "('aaazq00000000000', 'zebra quokka okapi', 'conversation', 0.5)"
        )
        for number in range(8):
            connection.execute(
                "INSERT INTO working_memory (id, content, source, importance, superseded_by, valid_until) "
                "VALUES (?, 'zebra quokka okapi', 'conversation', 0.5, ?, ?)",
                (
                    f"deadzq{number:010d}",
                    "aaazq00000000000" if number % 2 else None,
                    None if number % 2 else "2001-01-01T00:00:00",
                ),
            )
        # Longer, so worse by bm25 than every dead row, with words no other memory holds.
        connection.execute(
            "INSERT INTO working_memory (id, content, source, importance) VALUES "
            "('zzzzq00000000000', 'zebra quokka okapi xqone xqtwo', 'conversation', 0.5)"
        )
    connection.close()
    run_job(sample, "--option", "min_score=0")  # no floor: only liveness decides here
    edges = [edge for edge in our_edges(sample.db_path) if "zq" in edge[0] or "zq" in edge[1]]
    # The orphan first in id order finds the live row beyond the dead ones (fetching deeper).
    assert [edge[:2] for edge in edges] == [("aaazq00000000000", "zzzzq00000000000")]


def _insert_stated_fact(db_path: Path, row_id: str) -> None:
    connection = sqlite3.connect(db_path)
    with connection:
        connection.execute(
            "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance, "
            "veracity, memory_type) VALUES (?, ?, 'user', '2026-06-01T00:00:00', 's', 0.8, "
            "'stated', 'fact')",
            (row_id, f"Dana stated fact {row_id}"),
        )
    connection.close()


@pytest.mark.heavy
def test_backstop_runs_incrementally_while_the_trigger_is_current(sample):
    assert run_cli(sample, "trigger", "install").returncode == 0
    first = run_job(sample)
    assert first["stats"]["canonical"]["mode"] == "full"
    second = run_job(sample)
    # Nothing new since: the preflight skips the recall guard's trial (two whole-file copies) and
    # the run writes nothing.
    assert second["stats"]["guard"]["verdict"] == "not-needed"
    assert set(second["changes"].values()) == {0}
    # A row written while the trigger was away: the incremental pass still sees it (it is new).
    assert run_cli(sample, "trigger", "uninstall").returncode == 0
    _insert_stated_fact(sample.db_path, "feedfacefeedface")
    assert run_cli(sample, "trigger", "install").returncode == 0
    third = run_job(sample)
    assert third["stats"]["canonical"]["mode"] == "incremental"
    assert third["changes"]["canonical_promoted"] == 1
    # A full pass is forced with full_round_days=0 and finds nothing more.
    full = run_job(sample, "-o", "full_round_days=0")
    assert full["stats"]["canonical"]["mode"] == "full"
    assert full["changes"]["canonical_promoted"] == 0


def test_backstop_is_always_full_without_the_trigger(sample):
    run_job(sample)
    _insert_stated_fact(sample.db_path, "beadbeadbeadbead")
    again = run_job(sample)
    assert again["stats"]["canonical"]["mode"] == "full"
    assert again["changes"]["canonical_promoted"] == 1


@pytest.mark.e2e
def test_backstop_cap_spreads_a_large_backlog_over_runs_and_ends_where_one_run_ends(
    sample, tmp_path
):
    """A history that predates the trigger is promoted a bounded share per run (issue 20: 290k
    facts at 1M rows made one run pass its timeout); the marks move only once the pass is whole, or
    the incremental runs that follow would never see the rest."""
    reference = copy_sample(sample, tmp_path / "reference")
    for layout in (sample, reference):
        assert run_cli(layout, "trigger", "install").returncode == 0
    run_job(reference)
    capped = ("-o", "backstop_max_rows=3")
    dry = run_job(sample, "--dry-run", *capped)
    runs = [run_job(sample, *capped)]
    assert dry["changes"] == runs[0]["changes"]
    while runs[-1]["changes"]["canonical_promoted"] == 3:
        runs.append(run_job(sample, *capped))
        assert len(runs) < 10
    assert [run["changes"]["canonical_promoted"] for run in runs] == [3, 3, 3, 1]
    assert [run["stats"]["canonical"]["mode"] for run in runs] == ["full"] * 4
    warned = ["canonical-backstop-capped" in {w["code"] for w in run["warnings"]} for run in runs]
    assert warned == [True, True, True, False]
    assert current_auto_facts(sample.db_path) == current_auto_facts(reference.db_path)
    # The pass is whole, so the marks moved: with nothing new the next run needs no trial at all.
    after = run_job(sample, *capped)
    assert after["stats"]["guard"]["verdict"] == "not-needed"
    assert set(after["changes"].values()) == {0}


def test_linking_can_be_turned_off_and_the_backstop_still_promotes(sample):
    """``link: false`` (docs/jobs/memory-maintain.md: the Hermes plugin's plain recall pays for every edge and never
    follows one): no edge is made, the canonical backstop still runs, and monitoring sees why."""
    edges_before = our_edges(sample.db_path)
    result = run_job(sample, "-o", "link=false")
    assert result["changes"]["edges_created"] == 0
    assert result["changes"]["canonical_promoted"] == 10
    assert our_edges(sample.db_path) == edges_before
    assert result["stats"]["linking"] == {"mode": "off"}
    assert "orphan-linking-off" in {warning["code"] for warning in result["warnings"]}
    assert run_job(sample)["changes"]["edges_created"] > 0  # on by default


@pytest.mark.heavy
@pytest.mark.guard
def test_a_run_with_nothing_new_makes_no_trial_and_a_new_row_brings_it_back(sample):
    """Between full passes a run with no row past either mark changes nothing, so the recall guard's
    trial (its cost at 1M rows: two copies of the file) is skipped; a new row means a trial again."""
    assert run_cli(sample, "trigger", "install").returncode == 0
    first = run_job(sample)
    assert first["stats"]["guard"]["verdict"] == "ok"
    idle = run_job(sample)
    assert idle["stats"]["guard"] == {
        "verdict": "not-needed",
        "reason": "no memory added since the last passes",
    }
    assert set(idle["changes"].values()) == {0}
    _insert_stated_fact(sample.db_path, "cafecafecafecafe")
    again = run_job(sample)  # the trigger promoted the row; the passes look at it under a trial
    assert again["stats"]["guard"]["verdict"] == "ok"
    assert again["stats"]["canonical"]["mode"] == "incremental"
    assert again["stats"]["linking"]["mode"] == "incremental"
    assert "cafecafecafecafe" in {row[2] for row in current_auto_facts(sample.db_path)}


def _segments(db_path: Path) -> int:
    return query(db_path, "SELECT count(DISTINCT segid) FROM fts_working_idx")[0][0]


def _add_rows_one_transaction_each(db_path: Path, count: int) -> None:
    """Rows written as the agent writes them, one transaction each: each adds an FTS5 segment."""
    connection = sqlite3.connect(db_path, isolation_level=None)
    try:
        for number in range(count):
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance) "
                "VALUES (?, ?, 'conversation', datetime('now', 'localtime'), 'segments', 0.5)",
                (f"seg{number:013d}", f"note {number} on the greenhouse heater and frost cloth"),
            )
            connection.execute("COMMIT")
    finally:
        connection.close()


@pytest.mark.heavy
def test_a_crowded_index_is_merged_before_linking_and_a_dry_run_only_says_so(sample):
    _add_rows_one_transaction_each(sample.db_path, 40)
    crowded = _segments(sample.db_path)
    assert crowded > 2, crowded  # FTS5's automerge leaves several levels of small segments
    options = ("--option", "fts_merge_above_segments=2")
    before = sample_snapshot(sample)
    dry = run_job(sample, "--dry-run", *options)
    assert dry["stats"]["fts_merge"]["planned"] == ["fts_working"]
    assert_unchanged(before, sample_snapshot(sample))
    matches_before = query(
        sample.db_path, "SELECT rowid FROM fts_working WHERE fts_working MATCH 'greenhouse'"
    )

    real = run_job(sample, *options)

    assert real["status"] == "ok", real["error"]
    merged = real["stats"]["fts_merge"]["merged"]["fts_working"]
    assert merged["segments_before"] == crowded and merged["segments_after"] == 1
    assert merged["steps"] >= 1 and merged["stopped"] is None
    assert real["checkpoint"]  # the merge is a write: the pre-write checkpoint came first
    # The index answers as before (only its pages were rewritten).
    assert sorted(matches_before) == sorted(
        query(sample.db_path, "SELECT rowid FROM fts_working WHERE fts_working MATCH 'greenhouse'")
    )
    again = run_job(sample, "--force", *options)
    assert "merged" not in again["stats"].get("fts_merge", {})  # one segment: nothing to merge
