"""Rows that crowd the agent's lines: the recall guard finds the new rows that took a chat's own
evidence out of the lines the agent receives, and a job that honours ``withholds_crowders`` is tried
again deriving nothing from their origins (``mnemo_ops/guard/crowding.py``)."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

from mnemo_ops.core import runner
from mnemo_ops.guard.recall_guard import RecallGuard
from mnemo_ops.settings import load_settings
from tests.hermes_rows import unused_user_rows

# The five rows share the words of a same-chat case of the tests' Hermes home ("How much did the
# running shoes cost?"), whose evidence its chat receives before the change.
CROWDING_TEXTS = [
    "How much the running shoes cost came up again with {name} at the shop.",
    "{name} asked how much my running shoes cost and laughed.",
    "The running shoes cost talk with {name} went on for ages.",
    "Running shoes: {name} wants to know how much they cost.",
    "{name} thinks the running shoes cost too much, how much was it again.",
]
NAMES = ["Mara", "Ingrid", "Tobias", "Selma", "Anders"]
HARMLESS = "My neighbour Oskar adopted a parrot named Kiwi last spring."


@pytest.fixture
def home(hermes_home):
    """A private copy of the tests' Hermes conversation home (``tests/conftest.py``)."""
    return hermes_home


def _settings(home, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("guard:\n  probes: 40\n", encoding="utf-8")
    return load_settings(
        db=home.db_path, state_dir=home.state_dir, config=config, environ=home.environ()
    )


def _insert_global(db_path, content: str, origin: str) -> str:
    """A global row derived from `origin`, as a distilled row is written (metadata lineage)."""
    memory_id = uuid.uuid4().hex[:16]
    connection = sqlite3.connect(db_path)
    try:
        with connection:
            connection.execute(
                "INSERT INTO working_memory (id, content, source, timestamp, session_id, "
                "importance, metadata_json, veracity, scope) "
                "VALUES (?, ?, 'fact', datetime('now'), 'global', 0.95, ?, 'inferred', 'global')",
                (memory_id, content, json.dumps({"derived_from": [origin]})),
            )
    finally:
        connection.close()
    return memory_id


def _live_contents(db_path) -> set[str]:
    connection = sqlite3.connect(db_path)
    try:
        return {row[0] for row in connection.execute("SELECT content FROM working_memory")}
    finally:
        connection.close()


def _run(settings, job_name: str, origins: list[str], harmless_origin: str):
    """A guarded job that writes five global rows sharing the case's words, each derived from one
    of `origins`, and one harmless row; it honours ``ctx.withheld`` as graduation does."""

    def job(ctx) -> None:
        written = 0
        for text, name, origin in zip(CROWDING_TEXTS, NAMES, origins):
            if origin not in ctx.withheld:
                _insert_global(ctx.settings.db_path, text.format(name=name), origin)
                written += 1
        if harmless_origin not in ctx.withheld:
            _insert_global(ctx.settings.db_path, HARMLESS, harmless_origin)
            written += 1
        ctx.count("rows_written", written)

    return runner.run_job(
        settings,
        job_name,
        job,
        show_progress=False,
        hooks=runner.RunHooks(guards={"recall": RecallGuard()}),
    )


def _origins(home):
    rows = unused_user_rows(home, 6)
    return [memory_id for memory_id, _ in rows[:5]], rows[5][0]


@pytest.mark.heavy
def test_rows_that_crowd_a_chats_evidence_out_are_withheld_and_the_rest_lands(home, tmp_path):
    """evening-batch's manifest says ``withholds_crowders``: the first try is refused (the five
    rows take the chat's lines), the second derives nothing from their origins and is accepted; the
    harmless row lands on the live database, the crowding ones do not."""
    settings = _settings(home, tmp_path)
    origins, harmless_origin = _origins(home)

    result = _run(settings, "evening-batch", origins, harmless_origin)

    assert result.status == "ok", (result.error, result.stats.get("guard_withheld"))
    withheld = result.stats["guard_withheld"]
    assert withheld["rounds"] >= 1
    assert set(withheld["sources"]) <= set(origins) and withheld["sources"]
    assert harmless_origin not in withheld["sources"]
    assert any("same-chat" in problem for problem in withheld["problems"]), withheld["problems"]
    assert result.stats["guard"]["verdict"] == "ok"
    places = result.stats["guard"]["suite"]["places"]
    assert (
        places["after"]["same-chat"]["evidence_received"]
        >= places["before"]["same-chat"]["evidence_received"]
    )
    contents = _live_contents(home.db_path)
    assert HARMLESS in contents
    for text, name, origin in zip(CROWDING_TEXTS, NAMES, origins):
        assert (text.format(name=name) in contents) == (origin not in withheld["sources"])
    assert any(warning.code == "guard-withheld-crowding" for warning in result.warnings)


@pytest.mark.heavy
def test_without_withholding_the_crowding_change_is_refused(home, tmp_path):
    """memory-maintain's manifest does not say ``withholds_crowders``: the same change is refused
    whole and the live database is not touched (what the guard exists for)."""
    settings = _settings(home, tmp_path)
    origins, harmless_origin = _origins(home)
    before = _live_contents(home.db_path)

    result = _run(settings, "memory-maintain", origins, harmless_origin)

    assert result.status == "failed"
    assert result.stats["guard"]["verdict"] == "refused"
    assert any("same-chat" in problem for problem in result.stats["guard"]["problems"])
    assert "guard_withheld" not in result.stats
    assert _live_contents(home.db_path) == before
