"""The deploy gate compares each place the agent is asked in with the baseline, not only the whole
suite: a change that takes a fact away from a new conversation fails ``eval run`` while the same
chat and the overall figures hold.

A home written as Hermes' plugin writes one (``devtools/samples/hermes_conversations``), the real CLI
(``eval baseline``, ``eval run``), Mnemosyne's recall on a snapshot; the change is made to the
database with SQL, as a job would make it."""

from __future__ import annotations

import json

import pytest

from mnemo_ops.evaluation.asked import NEW_PLACE
from tests.conftest import run_cli
from tests.hermes_rows import execute_sql, unused_user_rows


@pytest.fixture
def home(hermes_home):
    """A private copy of the tests' Hermes conversation home (``tests/conftest.py``)."""
    return hermes_home


def _global_fact(home) -> tuple[str, str]:
    """(id, text) of a [USER] row no suite case names, made a global fact (what graduation writes),
    so every conversation receives it."""
    memory_id, text = unused_user_rows(home, 1)[0]
    execute_sql(
        home.db_path,
        "UPDATE working_memory SET scope = 'global', importance = 0.9 WHERE id = ?",
        (memory_id,),
    )
    return memory_id, text


def _config(home, tmp_path, case: dict) -> str:
    """The home's suite plus `case` asked in a new conversation; a tolerance so wide that only a
    place losing its one case can exceed it."""
    suite = tmp_path / "suite.jsonl"
    text = (home.state_dir / "eval" / "suite.jsonl").read_text(encoding="utf-8")
    suite.write_text(text + json.dumps(case) + "\n", encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"retrieval_eval:\n  suite: {suite}\n  baseline: {tmp_path / 'baseline.json'}\n"
        "  tolerance: 0.5\n  max_case_regressions: 5\n",
        encoding="utf-8",
    )
    return str(config)


@pytest.mark.heavy
def test_a_change_that_lowers_only_a_new_conversation_fails_the_gate(home, tmp_path):
    memory_id, text = _global_fact(home)
    case = {"id": "new-asked", "query": text, "relevant": [memory_id], "session": "new"}
    config = _config(home, tmp_path, case)
    written = run_cli(home, "--config", config, "--json", "eval", "baseline", timeout=600)
    assert written.returncode == 0, written.stderr
    baseline = json.loads((tmp_path / "baseline.json").read_text(encoding="utf-8"))
    assert baseline["places"][NEW_PLACE]["evidence_received"] == 1.0
    assert baseline["cases"]["new-asked"] == {
        "rank": baseline["cases"]["new-asked"]["rank"],
        "passed": baseline["cases"]["new-asked"]["passed"],
        "place": NEW_PLACE,
        "evidence_received": True,
    }
    unchanged = run_cli(home, "--config", config, "--json", "eval", "run", timeout=600)
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr

    # The fact goes back to its own chat: that chat and recall over every session still have it.
    execute_sql(
        home.db_path, "UPDATE working_memory SET scope = 'session' WHERE id = ?", (memory_id,)
    )
    completed = run_cli(home, "--config", config, "--json", "eval", "run", timeout=600)

    assert completed.returncode == 1, completed.stdout + completed.stderr
    result = json.loads(completed.stdout)
    drops = [
        warning["message"]
        for warning in result["warnings"]
        if warning["code"] == "metric-regressed"
    ]
    # The whole suite's figures stay within the tolerance; the new conversation's do not.
    assert drops and all(message.startswith(f"{NEW_PLACE} ") for message in drops), drops
    assert any(f"{NEW_PLACE} evidence_received fell from 1.000 to 0.000" in m for m in drops)
    lost = [
        warning["message"] for warning in result["warnings"] if warning["code"] == "case-regressed"
    ]
    assert any(
        "case new-asked reached the agent in new-conversation in the baseline" in m for m in lost
    )
    assert NEW_PLACE in result["error"]


def test_a_baseline_without_places_is_compared_overall_and_says_so(home, tmp_path):
    memory_id, text = _global_fact(home)
    case = {"id": "new-asked", "query": text, "relevant": [memory_id], "session": "new"}
    config = _config(home, tmp_path, case)
    assert run_cli(home, "--config", config, "eval", "baseline", timeout=600).returncode == 0
    path = tmp_path / "baseline.json"
    older = json.loads(path.read_text(encoding="utf-8"))
    # As an older mnemo-ops wrote it: no places, no place per case.
    del older["places"]
    older["cases"] = {
        case_id: {"rank": data["rank"], "passed": data["passed"]}
        for case_id, data in older["cases"].items()
    }
    path.write_text(json.dumps(older), encoding="utf-8")
    execute_sql(
        home.db_path, "UPDATE working_memory SET scope = 'session' WHERE id = ?", (memory_id,)
    )

    completed = run_cli(home, "--config", config, "--json", "eval", "run", timeout=600)

    result = json.loads(completed.stdout)
    assert completed.returncode == 0, result["error"]
    assert any(
        "the baseline pins no places" in warning["message"] for warning in result["warnings"]
    )
