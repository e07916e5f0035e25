"""``eval explain`` and ``why`` through real subprocesses: one JSON object, the reasons named, exit
codes, the live database untouched."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta

import pytest

from tests.conftest import run_cli

HAS_PLUGIN = (
    subprocess.run(
        [sys.executable, "-c", "import mnemosyne_hermes"], capture_output=True, timeout=120
    ).returncode
    == 0
)


def parse(process) -> dict:
    """The one JSON object a --json command prints."""
    assert process.stdout.strip(), process.stderr
    return json.loads(process.stdout)


def digest(path) -> str:
    """The file's sha256 (the live database must not change)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def close_row(layout, memory_id: str) -> str:
    """Close a row as a job would; its content."""
    connection = sqlite3.connect(layout.db_path)
    with connection:
        (content,) = connection.execute(
            "SELECT content FROM working_memory WHERE id = ?", (memory_id,)
        ).fetchone()
        connection.execute(
            "UPDATE working_memory SET valid_until = ? WHERE id = ?",
            ((datetime.now() - timedelta(days=1)).isoformat(), memory_id),
        )
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return content


@pytest.mark.heavy
def test_eval_explain_only_misses_prints_one_object_with_the_summary(agent_conversations):
    before = digest(agent_conversations.db_path)
    process = run_cli(
        agent_conversations, "--json", "eval", "explain", "--only", "misses", timeout=600
    )
    assert process.returncode == 0, process.stderr
    data = parse(process)
    assert data["missed"] == len(data["cases"]) > 0
    assert data["cases_explained"] > data["missed"]
    assert all(not case["passed"] and case["reason"] != "injected" for case in data["cases"])
    assert sum(row["missed"] for row in data["summary"].values()) == data["missed"]
    assert sum(data["reasons"].values()) == data["missed"]
    assert data["mismatches"] == 0
    assert digest(agent_conversations.db_path) == before  # a snapshot copy was explained


def test_eval_explain_text_names_each_case_and_the_largest_reason(agent_conversations):
    suite = agent_conversations.state_dir / "eval" / "suite.jsonl"
    first = json.loads(suite.read_text().splitlines()[0])
    process = run_cli(agent_conversations, "eval", "explain", "--case", first["id"], timeout=600)
    assert process.returncode == 0, process.stderr
    assert first["id"] in process.stdout
    assert "misses per category and reason" in process.stdout


def test_why_with_an_expected_text_names_the_reason(agent_conversations):
    suite = agent_conversations.state_dir / "eval" / "suite.jsonl"
    case = json.loads(suite.read_text().splitlines()[1])
    content = close_row(agent_conversations, case["relevant"][0])
    key = case["session"].removeprefix("hermes_")
    process = run_cli(
        agent_conversations,
        "why",
        case["query"],
        "--expect",
        content[:40],
        "--session",
        key,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr
    out = " ".join(process.stdout.split())
    assert f"recalled in {case['session']}" in out
    assert "not retrieved within 50" in out and "1 closed" in out


def test_why_json_is_one_object_with_the_candidates(agent_conversations):
    suite = agent_conversations.state_dir / "eval" / "suite.jsonl"
    case = json.loads(suite.read_text().splitlines()[1])
    process = run_cli(
        agent_conversations,
        "--json",
        "why",
        case["query"],
        "--expect",
        case["relevant"][0],
        "--session",
        case["session"],
        timeout=600,
    )
    assert process.returncode == 0, process.stderr
    data = parse(process)
    assert data["recalled_in"] == case["session"]
    assert data["candidates"] and all("scores" in item for item in data["candidates"])
    assert [target["kind"] for target in data["targets"]] == ["id"]
    # What the reader must know about the profile, beside the question's own notes.
    assert data["approximate"] is (not HAS_PLUGIN) and isinstance(data["notes"], list)
    assert any("approximation" in note for note in data["profile_notes"]) is (not HAS_PLUGIN)


def test_usage_and_database_problems_exit_2(agent_conversations, tmp_path):
    missing = run_cli(None, "--json", "--db", str(tmp_path / "none.db"), "why", "anything")
    assert missing.returncode == 2
    assert parse(missing)["exit_code"] == 2
    unknown = run_cli(agent_conversations, "eval", "explain", "--case", "no-such-case")
    assert unknown.returncode == 2 and "no case 'no-such-case'" in unknown.stderr
    bad = run_cli(agent_conversations, "eval", "explain", "--only", "hits")
    assert bad.returncode == 2 and "--only takes misses" in bad.stderr
    empty = run_cli(agent_conversations, "why", "  ")
    assert empty.returncode == 2 and "the question is empty" in empty.stderr
