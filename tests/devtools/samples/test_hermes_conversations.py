"""The Hermes conversation homes (``devtools/samples/hermes_conversations``), built by the real Mnemosyne of
this venv and, where it is installed (the 4.0 venv), the real ``mnemosyne-hermes`` plugin.

Two homes are built once for the module: the default small one and the same one aged 10 days.
Their rows must have the plugin's shape, sit on their sessions' dates, and every question's
evidence must exist and hold its answer; the aged one must be the fresh one moved 10 days back.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from collections import Counter
from datetime import date, datetime, timedelta

import pytest

from devtools.samples import hermes_conversations as homes
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.mnemosyne.sample_home import SampleLayout

PLUGIN = importlib.util.find_spec("mnemosyne_hermes") is not None
NO_PLUGIN = (
    "mnemosyne-hermes is not installed here (the 4.0 venv has it); BeamMemory wrote the rows"
)
AGE = 10


def rows(layout: SampleLayout) -> list[dict]:
    """Every working row of a home, as dicts."""
    connection = sqlite3.connect(layout.db_path)
    connection.row_factory = sqlite3.Row
    try:
        return [
            dict(row) for row in connection.execute("SELECT * FROM working_memory ORDER BY rowid")
        ]
    finally:
        connection.close()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> SampleLayout:
    return homes.build(tmp_path_factory.mktemp("hermes-fresh"))


@pytest.fixture(scope="module")
def aged(tmp_path_factory) -> SampleLayout:
    return homes.build(tmp_path_factory.mktemp("hermes-aged"), age_days=AGE)


@pytest.fixture(scope="module")
def plan() -> homes.Plan:
    return homes.generate()


def test_the_writer_is_the_plugin_where_it_is_installed(fresh):
    manifest = homes.read_manifest(fresh)
    assert manifest["writer"] == ("mnemosyne-hermes" if PLUGIN else "mnemosyne")
    assert manifest["versions"]["mnemosyne-hermes"] == ("0.7.6" if PLUGIN else None)


@pytest.mark.skipif(not PLUGIN, reason=NO_PLUGIN)
def test_the_identity_signals_are_the_plugins():
    from mnemosyne_hermes import MnemosyneMemoryProvider

    assert tuple(MnemosyneMemoryProvider._IDENTITY_SIGNALS) == homes.IDENTITY_SIGNALS


def test_rows_have_the_plugins_shape(fresh, plan):
    sessions = {conversation.session_id for conversation in plan.conversations}
    shapes = Counter()
    for row in rows(fresh):
        prefix = row["content"].split(" ", 1)[0]
        shapes[prefix] += 1
        assert row["session_id"] in sessions, row
        expected = {
            "[USER]": ("conversation", 0.5, "session", "unknown"),
            "[ASSISTANT]": ("conversation", 0.15, "session", "unknown"),
            "[IDENTITY]": ("identity", 0.85, "global", "stated"),
        }[prefix]
        assert (row["source"], row["importance"], row["scope"], row["veracity"]) == expected, row
    assert shapes["[USER]"] and shapes["[ASSISTANT]"] and shapes["[IDENTITY]"]
    # Turns of 5 characters or less ("Ok") are not stored, as the plugin does not store them.
    assert shapes["[USER]"] < plan.turns() // 2


def test_every_identity_row_is_for_a_turn_with_a_signal(fresh):
    for row in rows(fresh):
        if row["content"].startswith("[IDENTITY] "):
            assert homes.identity_signal(row["content"].removeprefix("[IDENTITY] "))


def test_rows_sit_on_their_sessions_dates(fresh, plan):
    manifest = homes.read_manifest(fresh)
    anchor = date.fromisoformat(manifest["anchor"])
    assert anchor == date.fromisoformat(manifest["today"]) - timedelta(days=1)
    by_content = {(row["session_id"], row["content"]): row for row in rows(fresh)}
    checked = 0
    for conversation in plan.conversations:
        for session, exchange in conversation.exchanges():
            row = by_content.get((conversation.session_id, f"[USER] {exchange.user}"))
            if row is None or exchange.user in repeated_texts(plan):
                continue  # not stored (too short), or stored once for several turns
            said = datetime.fromisoformat(row["timestamp"])
            assert said.date() == session.day(anchor), (exchange.key, row["timestamp"])
            assert said == datetime.combine(session.day(anchor), datetime.min.time()) + timedelta(
                seconds=session.start_second + exchange.second
            )
            checked += 1
    assert checked > 100
    newest = max(datetime.fromisoformat(row["timestamp"]) for row in rows(fresh))
    assert newest.date() == anchor
    assert manifest["unshifted"] == {}  # nothing keeps the build's date
    assert manifest["episodic_rows"] == 0  # the plugin's auto-sleep found nothing to sleep


def repeated_texts(plan: homes.Plan) -> set[str]:
    counts = Counter(
        (conversation.chat_key, exchange.user)
        for conversation in plan.conversations
        for _, exchange in conversation.exchanges()
    )
    return {text for (_, text), count in counts.items() if count > 1}


def test_event_dates_are_parsed_from_the_session_day(fresh):
    # Mnemosyne parsed "yesterday" (or "today") against the build's clock; backdating parses the
    # row again against the session's time, as the write would have then.
    offsets = {"yesterday": -1, "today": 0}
    checked = 0
    for row in rows(fresh):
        said = [phrase for phrase in offsets if f" {phrase}" in row["content"].lower()]
        if len(said) != 1 or not row["event_date"]:
            continue
        day = datetime.fromisoformat(row["timestamp"]).date()
        assert date.fromisoformat(row["event_date"]) == day + timedelta(days=offsets[said[0]])
        checked += 1
    assert checked


def test_aging_moves_the_whole_home_back(fresh, aged):
    before = {(row["session_id"], row["content"]): row for row in rows(fresh)}
    after = {(row["session_id"], row["content"]): row for row in rows(aged)}
    assert before.keys() == after.keys()  # and so the same seed writes the same rows
    for key, row in before.items():
        moved = after[key]
        assert (moved["source"], moved["importance"], moved["scope"]) == (
            row["source"],
            row["importance"],
            row["scope"],
        )
        shift = datetime.fromisoformat(row["timestamp"]) - datetime.fromisoformat(
            moved["timestamp"]
        )
        assert shift == timedelta(days=AGE), key
        if row["event_date"]:
            moved_by = date.fromisoformat(row["event_date"]) - date.fromisoformat(
                moved["event_date"]
            )
            if any(day.lower() in row["content"].lower() for day in homes.words.WEEKDAYS):
                # "last Friday" said 10 days earlier is another weekday's distance away.
                assert abs(moved_by - timedelta(days=AGE)) < timedelta(days=7), key
            else:
                assert moved_by == timedelta(days=AGE), key
    newest = max(datetime.fromisoformat(row["timestamp"]) for row in after.values())
    today = date.fromisoformat(homes.read_manifest(aged)["today"])
    assert (today - newest.date()).days >= AGE
    assert homes.read_manifest(aged)["unshifted"] == {}


def test_every_case_names_rows_that_hold_its_answer(fresh, plan):
    suite = load_suite(fresh.state_dir / "eval" / "suite.jsonl")
    by_id = {row["id"]: row for row in rows(fresh)}
    questions = {question.id: question for question in plan.questions()}
    assert {case.id for case in suite.cases} == set(questions)
    for case in suite.cases:
        question = questions[case.id]
        assert case.relevant and case.expect and case.answer
        for memory_id in case.relevant:
            content = by_id[memory_id]["content"]
            assert content.startswith(("[USER] ", "[IDENTITY] ")), content
            if question.relative is not None:  # the relative date the answer is resolved from
                assert question.relative.phrase in content, (case.id, content)
        holding = [
            memory_id
            for memory_id in case.relevant
            if any(
                text.casefold() in by_id[memory_id]["content"].casefold() for text in case.expect
            )
        ]
        if case.category == "multi-hop":
            # The first fact joins the question to the second, which holds the answer.
            assert holding == [case.relevant[-1]], (case.id, case.expect)
        else:
            assert holding == list(case.relevant), (case.id, case.expect)


def test_each_category_and_its_session(fresh, plan):
    suite = load_suite(fresh.state_dir / "eval" / "suite.jsonl")
    assert {case.category for case in suite.cases} == set(homes.CATEGORIES)
    written = {row["session_id"] for row in rows(fresh)}
    by_id = {row["id"]: row for row in rows(fresh)}
    for case in suite.cases:
        assert case.session.startswith("hermes_")
        if case.category == "new-session":
            # A session nothing was written in (a CLI run): only global rows reach it.
            assert case.session not in written
        else:
            assert case.session in written
            assert all(
                by_id[memory_id]["session_id"] == case.session for memory_id in case.relevant
            )
    identity = [
        case for case in suite.cases if case.category == "new-session" and len(case.relevant) == 2
    ]
    assert identity
    for case in identity:
        assert by_id[case.relevant[0]]["scope"] == "global"


def test_temporal_answers_follow_the_session_date(fresh, aged):
    def answers(layout):
        suite = load_suite(layout.state_dir / "eval" / "suite.jsonl")
        return {case.id: case.answer for case in suite.cases if case.category == "temporal"}

    fresh_answers, aged_answers = answers(fresh), answers(aged)
    assert fresh_answers.keys() == aged_answers.keys() and fresh_answers
    assert all(fresh_answers[key] != aged_answers[key] for key in fresh_answers)


def test_the_plan_is_deterministic_for_a_seed(plan):
    assert homes.generate() == plan
    other = homes.generate(seed=27)
    assert [q.query for q in other.questions()] != [q.query for q in plan.questions()]


def test_the_benchmark_size():
    big = homes.generate(**homes.BENCHMARK_SIZE)
    assert big.turns() == 5700
    counts = Counter(question.category for question in big.questions())
    assert 280 <= sum(counts.values()) <= 320
    assert set(counts) == set(homes.CATEGORIES) and min(counts.values()) >= 20
    for conversation in big.conversations:
        keys = [(q.session_key, q.query) for q in conversation.questions]
        assert len(keys) == len(set(keys))  # no question asked twice in one session
        days = [session.days_before for session in conversation.sessions]
        assert days == sorted(days, reverse=True) and len(set(days)) == len(days)
        assert all(
            len(exchange.user) < homes.USER_LIMIT for _, exchange in conversation.exchanges()
        )
        said = {exchange.key: exchange.user for _, exchange in conversation.exchanges()}
        for question in conversation.questions:
            for evidence in question.evidence:
                if evidence.role == "identity":  # the plugin will write its [IDENTITY] row
                    assert homes.identity_signal(said[evidence.key]), said[evidence.key]


def test_relative_dates_resolve_as_said():
    friday = next(item for item in homes.words.PAST_RELATIVE if item.phrase == "last Friday")
    # Said on Monday 30 November 2026: the Friday before.
    assert friday.resolve(date(2026, 11, 30)).startswith("Friday, 27 November 2026")
    assert friday.resolve(date(2026, 11, 27)).startswith("Friday, 20 November 2026")
    tomorrow = next(item for item in homes.words.FUTURE_RELATIVE if item.phrase == "tomorrow")
    assert tomorrow.resolve(date(2026, 12, 31)) == "Friday, 1 January 2027"


def test_a_written_timeline_aged_with_the_plugins_default_roles(tmp_path):
    layout = homes.build(
        tmp_path / "written",
        conversations=1,
        sessions_per_conversation=2,
        turns_per_session=12,
        age_days=AGE,
        sync_roles=("user",),
        timeline="written",
    )
    assert "sync_roles: [user]" in (layout.hermes_home / "config.yaml").read_text()
    written = rows(layout)
    assert written and not any(row["content"].startswith("[ASSISTANT]") for row in written)
    times = sorted(datetime.fromisoformat(row["timestamp"]) for row in written)
    # As the plugin stamped them, a few seconds apart, moved back 10 days.
    assert times[-1] - times[0] < timedelta(minutes=10)
    today = date.fromisoformat(homes.read_manifest(layout)["today"])
    assert times[-1].date() == today - timedelta(days=AGE)
    assert load_suite(layout.state_dir / "eval" / "suite.jsonl").cases
