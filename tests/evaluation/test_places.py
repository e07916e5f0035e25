"""Where a case is asked, and what the agent receives there: the places of the eval, the memory
blocks counted as received, evidence received through lineage and the answer's words, on a
conversation home written the way the Hermes plugin writes it (through the plugin where it is
installed), recalled by the real Mnemosyne in a child process."""

from __future__ import annotations

import json
import sqlite3

import pytest

from mnemo_ops.evaluation.asked import NEW_PLACE, OTHER_SESSION, SAME_CHAT, Standing
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
from mnemo_ops.evaluation.evaluate import evaluate
from mnemo_ops.evaluation.suite import load_suite, parse_case
from mnemo_ops.memory_blocks.blocks import render_entries
from mnemo_ops.mnemosyne.plugin_prefetch import NEW_CONVERSATION_KEY, unused_session_key
from tests.conftest import run_cli


@pytest.fixture
def home(hermes_home):
    """A private copy of the tests' Hermes conversation home (``tests/conftest.py``)."""
    return hermes_home


def _rows(db_path, where: str) -> list[tuple[str, str, str]]:
    connection = sqlite3.connect(db_path)
    try:
        return connection.execute(
            f"SELECT id, session_id, content FROM working_memory WHERE {where} ORDER BY id"
        ).fetchall()
    finally:
        connection.close()


def _suite_with(home, *cases: dict):
    suite = load_suite(home.state_dir / "eval" / "suite.jsonl")
    suite.cases.extend(parse_case(f"extra {index}", case) for index, case in enumerate(cases))
    return suite


def _global_case(home) -> dict:
    """A case whose evidence is the home's global row ([IDENTITY]: every session sees it)."""
    memory_id, _, content = _rows(home.db_path, "scope = 'global'")[0]
    words = content.removeprefix("[IDENTITY] ").rstrip(".")
    return {"id": "new-global", "query": words, "relevant": [memory_id], "session": "new"}


def _engine(home, profile: str) -> MnemosyneEngine:
    return MnemosyneEngine(home.db_path, profile=profile, hermes_home=home.hermes_home)


@pytest.mark.heavy
def test_a_new_conversation_receives_only_what_crosses_sessions(home):
    """Asked in a new conversation, the global row arrives and a session row does not, even one
    asked about word for word; asked in its own chat, the session row arrives."""
    suite = load_suite(home.state_dir / "eval" / "suite.jsonl")
    own = next(case for case in suite.cases if case.category == "single-hop")
    in_new = {**own.to_dict(), "id": "new-session-row", "session": "new"}
    suite = _suite_with(home, _global_case(home), in_new)
    for profile in ("hermes", "plain"):
        evaluation = evaluate(suite, _engine(home, profile))
        outcomes = {outcome.case.id: outcome for outcome in evaluation.outcomes}
        assert outcomes["new-global"].received.place == NEW_PLACE
        assert outcomes["new-global"].received.evidence is True
        assert outcomes["new-session-row"].received.evidence is False, profile
        assert outcomes[own.id].received.place == SAME_CHAT
        assert set(evaluation.places) >= {SAME_CHAT, NEW_PLACE, OTHER_SESSION}
        assert evaluation.places[NEW_PLACE]["cases"] == 2
        assert evaluation.places[NEW_PLACE]["evidence_received"] == 0.5
    assert outcomes[own.id].received.evidence is True  # plain recall in its own chat


def test_the_new_conversation_key_is_one_no_row_has(home):
    """A row written in the session the eval would use for a new conversation moves the eval to
    another key: the new conversation stays new."""
    memory_id, _, content = _rows(home.db_path, "content LIKE '[USER]%'")[0]
    connection = sqlite3.connect(home.db_path)
    with connection:
        connection.execute(
            "UPDATE working_memory SET session_id = ?, scope = 'session' WHERE id = ?",
            (f"hermes_{NEW_CONVERSATION_KEY}", memory_id),
        )
    connection.close()
    assert unused_session_key(home.db_path) == f"{NEW_CONVERSATION_KEY}-2"
    query = content.removeprefix("[USER] ")
    suite = _suite_with(
        home, {"id": "asked", "query": query, "relevant": [memory_id], "session": "new"}
    )
    for profile in ("hermes", "plain"):
        evaluation = evaluate(suite, _engine(home, profile))
        asked = next(outcome for outcome in evaluation.outcomes if outcome.case.id == "asked")
        assert asked.received.evidence is False and asked.retrieved == [], profile


def test_memory_blocks_are_received_in_every_place(home):
    """USER.md holds the answer of a case nothing recalls: the answer is received there, in a new
    conversation too, and every turn counts the blocks' lines and characters."""
    entries = ["Dana's running shoes cost 447 euros.", "Dana prefers answers in short lines."]
    (home.memory_blocks_dir / "USER.md").write_text(render_entries(entries), encoding="utf-8")
    case = {
        "id": "shoes-new",
        "query": "What did the new shoes cost?",
        "expect": ["447 euros"],
        "answer": "447 euros",
        "session": "new",
    }
    suite = _suite_with(home, case)
    standing = Standing(tuple(entries), len("\n§\n".join(entries)))
    evaluation = evaluate(suite, _engine(home, "hermes"), standing=standing)
    shoes = next(outcome for outcome in evaluation.outcomes if outcome.case.id == "shoes-new")
    assert shoes.received.answer is True and shoes.received.via == "expect"
    without = evaluate(suite, _engine(home, "hermes"))
    assert next(o for o in without.outcomes if o.case.id == "shoes-new").received.answer is False
    place = evaluation.places[NEW_PLACE]
    assert place["lines_per_turn"] == round(place["injected_lines_per_turn"] + 2, 3)
    assert place["chars_per_turn"] == round(place["injected_chars_per_turn"] + standing.chars, 1)
    assert evaluation.received["memory_blocks"] == {"entries": 2, "chars": standing.chars}


def _archived_with_summary(home, summary) -> tuple[str, str]:
    """Archive a [USER] row and write a summary of it (summary_of), its text `summary(text)`;
    (the row's id, its text)."""
    # A statement of some length, so that a third of it leaves most of its words out.
    memory_id, session_id, content = [
        row for row in _rows(home.db_path, "content LIKE '[USER]%'") if len(row[2].split()) >= 10
    ][3]
    text = content.removeprefix("[USER] ")
    connection = sqlite3.connect(home.db_path)
    with connection:
        connection.execute(
            "UPDATE working_memory SET valid_until = '2026-01-01T00:00:00' WHERE id = ?",
            (memory_id,),
        )
        connection.execute(
            "INSERT INTO episodic_memory (id, content, source, timestamp, session_id, summary_of, "
            "scope, importance) VALUES ('summary-1', ?, 'sleep-nrem', '2026-11-01T00:00:00', ?, ?, "
            "'global', 0.9)",
            (summary(text), session_id, memory_id),
        )
    connection.close()
    return memory_id, text


def _derived_outcome(home, memory_id: str, query: str):
    suite = _suite_with(home, {"id": "derived", "query": query, "relevant": [memory_id]})
    evaluation = evaluate(suite, _engine(home, "plain"))
    derived = next(outcome for outcome in evaluation.outcomes if outcome.case.id == "derived")
    assert "summary-1" in [item.id for item in derived.retrieved]
    assert derived.received.evidence is True and derived.received.via == "derived"
    return derived


def test_a_row_derived_from_the_evidence_counts_as_the_evidence(home):
    """The evidence row archived, a summary of it (summary_of) is what recall returns: the
    evidence is received, through lineage; it states the evidence in full, so the recall figures
    count it as the evidence too."""
    memory_id, text = _archived_with_summary(home, lambda text: f"Summary: {text}")
    assert _derived_outcome(home, memory_id, text).score.passed is True


def _first_third(text: str) -> str:
    return " ".join(text.split()[: max(2, len(text.split()) // 3)])


def test_a_derived_row_that_keeps_part_of_the_evidence_is_received_but_not_recalled(home):
    """A summary that keeps only the start of the evidence (as a 500-character cut does) reaches
    the agent through lineage, but recall@k does not count it as the evidence: the harm the guard
    refuses when summaries outrank their sources."""
    memory_id, text = _archived_with_summary(
        home, lambda text: f"Summary: {_first_third(text)} ..."
    )
    assert _derived_outcome(home, memory_id, _first_third(text)).score.passed is False


def test_eval_run_json_reports_places_and_keeps_its_fields(home, tmp_path):
    suite_path = tmp_path / "suite.jsonl"
    lines = (home.state_dir / "eval" / "suite.jsonl").read_text(encoding="utf-8")
    suite_path.write_text(lines + json.dumps(_global_case(home)) + "\n", encoding="utf-8")
    (home.memory_blocks_dir / "MEMORY.md").write_text("The user runs on Sundays.", encoding="utf-8")
    completed = run_cli(home, "--json", "eval", "run", "--suite", str(suite_path), timeout=600)
    result = json.loads(completed.stdout)
    stats = result["stats"]
    for field in ("metrics", "per_category", "case_results", "receives", "cases", "passed"):
        assert field in stats
    assert stats["places"][NEW_PLACE]["cases"] == 1
    assert stats["received"]["memory_blocks"] == {"entries": 1, "chars": 25}
    for name in ("evidence_received", "answer_received", "lines_per_turn", "chars_per_turn"):
        assert name in stats["places"][SAME_CHAT]
    assert stats["case_results"]["new-global"]["received"]["place"] == NEW_PLACE


def test_explain_asks_a_new_conversation_case_in_a_new_conversation(home):
    """``eval explain`` asks a ``session: new`` case where the eval asks it: a key no row has."""
    from mnemo_ops.evaluation.explain import explain_suite
    from mnemo_ops.settings import load_settings

    suite = _suite_with(home, _global_case(home))
    settings = load_settings(db=home.db_path, state_dir=home.state_dir, environ=home.environ())
    explained = explain_suite(settings, suite, ["new-global"])
    recalled_in = explained.cases[0].explanation.recalled_in
    assert recalled_in is not None and NEW_CONVERSATION_KEY in recalled_in
