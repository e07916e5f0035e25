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
            "content": f"just chatting about nothing much, item {number}, ok then",
            "importance": 0.1,
            "days_ago": 120,
            "session": "old",
        }
        for number in range(12)
    ]
    memories += extra or []
    spec = {"memories": memories, "canonical": canonical or []}
    return build(tmp_path / "home", spec)


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

    # Without the protection the eval answer is forgotten like any other trifle.
    unprotected = settings_for(layout, tmp_path, "sleep:\n  protect_eval_answers: false\n")
    with freeze_time(datetime.now() + timedelta(days=2), tick=True):
        result = run_sleep(unprotected)
        assert ids["answer"] not in live_working_ids(layout.db_path)
    assert result.changes["memories_archived"] == 1


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
