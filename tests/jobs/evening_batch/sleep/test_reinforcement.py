"""Reinforcement and our edges on real Mnemosyne databases: restatements confirm (never recalls),
proven contradictions close the older memory and can be restored, Mnemosyne's own edges are never
changed, ours are strengthened and downscaled once a night and floored."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import apsw
import pytest
from freezegun import freeze_time

from mnemo_ops.core import state
from mnemo_ops.jobs import run_job
from mnemo_ops.jobs.evening_batch.sleep import edges, store
from tests.conftest import run_cli
from tests.jobs.evening_batch.sleep.conftest import live_working_ids, query, run_sleep, settings_for
from tests.jobs.evening_batch.sleep.homes import build

ORIGINAL = "Dana prefers window seats on long flights to Lisbon"


def _memory(key, content, session, days_ago, **extra):
    return {"key": key, "content": content, "session": session, "days_ago": days_ago, **extra}


RESTATEMENTS = [
    _memory("original", ORIGINAL, "a", 30, source="user", veracity="stated", importance=0.6),
    _memory("restated", "Dana prefers a window seat on long flights to Lisbon", "b", 10),
    _memory("again", "Dana prefers a window seat on the long flights to Lisbon", "c", 5),
    _memory("lookalike", "Anna prefers window seats on long flights to Lisbon", "d", 8),
    _memory("elsewhere", ORIGINAL, "e", 3),  # the same words in another session: a new row
    _memory("unrelated", "The sourdough starter needs feeding twice a day in summer", "a", 9),
    _memory("filler-1", "We talked about flights and seats for a while", "f", 6),
    _memory("filler-2", "Lisbon trams are old and yellow and slow", "f", 6),
]


@pytest.fixture(scope="module")
def restatement_template(tmp_path_factory):
    return build(tmp_path_factory.mktemp("restatements") / "home", {"memories": RESTATEMENTS})


@pytest.fixture
def restatements(restatement_template, tmp_path):
    from tests.conftest import copy_sample

    layout, ids = restatement_template
    return copy_sample(layout, tmp_path / "home"), ids


def _confirmations(layout):
    db = state.open_state(layout.state_dir / "state.db")
    try:
        return {
            row[0]: (row[1], row[2])
            for row in db.execute(
                f"SELECT restatement_key, original_key, method FROM {store.CONFIRMATIONS}"
            ).fetchall()
        }, dict(db.execute(f"SELECT memory_key, confirmations FROM {store.MEMORIES}").fetchall())
    finally:
        db.close()


def _edges(layout, owned: bool):
    condition = edges.OWNED_CONDITION if owned else f"NOT ({edges.OWNED_CONDITION})"
    return query(
        layout.db_path,
        f"SELECT id, source, target, edge_type, weight, timestamp FROM graph_edges WHERE {condition} "
        "ORDER BY id",
    )


def test_restatements_confirm_the_first_memory_and_are_linked_to_it(restatements, tmp_path):
    layout, ids = restatements
    settings = settings_for(layout, tmp_path, "sleep:\n  confirmation_edges: true\n")
    result = run_sleep(settings)
    assert result.status == "ok", result.error
    confirmations, counts = _confirmations(layout)
    original = "w:" + ids["original"]
    confirming = {
        key.split("@")[0] for key, (target, _method) in confirmations.items() if target == original
    }
    assert confirming == {"w:" + ids[key] for key in ("restated", "again", "elsewhere")}
    assert "w:" + ids["lookalike"] not in confirmations  # another subject: not a restatement
    assert counts[original] == 3 and counts["w:" + ids["restated"]] == 0
    assert result.changes["confirmations"] == 3
    assert result.changes["confirmation_edges_created"] == 3
    links = {(row[1], row[2]) for row in _edges(layout, owned=True) if row[3] == edges.CONFIRMS}
    assert links == {(ids[key], ids["original"]) for key in ("restated", "again", "elsewhere")}
    # Nothing is closed by a confirmation: both rows of each pair stay.
    assert set(ids.values()) <= live_working_ids(layout.db_path)

    # Recall never confirms: the agent recalling a memory a hundred times changes nothing.
    connection = apsw.Connection(str(layout.db_path))
    connection.execute(
        "UPDATE working_memory SET recall_count = 100, last_recalled = ? WHERE id = ?",
        (datetime.now().isoformat(), ids["lookalike"]),
    )
    connection.close()
    again = run_sleep(settings)
    assert all(count == 0 for count in again.changes.values()), again.changes
    assert again.stats["sleep"]["observed"]["changed"] == 0
    assert again.checkpoint is None


@pytest.mark.heavy
def test_the_check_quota_is_the_nights_so_a_second_run_that_night_checks_nothing(
    restatements, tmp_path
):
    layout, ids = restatements
    settings = settings_for(layout, tmp_path, "sleep:\n  reinforcement_rows_per_night: 3\n")
    first = run_sleep(settings)
    assert first.stats["sleep"]["reinforcement"]["checked"] == 3
    assert first.stats["sleep"]["reinforcement"]["backlog"] == len(RESTATEMENTS)
    again = run_sleep(settings)  # the same night: the quota is spent
    assert again.stats["sleep"]["reinforcement"]["checked"] == 0
    assert all(count == 0 for count in again.changes.values()), again.changes
    checked = 3
    for night in range(1, 4):  # the backlog is worked off a quota a night, oldest first
        with freeze_time(datetime.now() + timedelta(days=night), tick=True):
            later = run_sleep(settings)
        checked += later.stats["sleep"]["reinforcement"]["checked"]
    assert checked == len(RESTATEMENTS)
    confirmations, _counts = _confirmations(layout)
    assert {target for target, _method in confirmations.values()} == {"w:" + ids["original"]}
    assert len(confirmations) == 3  # the same three restatements as in one unbounded night


def test_an_exact_restatement_folded_into_its_row_counts_as_a_confirmation(restatements, tmp_path):
    layout, ids = restatements
    settings = settings_for(layout, tmp_path)
    run_sleep(settings)
    # Mnemosyne folds the same words in the same session into the existing row, moving its time.
    _layout, again = build(
        layout.directory, {"memories": [{"key": "original", "content": ORIGINAL, "session": "a"}]}
    )
    assert again["original"] == ids["original"]
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        result = run_sleep(settings)
    assert result.changes["confirmations"] == 1
    confirmations, counts = _confirmations(layout)
    assert counts["w:" + ids["original"]] == 4
    assert any(method == "exact" for _target, method in confirmations.values())


@pytest.mark.heavy
def test_a_greeting_said_again_confirms_nothing(tmp_path):
    """Chatter restated, word for word (folded into its row) or nearly, is not a confirmation: it
    would keep the greeting from ever decaying out."""
    greetings = [
        _memory("hello", "[USER] ok thanks!", "a", 30),
        _memory("look-alike", "[USER] ok thanks 🙂", "b", 20),
    ]
    layout, ids = build(tmp_path / "home", {"memories": greetings})
    settings = settings_for(layout, tmp_path)
    assert run_sleep(settings).changes.get("confirmations", 0) == 0
    _layout, again = build(
        layout.directory,
        {"memories": [{"key": "hello", "content": "[USER] ok thanks!", "session": "a"}]},
    )
    assert again["hello"] == ids["hello"]  # folded into the row, its time moved forward
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        result = run_sleep(settings)
    assert result.status == "ok", result.error
    assert result.changes.get("confirmations", 0) == 0
    confirmations, counts = _confirmations(layout)
    assert confirmations == {}
    assert counts["w:" + ids["hello"]] == 0


CONTRADICTIONS = [
    _memory("old-city", "Dana lives in Utrecht near the canal", "a", 20, source="user"),
    _memory("new-city", "Dana moved and lives in Ghent now", "b", 2, source="user"),
    _memory("old-coffee", "Dana drinks her coffee black", "a", 15, source="user"),
    _memory("new-coffee", "Dana only drinks decaf now", "b", 1, source="user"),
    _memory("old-pinned", "Dana's car is a red hatchback", "a", 15, source="user", pinned=True),
    _memory("new-car", "Dana's car is a blue estate", "b", 1, source="user"),
    _memory("speaks-1", "Dana speaks Dutch", "a", 12, source="user"),
    _memory("speaks-2", "Dana speaks Portuguese too", "b", 1, source="user"),
]
TRIPLES = [
    {"subject": "dana", "predicate": "lives_in", "object": "Utrecht", "source_key": "old-city"},
    {"subject": "dana", "predicate": "lives_in", "object": "Ghent", "source_key": "new-city"},
    {"subject": "dana", "predicate": "car", "object": "red hatchback", "source_key": "old-pinned"},
    {"subject": "dana", "predicate": "car", "object": "blue estate", "source_key": "new-car"},
    {"subject": "dana", "predicate": "speaks", "object": "Dutch", "source_key": "speaks-1"},
    {"subject": "dana", "predicate": "speaks", "object": "Portuguese", "source_key": "speaks-2"},
]
CANONICAL = [
    {"category": "preference", "name": "coffee", "body": "black", "source_key": "old-coffee"},
    {"category": "preference", "name": "coffee", "body": "decaf", "source_key": "new-coffee"},
]


@pytest.mark.heavy
def test_only_proven_contradictions_close_the_older_memory_and_restore_undoes_it(tmp_path):
    layout, ids = build(
        tmp_path / "home",
        {"memories": CONTRADICTIONS, "triples": TRIPLES, "canonical": CANONICAL},
    )
    # "speaks" holds many values at once: Mnemosyne's store closed Dutch, but that proves nothing.
    settings = settings_for(
        layout, tmp_path, "monthly_maintenance:\n  multi_valued_predicates: [speaks]\n"
    )
    dry = run_sleep(settings, dry_run=True)
    result = run_sleep(settings)
    assert result.status == "ok", result.error
    assert dry.changes == result.changes
    assert result.changes["memories_superseded"] == 2
    assert result.changes["contradiction_edges_created"] == 2
    closed = dict(
        query(
            layout.db_path,
            "SELECT id, superseded_by FROM working_memory WHERE superseded_by IS NOT NULL",
        )
    )
    assert closed == {ids["old-city"]: ids["new-city"], ids["old-coffee"]: ids["new-coffee"]}
    live = live_working_ids(layout.db_path)
    assert {ids["old-pinned"], ids["speaks-1"], ids["speaks-2"], ids["new-city"]} <= live
    links = {(row[1], row[2]) for row in _edges(layout, owned=True) if row[3] == edges.CONTRADICTS}
    assert links == {(ids["new-city"], ids["old-city"]), (ids["new-coffee"], ids["old-coffee"])}

    listed = json.loads(run_cli(layout, "--json", "forgotten", "list").stdout)["forgotten"]
    assert {entry["memory_id"]: entry["status"] for entry in listed} == {
        ids["old-city"]: "superseded",
        ids["old-coffee"]: "superseded",
    }
    restored = run_cli(layout, "--json", "forgotten", "restore", ids["old-city"])
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["restored"] == 1
    row = query(
        layout.db_path,
        "SELECT superseded_by, valid_until FROM working_memory WHERE id = ?",
        (ids["old-city"],),
    )
    assert row == [(None, None)]  # exactly the values before our stamp
    # Restored means the user disagrees: that contradiction never closes it again.
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        later = run_sleep(settings)
    assert later.changes["memories_superseded"] == 0
    assert ids["old-city"] in live_working_ids(layout.db_path)


@pytest.mark.heavy
def test_mnemosynes_edges_are_never_changed_and_ours_decay_to_the_floor(restatements, tmp_path):
    layout, ids = restatements
    plain = settings_for(layout, tmp_path, "guard:\n  enabled: false\n")
    # Orphan linking's related_to edges and Mnemosyne's own: none of them may change.
    assert run_job(plain, "memory-maintain", show_progress=False).status == "ok"
    foreign = _edges(layout, owned=False)
    assert foreign, "the home has edges that are not ours"
    # A high floor, reached in five nights (weights start at most 0.8 and lose a fifth a night).
    settings = settings_for(
        layout, tmp_path, "sleep:\n  edge_floor: 0.3\n  confirmation_edges: true\n"
    )
    first = run_sleep(settings)
    ours = {row[0]: row[4] for row in _edges(layout, owned=True)}
    assert len(ours) == 3
    # Tonight both ends of each confirmation edge were active (confirmed): strengthened, then scaled.
    assert first.changes["edges_strengthened"] == 3 and first.changes["edges_downscaled"] == 0
    importance = dict(query(layout.db_path, "SELECT id, importance FROM working_memory"))
    db = state.open_state(layout.state_dir / "state.db")
    journal = {
        row[0]: row[1:]
        for row in db.execute(
            f"SELECT edge_id, weight_before, weight_after FROM {store.EDGE_JOURNAL}"
        ).fetchall()
    }
    db.close()
    for edge_id, source, target, _type, weight, _stamp in _edges(layout, owned=True):
        before, after = journal[edge_id]
        assert (
            weight
            == after
            == pytest.approx(min(1.0, before + 0.1 * importance[source] * importance[target]) * 0.8)
        )
    again = run_sleep(settings)  # the same night: once a night
    assert again.changes["edges_strengthened"] == again.changes["edges_downscaled"] == 0
    moment = datetime.now()
    previous = ours
    for night in range(1, 8):
        with freeze_time(moment + timedelta(days=night), tick=True):
            result = run_sleep(settings)
        current = {row[0]: row[4] for row in _edges(layout, owned=True)}
        for edge_id, weight in current.items():
            assert weight == pytest.approx(max(0.3, previous[edge_id] * 0.8))
        previous = current
    assert set(previous.values()) == {0.3}
    assert result.changes["edges_downscaled"] == 0  # at the floor: nothing left to write
    assert len(_edges(layout, owned=True)) == 3  # never deleted
    assert _edges(layout, owned=False) == foreign


def test_by_default_a_confirmation_is_recorded_and_no_edge_is_written(restatements, tmp_path):
    """Mnemosyne's recall scans every edge per candidate for its edge bonus (the agent pays it each
    turn, and the Hermes plugin never follows an edge): confirmations stay in state.db."""
    layout, ids = restatements
    result = run_sleep(settings_for(layout, tmp_path))
    assert result.changes["confirmations"] == 3
    assert result.changes["confirmation_edges_created"] == 0
    assert not [row for row in _edges(layout, owned=True) if row[3] == edges.CONFIRMS]
    confirmations, counts = _confirmations(layout)
    assert counts["w:" + ids["original"]] == 3
