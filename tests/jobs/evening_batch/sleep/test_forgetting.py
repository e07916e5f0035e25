"""Forgetting on real Mnemosyne databases: the forgetting experiment, the rules that protect a memory,
restoring, the nightly cap, and the recall guard's view of what a night forgets."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from freezegun import freeze_time

from mnemo_ops.core import state
from mnemo_ops.jobs import run_job
from mnemo_ops.jobs.evening_batch.sleep import store
from tests.conftest import run_cli
from tests.jobs.evening_batch.sleep.conftest import (
    EXPERIMENT_AGE_DAYS,
    chatter,
    live_working_ids,
    query,
    row_counts,
    run_sleep,
    settings_for,
)
from tests.jobs.evening_batch.sleep.homes import build

LATER = timedelta(days=90)
"""Past the one-day grace and the 14-day window, and long enough for chatter to decay below 0.1."""


def first_night():
    """A frozen clock an hour after the experiment's memories were written (90 days ago)."""
    return freeze_time(datetime.now() - timedelta(days=EXPERIMENT_AGE_DAYS, hours=-1), tick=True)


def _noise_and_important(ids):
    noise = {ids[key] for key in ids if key.startswith("noise-")}
    important = {ids[key] for key in ids if key.startswith("important-")}
    return noise, important


@pytest.mark.e2e
def test_the_forgetting_experiment(experiment, tmp_path):
    """The source paper's experiment, through the whole evening batch under the recall guard: five
    important stated memories and fifty chit-chat ones; three months later at least 45 of the noise
    memories are archived, the important ones all stay, nothing is deleted, and restoring the night
    brings every archived one back."""
    layout, ids = experiment
    noise, important = _noise_and_important(ids)
    settings = settings_for(layout, tmp_path, "guard:\n  probes: 40\n")
    counts_before = row_counts(layout.db_path)

    with first_night():
        first = run_job(settings, "evening-batch", show_progress=False)
    assert first.status == "ok", first.error
    assert first.changes["memories_archived"] == 0  # nothing is judged the night it is first seen

    later = run_job(settings, "evening-batch", show_progress=False)  # 90 days on: now
    assert later.status == "ok", later.error
    guard = later.stats["guard"]
    assert guard["verdict"] == "ok", guard
    live = live_working_ids(layout.db_path)
    archived = noise - live
    assert len(archived) >= 45, f"only {len(archived)} of 50 noise memories archived"
    assert important <= live
    assert later.changes["memories_archived"] == len(archived)
    # Probes whose answer was archived are reported as forgotten, never as regressions.
    assert guard["forgotten"] >= 1 and not guard["newly_failing"]
    counts_after = row_counts(layout.db_path)
    assert all(counts_after[table] >= counts_before[table] for table in counts_before)

    night = later.stats["sleep"]["night"]
    listed = run_cli(layout, "--json", "forgotten", "list", "--night", night)
    assert listed.returncode == 0, listed.stderr
    entries = json.loads(listed.stdout)["forgotten"]
    assert {entry["memory_id"] for entry in entries} == archived
    assert all(
        entry["status"] == "archived" and entry["reason"] == "forgotten" for entry in entries
    )
    assert all(entry["utility"] < 0.1 and entry["prominence"] < 0.1 for entry in entries)

    dry = run_cli(layout, "--json", "forgotten", "restore", "--night", night, "--dry-run")
    assert json.loads(dry.stdout)["restored"] == len(archived)
    assert live_working_ids(layout.db_path) == live  # the dry run changed nothing

    restored = run_cli(layout, "--json", "forgotten", "restore", "--night", night)
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["restored"] == len(archived)
    assert noise | important <= live_working_ids(layout.db_path)
    assert row_counts(layout.db_path) == counts_after

    # Restored memories are not archived again, and the ledger counts what happened.
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        again = run_job(settings, "evening-batch", show_progress=False)
    assert again.status == "ok", again.error
    assert again.changes["memories_archived"] == 0
    status = json.loads(run_cli(layout, "--json", "status").stdout)["self_model"]
    assert status["memories_archived"] == len(archived)
    assert status["memories_restored"] == len(archived)
    assert status["sleeps"] == 3
    assert status["runs"]["evening-batch"]["ok"] == 3


def _old_chatter_home(tmp_path, extra=None, canonical=None):
    memories = [
        {
            "key": f"chatter-{number}",
            "content": chatter(number),
            "importance": 0.1,
            "days_ago": 120,
            "session": "old",
        }
        for number in range(12)
    ]
    memories += extra or []
    spec = {"memories": memories, "canonical": canonical or []}
    return build(tmp_path / "home", spec)


@pytest.mark.heavy
def test_pinned_identity_lineage_and_eval_answers_are_never_archived(tmp_path):
    protected = [
        {
            "key": "pinned",
            "content": "a pinned trifle nobody restates",
            "importance": 0.05,
            "days_ago": 200,
            "pinned": True,
        },
        {
            "key": "identity",
            "content": "I am the household assistant called Pim",
            "importance": 0.05,
            "source": "identity",
            "days_ago": 200,
        },
        {
            "key": "lineage",
            "content": "a small fact that holds a canonical lineage",
            "importance": 0.05,
            "days_ago": 200,
        },
        {
            "key": "answer",
            "content": "the spare key hides under the blue flowerpot",
            "importance": 0.05,
            "days_ago": 200,
        },
    ]
    layout, ids = _old_chatter_home(
        tmp_path,
        protected,
        canonical=[
            {
                "category": "auto:context",
                "name": "x",
                "body": "a small fact",
                "source_key": "lineage",
                "source_prefix": "auto:",
            }
        ],
    )
    (layout.state_dir / "eval").mkdir(parents=True, exist_ok=True)
    (layout.state_dir / "eval" / "suite.jsonl").write_text(
        json.dumps({"id": "key", "query": "where is the spare key", "relevant": [ids["answer"]]})
        + "\n"
    )
    settings = settings_for(layout, tmp_path)
    first = run_sleep(settings)
    assert first.status == "ok", first.error
    assert first.changes["memories_archived"] == 0  # first seen tonight
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        result = run_sleep(settings)
        live = live_working_ids(layout.db_path)  # our stamps lie in the real future
    assert result.status == "ok", result.error
    assert {ids[key] for key in ("pinned", "identity", "lineage", "answer")} <= live
    chatter = {ids[f"chatter-{number}"] for number in range(12)}
    assert result.changes["memories_archived"] == 12 and not chatter & live

    db = state.open_state(layout.state_dir / "state.db")
    exempt = dict(db.execute(f"SELECT memory_key, exempt FROM {store.MEMORIES}").fetchall())
    db.close()
    assert exempt["w:" + ids["pinned"]] == "pinned"
    assert exempt["w:" + ids["identity"]] == "identity"
    assert exempt["w:" + ids["lineage"]] == "lineage"

    # Without the protection the eval answer is still kept: it is the only row that says where
    # the key is. Without that rule too, it is forgotten like any other trifle.
    unprotected = settings_for(layout, tmp_path, "sleep:\n  protect_eval_answers: false\n")
    with freeze_time(datetime.now() + timedelta(days=2), tick=True):
        result = run_sleep(unprotected)
        assert ids["answer"] in live_working_ids(layout.db_path)
    assert result.changes["memories_archived"] == 0
    unruled = settings_for(
        layout, tmp_path, "sleep:\n  protect_eval_answers: false\n  forget_keeps_facts: false\n"
    )
    with freeze_time(datetime.now() + timedelta(days=3), tick=True):
        result = run_sleep(unruled)
        assert ids["answer"] not in live_working_ids(layout.db_path)
    assert result.changes["memories_archived"] == 1


@pytest.mark.heavy
def test_at_most_max_archived_per_night_lowest_utility_first(tmp_path):
    layout, ids = _old_chatter_home(tmp_path)
    settings = settings_for(layout, tmp_path, "sleep:\n  max_archived_per_night: 5\n")
    run_sleep(settings)
    tomorrow = datetime.now() + timedelta(days=1)
    with freeze_time(tomorrow, tick=True):
        first = run_sleep(settings)
        again = run_sleep(settings)  # the same night: the cap is per night, not per run
    assert first.changes["memories_archived"] == 5
    assert again.changes["memories_archived"] == 0
    assert all(count == 0 for count in again.changes.values()), again.changes
    with freeze_time(tomorrow + timedelta(days=1), tick=True):
        assert run_sleep(settings).changes["memories_archived"] == 5


def test_the_dry_run_counts_exactly_what_the_real_run_archives_and_changes_nothing(
    experiment, tmp_path
):
    from tests.purity import assert_unchanged, sample_snapshot

    layout, _ids = experiment
    settings = settings_for(layout, tmp_path)
    with first_night():
        run_sleep(settings)
    before = sample_snapshot(layout)
    dry = run_sleep(settings, dry_run=True)
    assert_unchanged(before, sample_snapshot(layout))
    real = run_sleep(settings)
    assert dry.status == "dry-run" and real.status == "ok", (dry.error, real.error)
    assert dry.changes == real.changes
    assert real.changes["memories_archived"] >= 45


@pytest.mark.heavy
def test_a_suite_answer_the_night_would_archive_is_refused_by_the_guard(experiment, tmp_path):
    """With the protection off, the guard still stands: the user's eval suite names a noise memory,
    the trial archives it, the case fails, the change is refused and the live database untouched."""
    layout, ids = experiment
    target = ids["noise-7"]
    content = query(layout.db_path, "SELECT content FROM working_memory WHERE id = ?", (target,))
    (layout.state_dir / "eval").mkdir(parents=True, exist_ok=True)
    (layout.state_dir / "eval" / "suite.jsonl").write_text(
        json.dumps({"id": "noise", "query": content[0][0], "relevant": [target]}) + "\n"
    )
    # Plain recall: the Hermes profile drops low-importance rows, so chatter would never pass.
    settings = settings_for(
        layout,
        tmp_path,
        "guard:\n  probes: 40\n  max_newly_failing: 0\n"
        "retrieval_eval:\n  profile: plain\n"
        "sleep:\n  protect_eval_answers: false\n",
    )
    with first_night():
        assert run_job(settings, "evening-batch", show_progress=False).status == "ok"
    live_before = live_working_ids(layout.db_path)
    refused = run_job(settings, "evening-batch", show_progress=False)
    guard = refused.stats["guard"]
    assert refused.status == "failed" and refused.exit_code == 1, guard
    assert guard["verdict"] == "refused"
    assert guard["suite"]["newly_failing"] == ["noise"]
    assert guard["trial"]["changes"]["memories_archived"] >= 45
    assert live_working_ids(layout.db_path) == live_before  # the live database was not touched


def _fact_home(tmp_path):
    """Old, unused rows as forgetting would judge them: chatter, the only row of a fact, and a
    restatement whose facts a newer row holds word for word."""
    extra = [
        {
            "key": "only-holder",
            "content": "[USER] My aunt believed in volunteering, and used to help my family out "
            "when we were struggling",
            "importance": 0.05,
            "days_ago": 120,
            "session": "old",
        },
        {
            "key": "restated-old",
            "content": "[USER] We made pizza with Marisol on Friday",
            "importance": 0.05,
            "days_ago": 120,
            "session": "old",
        },
        {
            "key": "restated-new",
            "content": "[USER] We made pizza with Marisol on Friday, it was great",
            "importance": 0.9,
            "days_ago": 2,
            "session": "new",
        },
    ]
    return _old_chatter_home(tmp_path, extra)


def test_a_row_that_is_the_only_place_of_a_fact_is_kept_and_a_restatement_goes(tmp_path):
    """Forgetting takes chatter and a restatement whose facts survive in a current row (recording
    the rule and the survivor), and keeps the only row of a fact however old and unused it is."""
    layout, ids = _fact_home(tmp_path)
    settings = settings_for(layout, tmp_path)
    assert run_sleep(settings).changes["memories_archived"] == 0  # first seen tonight
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        result = run_sleep(settings)
        live = live_working_ids(layout.db_path)
    assert result.status == "ok", result.error
    assert ids["only-holder"] in live and ids["restated-new"] in live
    assert ids["restated-old"] not in live
    assert not {ids[f"chatter-{number}"] for number in range(12)} & live
    assert result.changes["memories_archived"] == 13

    db = state.open_state(layout.state_dir / "state.db")
    holders = [row[0] for row in db.execute(f"SELECT memory_key FROM {store.FACT_HOLDERS}")]
    details = [
        json.loads(row[0])
        for row in db.execute(f"SELECT detail FROM {store.ARCHIVE} WHERE reason = 'forgotten'")
    ]
    db.close()
    assert holders == ["w:" + ids["only-holder"]]
    rules = sorted(detail["rule"] for detail in details)
    assert rules == ["chatter"] * 12 + ["duplicate"]
    assert [detail["survivor"] for detail in details if detail["rule"] == "duplicate"] == [
        ids["restated-new"]
    ]
    listed = json.loads(run_cli(layout, "--json", "forgotten", "list").stdout)
    assert {entry["rule"] for entry in listed["forgotten"]} == {"chatter", "duplicate"}
    text = run_cli(layout, "forgotten", "list").stdout
    assert "duplicate" in text and "chatter" in text


@pytest.mark.heavy
def test_with_the_rule_broken_the_guard_refuses_the_lost_fact(tmp_path):
    """With ``forget_keeps_facts`` off the night would archive the only row of a fact: the recall
    guard counts it as lost (no eval suite names it, no probe needs to fail) and refuses the change;
    the live database keeps the row."""
    layout, ids = _fact_home(tmp_path)
    config = "guard:\n  probes: 20\nsleep:\n  forget_keeps_facts: false\n"
    settings = settings_for(layout, tmp_path, config)
    assert run_sleep(settings).status == "ok"
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        refused = run_job(settings, "evening-batch", show_progress=False)
        live = live_working_ids(layout.db_path)
    guard = refused.stats["guard"]
    assert refused.status == "failed" and guard["verdict"] == "refused", guard
    lost = {row["memory_id"]: row["why"] for row in guard["lost_facts"]["rows"]}
    assert lost == {ids["only-holder"]: "only-holder"}
    assert any("would lose a fact" in problem for problem in guard["problems"])
    assert ids["only-holder"] in live


PLUGIN_GREETINGS = ["hi there!", "hi there 🙂", "ok thanks haha", "hey hey!", "lol okay!"]
"""Greetings as the Hermes plugin stores them: importance 0.5, and Mnemosyne's classifier calls
several of these a ``fact``; the second one restates the first."""


def test_greetings_stored_at_the_plugins_importance_decay_out_and_are_archived(tmp_path):
    """Chatter decays as an event whatever Mnemosyne's classifier calls it, and a greeting said
    again confirms nothing: four months on, every greeting is archived (rule ``chatter``), the
    pinned one and the statement of fact beside them stay."""
    greetings = [
        {
            "key": f"greeting-{number}",
            "content": f"[USER] {text}",
            "importance": 0.5,
            "days_ago": 120,
            "session": f"chat-{number}",
        }
        for number, text in enumerate(PLUGIN_GREETINGS)
    ]
    others = [
        {
            "key": "pinned",
            "content": "[USER] good evening!",
            "importance": 0.5,
            "days_ago": 120,
            "pinned": True,
        },
        {
            "key": "fact",
            "content": "[USER] My aunt helped my family when we were struggling in Leeds",
            "importance": 0.5,
            "days_ago": 120,
        },
    ]
    layout, ids = build(tmp_path / "home", {"memories": greetings + others})
    types = dict(query(layout.db_path, "SELECT id, memory_type FROM working_memory"))
    assert "fact" in {types[ids[f"greeting-{number}"]] for number in range(len(greetings))}
    settings = settings_for(layout, tmp_path)
    assert run_sleep(settings).status == "ok"
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        result = run_sleep(settings)
        live = live_working_ids(layout.db_path)
    assert result.status == "ok", result.error
    assert {ids["pinned"], ids["fact"]} <= live
    assert not {ids[f"greeting-{number}"] for number in range(len(greetings))} & live
    db = state.open_state(layout.state_dir / "state.db")
    try:
        kinds_of = dict(db.execute(f"SELECT memory_key, kind FROM {store.MEMORIES}").fetchall())
        confirmations = db.execute(f"SELECT count(*) FROM {store.CONFIRMATIONS}").fetchone()[0]
        rules = {
            json.loads(detail)["rule"]
            for (detail,) in db.execute(f"SELECT detail FROM {store.ARCHIVE}").fetchall()
        }
    finally:
        db.close()
    assert {kinds_of["w:" + ids[f"greeting-{number}"]] for number in range(5)} == {"event"}
    assert confirmations == 0
    assert rules == {"chatter"}
