"""The importance stage: the user's own statements raised past the Hermes plugin's cut, recorded
first, never over a value the agent changed, finished after a kill, put back exactly by
``mnemo-ops importance restore``; and, through the real plugin, what the agent receives grows."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta

import apsw
import pytest
from freezegun import freeze_time

from devtools.samples import hermes_conversations
from mnemo_ops import jobs
from mnemo_ops.core import runner, state
from mnemo_ops.database import facts
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
from mnemo_ops.evaluation.evaluate import evaluate
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.jobs.evening_batch.consolidation.batch import Step, run_steps
from mnemo_ops.jobs.evening_batch.sleep import importance, steps, store
from tests.conftest import run_cli
from tests.jobs.evening_batch.sleep.conftest import query, run_sleep, settings_for

HAS_PLUGIN = (
    subprocess.run(
        [sys.executable, "-c", "import mnemosyne_hermes"], capture_output=True
    ).returncode
    == 0
)
STAGES = (
    Step("reinforcement", steps.reinforcement_step),
    Step("importance", steps.importance_step),
)


@pytest.mark.parametrize(
    "text",
    [
        "[USER] My sister Hanna moved to Tromso last spring for work.",
        "[USER] The plumber quoted 450 for the new boiler valve.",
        "[USER] We are driving up to the lake next Tuesday with the kids.",
        "[USER] I really prefer mint tea over kombucha these days.",
        "[USER] I honestly can't stand oysters, it ruins every dish.",
        "[USER] My favourite season has to be late summer.",
    ],
)
def test_a_statement_of_fact_or_taste_is_recognised(text):
    assert importance.states_a_fact(text)


@pytest.mark.parametrize(
    "text",
    [
        "[USER] ok sounds good",
        "[USER] haha that is funny",
        "[USER] Thanks, that helps a lot.",
        "[USER] honestly the weeding and the watering never end around here",
        "[USER] I like it",
    ],
)
def test_chatter_is_not_a_statement(text):
    assert not importance.states_a_fact(text)


@pytest.fixture
def home(hermes_home):
    """The tests' Hermes conversation home (written the way the plugin writes it)."""
    return hermes_home


def _importance(db_path) -> dict[str, float]:
    return dict(query(db_path, "SELECT id, importance FROM working_memory"))


def _records(layout) -> list[dict]:
    ledger = state.open_state_readonly(layout.state_dir / "state.db")
    try:
        return list(store.rows(ledger, f"SELECT * FROM {store.IMPORTANCE} ORDER BY id"))
    finally:
        ledger.close()


def _run(settings, dry_run=False):
    """Reinforcement and the importance stage through the real runner, the recall guard off."""
    return runner.run_job(
        settings.updated(guard={"enabled": False}),
        "evening-batch",
        lambda ctx: run_steps(ctx, STAGES),
        dry_run=dry_run,
        show_progress=False,
        hooks=jobs.HOOKS,
    )


@pytest.mark.heavy
def test_only_the_users_statements_are_raised_and_each_is_recorded_first(home, tmp_path):
    settings = settings_for(home, tmp_path)
    before = _importance(home.db_path)
    bytes_before = home.db_path.read_bytes()
    dry = _run(settings, dry_run=True)
    assert home.db_path.read_bytes() == bytes_before  # a dry run changes nothing
    result = _run(settings)
    assert result.status == "ok", result.error
    after = _importance(home.db_path)
    changed = {memory_id for memory_id in after if after[memory_id] != before[memory_id]}
    assert changed and result.changes["importance_raised"] == len(changed)
    assert dry.changes["importance_raised"] == len(changed)  # the dry run counted the same
    rows = dict(query(home.db_path, "SELECT id, content FROM working_memory"))
    sources = dict(query(home.db_path, "SELECT id, source FROM working_memory"))
    reasons = {store.split_key(r["memory_key"])[1]: r["reason"] for r in _records(home)}
    for memory_id in changed:
        assert rows[memory_id].startswith("[USER] ") and sources[memory_id] == "conversation"
        assert before[memory_id] == 0.5 and after[memory_id] >= 0.7
        assert not facts.is_chatter(rows[memory_id])  # a restated greeting is not raised
        if reasons[memory_id] == importance.STATES_A_FACT:
            assert after[memory_id] == importance.graded(0.7, rows[memory_id], 0)
    # Importance ranks: more than one value is given, and at most half of the rows are raised.
    assert len({after[memory_id] for memory_id in changed}) > 1
    assert len(changed) <= len(rows) / 2
    status = json.loads(run_cli(home, "--json", "status").stdout)["importance"]
    assert status["rows"] == len(rows)
    assert sum(status["bands"].values()) == len(rows)
    assert status["at_or_above_cut"] == pytest.approx(
        sum(1 for value in after.values() if value >= 0.65) / len(rows), abs=1e-4
    )
    untouched = [memory_id for memory_id, text in rows.items() if text.startswith("[ASSISTANT]")]
    assert untouched and all(after[memory_id] == before[memory_id] for memory_id in untouched)
    chatter = [i for i, text in rows.items() if text.startswith("[USER] ") and i not in changed]
    assert chatter, "chatter stays at the plugin's 0.5"
    records = _records(home)
    assert {store.split_key(r["memory_key"])[1] for r in records} == changed
    assert all(r["applied"] == store.APPLIED and r["importance_before"] == 0.5 for r in records)
    # The next run reads only new rows: nothing more to raise.
    again = _run(settings)
    assert again.changes["importance_raised"] == 0 and _importance(home.db_path) == after


@pytest.mark.heavy
def test_the_quota_and_a_killed_run_are_finished_by_the_next(home, tmp_path):
    capped = settings_for(home, tmp_path, "sleep:\n  importance_rows_per_run: 5\n")
    first = _run(capped)
    assert first.changes["importance_raised"] == 5
    # A run killed after recording its plan and before writing it: two planned entries, one of
    # them for a row the agent changed in between (the value recorded as "before" is gone).
    rows = [
        row[0]
        for row in query(
            home.db_path,
            "SELECT id FROM working_memory WHERE content LIKE '[USER] %' AND importance = 0.5 "
            "ORDER BY rowid DESC LIMIT 2",
        )
    ]
    ledger = state.open_state(home.state_dir / "state.db")
    with ledger.conn:
        for memory_id in rows:
            ledger.conn.execute(
                f"INSERT INTO {store.IMPORTANCE} (memory_key, reason, night, importance_before, "
                "importance_after) VALUES (?, 'states-a-fact', '2026-01-01', 0.5, 0.7)",
                (store.key_of(store.WORKING, memory_id),),
            )
    ledger.close()
    connection = apsw.Connection(str(home.db_path))
    connection.execute("UPDATE working_memory SET importance = 0.9 WHERE id = ?", (rows[1],))
    connection.close()
    second = _run(capped)
    assert second.stats["sleep"]["importance"]["given_up"] == 1
    values = _importance(home.db_path)
    assert values[rows[0]] == 0.7 and values[rows[1]] == 0.9  # the agent's value is kept
    assert second.changes["importance_raised"] == 1 + 5


@pytest.mark.heavy
def test_restore_puts_back_exactly_what_was_raised(home, tmp_path):
    settings = settings_for(home, tmp_path)
    before = _importance(home.db_path)
    assert _run(settings).changes["importance_raised"] > 1
    raised = [store.split_key(r["memory_key"])[1] for r in _records(home)]
    connection = apsw.Connection(str(home.db_path))
    connection.execute("UPDATE working_memory SET importance = 0.95 WHERE id = ?", (raised[0],))
    connection.close()
    listed = json.loads(run_cli(home, "--json", "importance", "list").stdout)["raised"]
    statuses = {entry["memory_id"]: entry["status"] for entry in listed}
    assert statuses[raised[0]] == "changed-since" and statuses[raised[1]] == "raised"
    dry = json.loads(run_cli(home, "--json", "importance", "restore", "--all", "-n").stdout)
    assert dry["restored"] == len(raised) - 1 and dry["changed_since"] == 1
    raised_to = {store.split_key(r["memory_key"])[1]: r["importance_after"] for r in _records(home)}
    assert (
        _importance(home.db_path)[raised[1]] == raised_to[raised[1]]
    )  # the dry run changed nothing
    done = run_cli(home, "--json", "importance", "restore", "--all")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == len(raised) - 1
    after = _importance(home.db_path)
    assert after == {**before, raised[0]: 0.95}
    # A restored memory is never raised again, even when the scan starts over.
    ledger = state.open_state(home.state_dir / "state.db")
    with ledger.conn:
        ledger.conn.execute(f"DELETE FROM {store.CURSORS}")
    ledger.close()
    assert _run(settings).changes["importance_raised"] == 0
    unknown = run_cli(home, "importance", "restore", "0123456789abcdef")
    assert unknown.returncode == 2 and "no raised importance" in unknown.stderr


@pytest.mark.skipif(not HAS_PLUGIN, reason="what the agent receives needs mnemosyne-hermes (4.0)")
def test_what_the_plugin_injects_grows_on_an_aged_home(tmp_path):
    """The harm this stage exists to undo: ten days after a conversation the plugin drops the
    user's statements at its importance cut. Measured through the plugin's own prefetch."""
    home = hermes_conversations.build(tmp_path / "home", age_days=10)
    suite = load_suite(home.state_dir / "eval" / "suite.jsonl")

    def received() -> int:
        engine = MnemosyneEngine(home.db_path, profile="hermes", hermes_home=home.hermes_home)
        evaluation = evaluate(suite, engine, k=5)
        assert engine.profile_used == "hermes"
        return evaluation.passed

    before = received()
    assert _run(settings_for(home, tmp_path)).changes["importance_raised"] > 0
    assert received() > before


@pytest.mark.heavy
def test_a_raised_statement_is_never_archived(home, tmp_path):
    """Forgetting archives old rows of low utility; a statement raised as worth keeping is not one
    of them, though its prominence decays like any conversation turn's (its importance keeps it
    above the archive band: raised to 0.55 instead, they would be archived)."""
    settings = settings_for(home, tmp_path, "sleep:\n  max_archived_per_night: 100000\n")
    assert _run(settings).changes["importance_raised"] > 0
    raised = {store.split_key(r["memory_key"])[1] for r in _records(home)}
    for days in (1, 400):  # first seen, then a year later: every old turn is a candidate
        with freeze_time(datetime.now() + timedelta(days=days), tick=True):
            result = run_sleep(settings)
    assert result.changes["memories_archived"] > 0
    live = {
        row[0]
        for row in query(home.db_path, "SELECT id FROM working_memory WHERE valid_until IS NULL")
    }
    assert raised <= live
