"""self-reflection on a week of sessions written by Mnemosyne (``devtools/samples/reflection_week.py``).

The CLI runs as a real subprocess; Mnemosyne writes in the job's own child process; the model path
goes through the real llm library with the test models of ``tests/models/llm_test_plugin.py``,
loaded in the CLI's process through the entry point of a small test distribution.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.samples import reflection_week
from tests.conftest import copy_sample, run_cli
from tests.models.plugin import calls, model_plugin_environment
from tests.purity import assert_unchanged, sample_snapshot

OWNER = "dana"


@pytest.fixture(scope="session")
def week_template(tmp_path_factory):
    """The week of sessions, written once per test session through the real Mnemosyne API."""
    return reflection_week.build(tmp_path_factory.mktemp("reflection-week-template"))


@pytest.fixture
def week(week_template, tmp_path):
    """A private copy of the week for one test."""
    return copy_sample(week_template, tmp_path / "week")


@pytest.fixture(scope="session")
def reflected_template(week_template, tmp_path_factory):
    """The week after one real run of the extractor (guard off), and that run's result: shared by
    the tests that start from a reflected week or compare with one, so each pays no extra run."""
    layout = copy_sample(week_template, tmp_path_factory.mktemp("reflected-week") / "week")
    return layout, reflect(layout)


@pytest.fixture
def reflected(reflected_template, tmp_path):
    """A private copy of the reflected week for one test."""
    layout, _ = reflected_template
    return copy_sample(layout, tmp_path / "reflected")


def config(layout, text: str = "", guard: bool = False) -> str:
    """A config file for the home: the owner, the guard (off unless asked, for speed), `text`."""
    path = layout.directory / "config.yaml"
    guard_text = "guard:\n  probes: 40\n" if guard else "guard:\n  enabled: false\n"
    path.write_text(f"owner: {OWNER}\n{guard_text}{text}", encoding="utf-8")
    return str(path)


def reflect(layout, *args, config_file=None, env=None, check=True) -> dict:
    """``mnemo-ops --json run self-reflection ARGS``; the parsed result."""
    completed = run_cli(
        layout,
        "--json",
        "--config",
        config_file or config(layout),
        "run",
        "self-reflection",
        *args,
        env=env,
        timeout=300,
    )
    if check:
        assert completed.returncode == 0, completed.stderr + completed.stdout
    return json.loads(completed.stdout)


def query(db_path: Path, sql: str, parameters=()) -> list[tuple]:
    connection = sqlite3.connect(f"{db_path.as_uri()}?mode=ro", uri=True)
    try:
        return connection.execute(sql, parameters).fetchall()
    finally:
        connection.close()


def lessons(db_path: Path, live_only: bool = True) -> list[dict]:
    """The lesson rows (live ones by default), oldest first, with their metadata decoded."""
    rows = query(
        db_path,
        "SELECT id, content, source, veracity, trust_tier, scope, importance, valid_until, "
        "superseded_by, metadata_json FROM working_memory WHERE source = 'reflection' "
        + ("AND valid_until IS NULL " if live_only else "")
        + "ORDER BY timestamp, id",
    )
    names = ("id", "content", "source", "veracity", "trust_tier", "scope", "importance")
    names += ("valid_until", "superseded_by")
    return [{**dict(zip(names, row[:-1])), "metadata": json.loads(row[-1])} for row in rows]


def facts(db_path: Path) -> list[tuple]:
    return query(
        db_path,
        "SELECT owner_id, category, name, body, version, valid_until FROM canonical_facts "
        "WHERE category LIKE 'lesson:%' ORDER BY category, name, version",
    )


def remember(layout, session_id: str, text: str, importance: float = 0.6) -> str:
    """One more statement through Mnemosyne (in a child process, as the agent would write it); its id."""
    code = (
        "import sys; from mnemosyne.core.memory import Mnemosyne; "
        "print(Mnemosyne(session_id=sys.argv[1], db_path=sys.argv[2]).remember(sys.argv[3], "
        "source='user', importance=float(sys.argv[4]), veracity='stated', scope='global'))"
    )
    environment = {**layout.environ(), "MNEMOSYNE_NO_EMBEDDINGS": "1"}
    completed = subprocess.run(
        [sys.executable, "-c", code, session_id, str(layout.db_path), text, str(importance)],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    # Make it look idle (two hours ago and more), as a finished session would be.
    connection = sqlite3.connect(layout.db_path)
    with connection:
        connection.execute(
            "UPDATE working_memory SET timestamp = datetime('now', 'localtime', '-3 hours') "
            "WHERE session_id = ?",
            (session_id,),
        )
    connection.close()
    return completed.stdout.strip().splitlines()[-1]


@pytest.mark.heavy
def test_the_extractor_stores_the_weeks_lessons_once_under_the_recall_guard(week):
    installed = run_cli(week, "--config", config(week), "trigger", "install")
    assert installed.returncode == 0, installed.stderr
    hermes_files = sorted(week.hermes_home.iterdir())
    hermes_store = (week.hermes_home / "state.db").read_bytes()
    result = reflect(week, config_file=config(week, guard=True))
    # Hermes' session store was read (its messages are evidence) and never written or locked.
    assert result["stats"]["reflection"]["input"]["hermes"]["read"] is True
    assert (week.hermes_home / "state.db").read_bytes() == hermes_store
    assert sorted(week.hermes_home.iterdir()) == hermes_files
    assert result["status"] == "ok"
    assert result["stats"]["guard"]["verdict"] == "ok", result["stats"]["guard"]
    stored = lessons(week.db_path)
    kinds = {lesson["metadata"]["kind"] for lesson in stored}
    assert len(kinds & set(reflection_week.EXPECTED_KINDS)) >= 3
    assert len(stored) == len({lesson["metadata"]["_reflection"]["key"] for lesson in stored})
    assert result["changes"]["lessons_stored"] == len(stored)
    for lesson in stored:  # the assistant's own notes, never the user's words
        assert (lesson["source"], lesson["veracity"], lesson["trust_tier"]) == (
            "reflection",
            "inferred",
            "DERIVED",
        )
        assert lesson["content"].startswith("Note to self (")
        assert lesson["metadata"]["method"] == "extractive"
        assert lesson["metadata"]["sessions"] and lesson["metadata"]["confirmations"] >= 1
    by_slot = {lesson["metadata"]["slot"]: lesson for lesson in stored}
    preference = by_slot[reflection_week.EXPECTED_SLOTS["preference"]]
    # Stated in two sessions: one lesson, confirmed twice.
    assert preference["metadata"]["confirmations"] == 2
    assert preference["metadata"]["sessions"] == ["photo-tool", "travel-planning"]
    # The procedure's steps came from Hermes' session store (message ids), its confirmation from Mnemosyne.
    procedure = by_slot[reflection_week.EXPECTED_SLOTS["procedure"]]
    assert procedure["metadata"]["messages"] and procedure["metadata"]["memories"]
    assert procedure["metadata"]["steps"] == [
        "stop nginx",
        "run certbot renew",
        "start nginx again",
    ]
    # The session still going on waits for next week; the secret never went into a lesson.
    assert "green tea" not in json.dumps(stored)
    assert reflection_week.API_KEY not in json.dumps(stored)
    assert result["stats"]["reflection"]["input"]["deferred"] == ["still-talking"]
    # One canonical fact per lesson, in lesson:<kind>, the configured owner's.
    assert sorted(
        (owner, category, name, body) for owner, category, name, body, *_ in facts(week.db_path)
    ) == sorted(
        (
            OWNER,
            f"lesson:{lesson['metadata']['kind']}",
            lesson["metadata"]["slot"],
            lesson["metadata"]["_reflection"]["body"],
        )
        for lesson in stored
    )
    # The promotion trigger never took a lesson for a user-stated fact.
    ids = [lesson["id"] for lesson in stored]
    promoted = query(
        week.db_path,
        f"SELECT count(*) FROM canonical_facts WHERE source IN ({', '.join('?' for _ in ids)})",
        [f"auto:{memory_id}" for memory_id in ids],
    )
    assert promoted == [(0,)]

    # A second run this week changes nothing and skips the trial; --force does not duplicate.
    before = query(
        week.db_path, "SELECT id, metadata_json, valid_until FROM working_memory ORDER BY id"
    )
    again = reflect(week, config_file=config(week, guard=True))
    assert set(again["changes"].values()) == {0}
    assert again["stats"]["guard"]["verdict"] == "not-needed"
    assert any(w["code"] == "self-reflection-done-this-week" for w in again["warnings"])
    forced = reflect(week, "--force")
    assert set(forced["changes"].values()) == {0}
    assert {entry["action"] for entry in forced["stats"]["reflection"]["lessons"]} == {"unchanged"}
    assert (
        query(week.db_path, "SELECT id, metadata_json, valid_until FROM working_memory ORDER BY id")
        == before
    )
    # The trigger is live in this database: a user-stated fact is promoted at once.
    control = remember(week, "flight-booking", "My passport number ends in 4711.", importance=0.8)
    assert query(
        week.db_path, "SELECT count(*) FROM canonical_facts WHERE source = ?", [f"auto:{control}"]
    ) == [(1,)]


@pytest.mark.guard
def test_lessons_that_outrank_the_users_own_words_are_refused_by_the_guard(week):
    """The user's eval suite asks for their own statements (a preference stated twice, a failed
    backup); the week's lessons restate them as the assistant's notes and would rank above them.
    Judged by rank (the plain profile), the guard refuses: no lesson is stored, and the database is
    as before."""
    statements = query(
        week.db_path,
        "SELECT id, content FROM working_memory WHERE source = 'user' AND "
        "(content LIKE '%prefer window seats%' OR content LIKE '%error%')",
    )
    assert len(statements) >= 2
    suite = week.state_dir / "eval" / "suite.jsonl"
    suite.parent.mkdir(parents=True, exist_ok=True)
    suite.write_text(
        "".join(
            json.dumps({"id": f"stated-{index}", "query": content, "relevant": [memory_id]}) + "\n"
            for index, (memory_id, content) in enumerate(statements)
        ),
        encoding="utf-8",
    )
    rows_before = query(week.db_path, "SELECT id, valid_until FROM working_memory ORDER BY id")
    result = reflect(
        week,
        config_file=config(week, "retrieval_eval:\n  profile: plain\n", guard=True),
        check=False,
    )
    assert result["status"] == "failed"
    guard = result["stats"]["guard"]
    assert guard["verdict"] == "refused"
    assert guard["trial"]["changes"]["lessons_stored"] > 0
    assert guard["suite"]["after"]["mrr@10"] < guard["suite"]["before"]["mrr@10"]
    assert [warning["code"] for warning in result["warnings"]] == ["recall-guard-refused"]
    assert lessons(week.db_path, live_only=False) == []
    assert query(week.db_path, "SELECT id, valid_until FROM working_memory ORDER BY id") == (
        rows_before
    )


@pytest.mark.heavy
def test_a_dry_run_lists_the_lessons_with_the_counts_and_changes_nothing(week, reflected_template):
    config_file = config(week)
    before = sample_snapshot(week)
    completed = run_cli(week, "--config", config_file, "run", "self-reflection", "--dry-run")
    assert completed.returncode == 0, completed.stderr
    assert "lessons it would store:" in completed.stdout
    assert "long-seats-window: The user prefers window seats on long flights." in completed.stdout
    dry = reflect(week, "--dry-run", config_file=config_file)
    assert_unchanged(before, sample_snapshot(week))
    _, real = reflected_template  # the real run on an identical copy of the week
    assert dry["changes"] == real["changes"] and dry["changes"]["lessons_stored"] >= 3
    assert [e["slot"] for e in dry["stats"]["reflection"]["lessons"]] == [
        e["slot"] for e in real["stats"]["reflection"]["lessons"]
    ]


@pytest.mark.heavy
def test_a_restated_lesson_reinforces_and_a_contradiction_supersedes(reflected):
    week = reflected
    [before] = [row for row in lessons(week.db_path) if row["metadata"]["kind"] == "preference"]
    remember(week, "flight-booking", "I prefer window seats on long flights, as I said.")
    reinforced = reflect(week, "--force")
    assert reinforced["changes"]["lessons_reinforced"] == 1
    # The writer child's own transaction (the reinforcement) is in the run's meter.
    assert reinforced["stats"]["transactions"]["count"] >= 1
    assert reinforced["changes"]["lessons_stored"] == 0
    [after] = [row for row in lessons(week.db_path) if row["metadata"]["kind"] == "preference"]
    assert after["id"] == before["id"]
    assert (
        after["metadata"]["confirmations"] == 3
        and "flight-booking" in after["metadata"]["sessions"]
    )
    assert after["importance"] >= 0.7  # high enough for the trigger, were it a user-stated fact

    remember(week, "flight-change", "I don't want window seats on long flights anymore.")
    changed = reflect(week, "--force")
    assert (
        changed["changes"]["lessons_superseded"] == 1
        and changed["changes"]["canonical_updated"] == 1
    )
    every = {row["id"]: row for row in lessons(week.db_path, live_only=False)}
    [current] = [row for row in lessons(week.db_path) if row["metadata"]["kind"] == "preference"]
    assert current["metadata"]["slot"] == before["metadata"]["slot"]
    assert "does not want" in current["content"]
    assert (
        every[before["id"]]["valid_until"] and every[before["id"]]["superseded_by"] == current["id"]
    )
    slot = [f for f in facts(week.db_path) if f[1] == "lesson:preference"]
    assert [(version, valid_until is None) for *_, version, valid_until in slot] == [
        (1, False),
        (2, True),
    ]
    assert slot[-1][3].startswith("The user does not want window seats")


def model_environment(tmp_path) -> dict[str, str]:
    pytest.importorskip("llm")
    return model_plugin_environment(tmp_path / "model")


@pytest.mark.heavy
def test_with_the_test_model_its_lessons_are_the_ones_stored(week, tmp_path):
    environment = model_environment(tmp_path)
    config_file = config(week, "models:\n  model: mnemo-test\n  remote: false\n")
    result = reflect(week, config_file=config_file, env=environment)
    stored = lessons(week.db_path)
    assert stored and all(
        row["content"].split(": ", 1)[1].startswith("[test model]") for row in stored
    )
    assert {row["metadata"]["method"] for row in stored} == {"mnemo-test"}
    assert (
        result["stats"]["reflection"]["answered"] == result["stats"]["reflection"]["batches"] >= 1
    )
    assert result["stats"]["model"]["calls"] == len(
        calls(Path(environment["MNEMO_TEST_MODEL_LOG"]))
    )
    assert "extractor" not in result["stats"]["reflection"]
    [prompt] = [call["prompt"] for call in calls(Path(environment["MNEMO_TEST_MODEL_LOG"]))][:1]
    assert "went well" in prompt and "[m:" in prompt and "[h:" in prompt
    assert reflection_week.API_KEY not in prompt and "[REDACTED:openai-key]" in prompt


@pytest.mark.heavy
def test_private_rows_never_reach_a_remote_model(week, tmp_path):
    environment = model_environment(tmp_path)
    config_file = config(week, "models:\n  model: mnemo-test\n")  # remote: true by default
    result = reflect(week, config_file=config_file, env=environment)
    sent = "\n".join(
        c["system"] + c["prompt"] for c in calls(Path(environment["MNEMO_TEST_MODEL_LOG"]))
    )
    assert sent, "the shared rows should have been sent"
    assert reflection_week.PRIVATE_MARKER not in sent
    assert "chown backup" not in sent and "stop nginx" not in sent  # session rows, Hermes messages
    assert reflection_week.API_KEY not in sent
    assert result["stats"]["model"]["withheld_private"] > 0
    # What the model could not see, the extractor read here: nothing is lost.
    methods = {row["metadata"]["method"] for row in lessons(week.db_path)}
    assert methods == {"mnemo-test", "extractive"}


@pytest.mark.heavy
def test_a_malformed_answer_skips_its_batch_and_the_run_goes_on(week, tmp_path):
    environment = model_environment(tmp_path)
    config_file = config(week, "models:\n  model: mnemo-test-malformed\n  remote: false\n")
    result = reflect(week, config_file=config_file, env=environment)
    reflection = result["stats"]["reflection"]
    assert reflection["skipped"] == {"malformed": reflection["batches"]}
    assert result["stats"]["model"]["retries"] == reflection["batches"]
    assert result["stats"]["model"]["malformed"] == reflection["batches"]
    assert {row["metadata"]["method"] for row in lessons(week.db_path)} == {"extractive"}
    assert result["changes"]["lessons_stored"] >= 3


@pytest.mark.heavy
def test_kill_9_mid_run_then_the_rerun_stores_each_lesson_exactly_once(week, reflected_template):
    reference, reference_result = reflected_template  # the same week, reflected without a kill
    expected = reference_result["changes"]["lessons_stored"]
    config_file = config(week)
    victim = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "--config", config_file, "run", "self-reflection"],
        env=week.environ(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the job and its writer child die together, as with a machine crash
    )
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and victim.poll() is None:
            try:
                if query(
                    week.db_path, "SELECT count(*) FROM working_memory WHERE source = 'reflection'"
                )[0][0]:
                    break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.005)
        os.killpg(victim.pid, signal.SIGKILL)
    finally:
        victim.wait(timeout=30)
    assert query(week.db_path, "PRAGMA integrity_check") == [("ok",)]
    partial = len(lessons(week.db_path))
    assert 1 <= partial <= expected
    reflect(week)
    stored = lessons(week.db_path, live_only=False)
    keys = [lesson["metadata"]["_reflection"]["key"] for lesson in stored]
    assert len(keys) == len(set(keys)) == expected
    assert sorted(keys) == sorted(
        row["metadata"]["_reflection"]["key"] for row in lessons(reference.db_path)
    )
    assert len([f for f in facts(week.db_path) if f[5] is None]) == expected


def test_the_report_lists_what_was_learned_this_week(reflected):
    week = reflected
    completed = run_cli(week, "--json", "report", "--no-write")
    assert completed.returncode in (0, 1), completed.stderr
    learned = json.loads(completed.stdout)["learned_this_week"]
    assert {entry["kind"] for entry in learned} >= {"preference", "procedure", "environment"}
    assert all(entry["new"] and entry["method"] == "extractive" for entry in learned)
    text = run_cli(week, "report", "--no-write").stdout
    assert "Learned this week:" in text
    assert "new preference: The user prefers window seats on long flights. (2x, extractive)" in text


@pytest.mark.heavy
def test_beside_a_live_agent_writing_through_mnemosyne(week):
    """The agent writes every few milliseconds while the lessons are stored: it sees no error, and
    every row it wrote is there."""
    writer_script = Path(__file__).resolve().parents[2] / "faults" / "live_writer.py"
    stop_file, report_file = week.directory / "stop", week.directory / "writer.json"
    writer = subprocess.Popen(
        [sys.executable, str(writer_script), str(week.db_path), str(stop_file), str(report_file)],
        env=week.environ(),
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{report_file}.started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = reflect(week)
    finally:
        stop_file.write_text("stop")
        writer.wait(timeout=60)
    assert result["status"] == "ok" and result["changes"]["lessons_stored"] >= 3
    report = json.loads(report_file.read_text())
    assert report["errors"] == [] and report["written"]
    present = query(
        week.db_path,
        f"SELECT count(*) FROM working_memory WHERE id IN ({','.join('?' * len(report['written']))})",
        report["written"],
    )
    assert present == [(len(report["written"]),)]
