"""The recall guard judges every place the suite asks in, and Mnemosyne's own recall over every
session: a change that lowers only the new-conversation place, or only recall over every session,
is refused; a change that lowers nothing passes.

The change is a job of this test run by the real runner under the real guard (trial copies, the
recall worker in child processes) on a conversation home written the way the Hermes plugin writes
it (through the plugin where it is installed). Rows are changed, never deleted.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from mnemo_ops.core import runner
from mnemo_ops.evaluation.asked import NEW_PLACE
from mnemo_ops.guard.recall_guard import RecallGuard
from mnemo_ops.guard.verdict import EVERY_SESSION_PREFIX, PLACE_PREFIX
from mnemo_ops.memory_blocks.blocks import render_entries
from mnemo_ops.settings import load_settings
from tests.hermes_rows import execute_sql, unused_user_rows

JOB = "memory-maintain"
"""A job whose manifest runs under the recall guard; the test gives the runner its own change."""


@pytest.fixture
def home(hermes_home):
    """A private copy of the tests' Hermes conversation home (``tests/conftest.py``)."""
    return hermes_home


def _setup(home, tmp_path, case: dict, guard: str = "") -> object:
    """The home's suite plus `case`, in a config of its own; the settings of a run on the home."""
    suite = tmp_path / "suite.jsonl"
    text = (home.state_dir / "eval" / "suite.jsonl").read_text(encoding="utf-8")
    suite.write_text(text + json.dumps(case) + "\n", encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"retrieval_eval:\n  suite: {suite}\nguard:\n  probes: 40\n{guard}", encoding="utf-8"
    )
    return load_settings(
        db=home.db_path, state_dir=home.state_dir, config=config, environ=home.environ()
    )


def _run(settings, change, job_name: str = JOB) -> object:
    def job(ctx) -> None:
        ctx.count("rows_changed", change(ctx.settings))

    return runner.run_job(
        settings,
        job_name,
        job,
        show_progress=False,
        hooks=runner.RunHooks(guards={"recall": RecallGuard()}),
    )


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_change_that_lowers_only_the_new_conversation_is_refused(home, tmp_path):
    """A row every conversation received (global) is made its own chat's again: its chat and
    Mnemosyne's recall over every session still find it, only a new conversation loses it. The
    whole suite's average hides it (one case of many, within a wide tolerance); the place does not."""
    memory_id, text = unused_user_rows(home, 1)[0]
    # The row as a fact the user stated for every conversation (what graduation writes).
    execute_sql(
        home.db_path,
        "UPDATE working_memory SET scope = 'global', importance = 0.9 WHERE id = ?",
        (memory_id,),
    )
    case = {"id": "new-asked", "query": text, "relevant": [memory_id], "session": "new"}
    settings = _setup(home, tmp_path, case, "  recall_tolerance: 0.1\n")
    live = _digest(home.db_path)

    result = _run(
        settings,
        lambda trial: execute_sql(
            trial.db_path, "UPDATE working_memory SET scope = 'session' WHERE id = ?", (memory_id,)
        ),
    )

    guard = result.stats["guard"]
    assert guard["verdict"] == "refused", guard["problems"]
    assert guard["problems"] and all(
        problem.startswith(f"{PLACE_PREFIX} {NEW_PLACE}:") for problem in guard["problems"]
    ), guard["problems"]
    places = guard["suite"]["places"]
    assert places["before"][NEW_PLACE]["evidence_received"] == 1.0
    assert places["after"][NEW_PLACE]["evidence_received"] == 0.0
    assert places["newly_failing"] == {NEW_PLACE: ["new-asked"]}
    assert guard["every_session"]["newly_failing"] == []
    assert _digest(home.db_path) == live  # refused: the live database is as it was


def test_a_change_that_lowers_only_recall_over_every_session_is_refused(home, tmp_path):
    """A row of one chat is marked replaced by a row that does not exist: no place the agent is
    asked in received it (a new conversation never sees a chat's row), but Mnemosyne's own recall
    over every session no longer finds it."""
    memory_id, text = unused_user_rows(home, 1)[0]
    case = {"id": "new-asked", "query": text, "relevant": [memory_id], "session": "new"}
    # Over every session the suite is judged by cases lost: no case may go here.
    settings = _setup(home, tmp_path, case, "  max_newly_failing: 0\n")
    live = _digest(home.db_path)

    result = _run(
        settings,
        lambda trial: execute_sql(
            trial.db_path,
            "UPDATE working_memory SET superseded_by = 'no-such-row' WHERE id = ?",
            (memory_id,),
        ),
    )

    guard = result.stats["guard"]
    assert guard["verdict"] == "refused", guard
    assert guard["problems"] and all(
        problem.startswith(EVERY_SESSION_PREFIX) for problem in guard["problems"]
    ), guard["problems"]
    assert guard["every_session"]["newly_failing"] == ["new-asked"]
    places = guard["suite"]["places"]
    assert places["before"][NEW_PLACE] == places["after"][NEW_PLACE]
    assert places["before"][NEW_PLACE]["evidence_received"] == 0.0
    assert guard["lost_facts"]["count"] == 0  # replaced, not archived: only recall sees the loss
    assert _digest(home.db_path) == live


def test_a_change_that_lowers_no_place_passes(home, tmp_path):
    memory_id, text = unused_user_rows(home, 1)[0]
    case = {"id": "new-asked", "query": text, "relevant": [memory_id], "session": "new"}
    settings = _setup(home, tmp_path, case)

    result = _run(
        settings,
        lambda trial: execute_sql(
            trial.db_path,
            "UPDATE working_memory SET validator = 'mnemo-ops-test' WHERE id = ?",
            (memory_id,),
        ),
    )

    guard = result.stats["guard"]
    assert guard["verdict"] == "ok", guard["problems"]
    assert result.changes["rows_changed"] == 1
    places = guard["suite"]["places"]
    assert set(places["before"]) >= {NEW_PLACE, "same-chat"}
    assert places["before"] == places["after"]
    every = guard["every_session"]
    assert every["before"] == every["after"] and every["before"]["suite evidence_received"] > 0
    connection = sqlite3.connect(home.db_path)
    try:
        assert connection.execute(
            "SELECT validator FROM working_memory WHERE id = ?", (memory_id,)
        ).fetchone() == ("mnemo-ops-test",)
    finally:
        connection.close()


def test_a_change_to_the_memory_blocks_that_loses_an_answer_is_refused(home, tmp_path):
    """The answer is only in USER.md, which every prompt carries: a change that takes the entry
    out of the block (as a block migration would, without a row that recall gives back) lowers
    what a new conversation receives, and is refused; the live block is as it was."""
    entries = ["Dana's running shoes cost 447 euros.", "Dana likes short answers."]
    user_block = home.memory_blocks_dir / "USER.md"
    user_block.write_text(render_entries(entries), encoding="utf-8")
    case = {
        "id": "shoes-new",
        "query": "What did the new running shoes cost?",
        "expect": ["447 euros"],
        "answer": "447 euros",
        "session": "new",
    }
    settings = _setup(home, tmp_path, case)
    live = user_block.read_bytes()

    def take_the_entry_out(trial) -> int:
        # The trial's own copy of the blocks (the job writes them, so the guard copied them).
        (trial.memory_blocks_dir / "USER.md").write_text(
            render_entries(entries[1:]), encoding="utf-8"
        )
        return 1

    result = _run(settings, take_the_entry_out, "memory-block-migrate")

    guard = result.stats["guard"]
    assert guard["verdict"] == "refused", guard["problems"]
    assert any(
        problem.startswith(f"{PLACE_PREFIX} {NEW_PLACE}: answer_received")
        for problem in guard["problems"]
    ), guard["problems"]
    places = guard["suite"]["places"]
    assert places["before"][NEW_PLACE]["answer_received"] == 1.0
    assert places["after"][NEW_PLACE]["answer_received"] == 0.0
    # Every turn carried the blocks: two entries before, one after.
    assert (
        places["before"][NEW_PLACE]["lines_per_turn"] - places["after"][NEW_PLACE]["lines_per_turn"]
        == 1
    )
    assert user_block.read_bytes() == live
