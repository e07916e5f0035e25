"""The graduation stage: the owner's statements across every session become owner-stamped global
rows (lineage, resolved dates, restatements merged, a changed fact superseded), bounded, faithful,
recorded first and finished after a kill, only in a home one person talks to; with a model through
the llm layer and without one."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta

import pytest
from freezegun import freeze_time

from mnemo_ops import jobs
from mnemo_ops.core import runner, state
from mnemo_ops.jobs.evening_batch.consolidation.batch import Step, run_steps
from mnemo_ops.jobs.evening_batch.sleep import dream_steps, graduation, steps, store
from mnemo_ops.mnemosyne import graduation as writer
from tests.conftest import run_cli
from tests.jobs.evening_batch.sleep.conftest import query, run_sleep
from tests.jobs.evening_batch.sleep.conftest import settings_for as plain_settings_for
from tests.jobs.evening_batch.sleep.homes import build
from tests.models.plugin import calls, registered_test_models


def settings_for(layout, tmp_path, config: str = ""):
    """The sleep tests' settings with graduation turned on (it is opt-in) and `config` (YAML)."""
    if "sleep:\n" in config:
        config = config.replace("sleep:\n", "sleep:\n  graduate: true\n", 1)
    else:
        config = "sleep:\n  graduate: true\n" + config
    return plain_settings_for(layout, tmp_path, config)


__all__ = ["registered_test_models"]  # the fixture, used by name below

STAGES = (
    Step("reinforcement", steps.reinforcement_step),
    Step("importance", steps.importance_step),
    Step("graduation", dream_steps.graduation_step),
)
DOG = "[USER] We adopted a greyhound named Biscuit yesterday, he is three years old."
DOG_AGAIN = "[USER] Like I said, we adopted a greyhound named Biscuit, he is three years old."
JOB = "[USER] I started a new job at Halden Bridges last Monday as a structural engineer."
TRIP = "[USER] My sister Hanna is flying to Lisbon on 14 March for her friend's wedding."
CHATTER = "[USER] haha ok sounds good, thanks a lot"
ASSISTANT = "[ASSISTANT] That sounds lovely, Biscuit is a great name for a greyhound."


def _memory(key, content, session, days_ago, **extra):
    return {
        "key": key,
        "content": content,
        "session": session,
        "source": "conversation",
        "days_ago": days_ago,
        **extra,
    }


def _spec(*memories):
    return {"memories": list(memories)}


PLUGIN_HOME = _spec(
    _memory("dog", DOG, "hermes_20261101_cli", 6),
    _memory("chatter", CHATTER, "hermes_20261101_cli", 6),
    _memory("assistant", ASSISTANT, "hermes_20261101_cli", 6, importance=0.15),
    _memory("job", JOB, "hermes_20261102_cli", 5),
    _memory("dog-again", DOG_AGAIN, "hermes_20261103_cli", 4),
    _memory("trip", TRIP, "hermes_telegram-1", 3),
    {
        "key": "stated",
        "content": "Dana keeps the spare house key with the neighbour Olsen at number 12.",
        "source": "user",
        "veracity": "stated",
        "session": "s-import",
        "days_ago": 2,
    },
)


def _run(settings, dry_run=False):
    """Reinforcement, importance and graduation through the real runner, the recall guard off."""
    return runner.run_job(
        settings.updated(guard={"enabled": False}),
        "evening-batch",
        lambda ctx: run_steps(ctx, STAGES),
        dry_run=dry_run,
        show_progress=False,
        hooks=jobs.HOOKS,
    )


def _graduated(db_path, live_only=True) -> list[dict]:
    condition = "AND valid_until IS NULL" if live_only else ""
    columns = ("id", "content", "source", "scope", "author_id", "veracity", "metadata_json")
    rows = query(
        db_path,
        f"SELECT {', '.join(columns)}, valid_until, superseded_by FROM working_memory "
        f"WHERE source = 'fact' AND scope = 'global' {condition} ORDER BY rowid",
    )
    found = []
    for row in rows:
        entry = dict(zip((*columns, "valid_until", "superseded_by"), row))
        entry["metadata"] = json.loads(entry.pop("metadata_json") or "{}")
        found.append(entry)
    return found


def _records(layout) -> list[dict]:
    ledger = state.open_state_readonly(layout.state_dir / "state.db")
    try:
        return list(store.rows(ledger, f"SELECT * FROM {store.GRADUATION} ORDER BY id"))
    finally:
        ledger.close()


@pytest.fixture
def plugin_home(tmp_path):
    """A home as the plugin writes one: user and assistant turns over several sessions."""
    return build(tmp_path / "home", PLUGIN_HOME)


def test_relative_dates_are_resolved_against_the_day_said():
    said = date(2026, 3, 5)  # a Thursday
    assert graduation.distilled("[USER] We got back yesterday.", said) == (
        "We got back yesterday (2026-03-04)."
    )
    assert "last Monday (2026-03-02)" in graduation.distilled("[USER] I met Ana last Monday", said)
    assert "two weeks ago (2026-02-19)" in graduation.distilled("[USER] two weeks ago", said)
    assert "next month (2026-04)" in graduation.distilled("[USER] Moving next month", said)


def test_faithfulness_catches_a_word_or_a_date_the_sources_do_not_hold():
    said = date(2026, 3, 5)
    sources = [("[USER] We adopted a greyhound named Biscuit yesterday.", said)]
    assert (
        graduation.unsupported("We adopted a greyhound named Biscuit on 2026-03-04.", sources)
        == set()
    )
    assert graduation.unsupported("We adopted a poodle named Biscuit.", sources) == {"poodle"}
    assert graduation.unsupported("We adopted Biscuit on 2026-03-01.", sources) == {"2026-03-01"}
    assert graduation.unsupported("We adopted a greyhound named Rex.", sources) == {"rex"}
    # Extractive kind words: the kind of what is named, never a word the statement has already.
    assert graduation.extractive_kinds("We adopted a greyhound named Biscuit") == ("dog",)
    assert graduation.extractive_kinds("Our dog is a greyhound") == ("pet",)
    # Kind words never carry a fact: a name, a number or a date is dropped from them.
    assert graduation.kind_words(
        ["dog", "pet", "Biscuit", "Biscuit the dog", "2 dogs", "monday", 7, "family pet", "x"]
    ) == ("dog", "pet", "family pet")


@pytest.mark.heavy
def test_the_owners_statements_graduate_with_lineage_once(plugin_home, tmp_path):
    layout, ids = plugin_home
    settings = settings_for(layout, tmp_path)
    bytes_before = layout.db_path.read_bytes()
    dry = _run(settings, dry_run=True)
    assert dry.error is None
    assert layout.db_path.read_bytes() == bytes_before  # a dry run changes no byte
    result = _run(settings)
    assert result.status == "ok", result.error
    stats = result.stats["sleep"]["graduation"]
    rows = _graduated(layout.db_path)
    assert result.changes["statements_graduated"] == len(rows) == stats["stored"] == 4
    assert dry.changes["statements_graduated"] == len(rows)  # the dry run counted the same
    by_source = {tuple(row["metadata"]["derived_from"]): row for row in rows}
    # Every statement of the owner, from every session; never chatter or the agent's turns.
    assert set(by_source) == {
        (ids["dog"], ids["dog-again"]),
        (ids["job"],),
        (ids["trip"],),
        (ids["stated"],),
    }
    dog = by_source[(ids["dog"], ids["dog-again"])]
    assert dog["metadata"]["graduation"]["confirmations"] == 1  # the restatement reinforced it
    assert stats["merged"] == 1
    said = dog["metadata"]["graduation"]["said_on"]
    yesterday = date.fromordinal(date.fromisoformat(said).toordinal() - 1).isoformat()
    assert f"yesterday ({yesterday})" in dog["content"] and f"said on {said}" in dog["content"]
    assert "greyhound named Biscuit" in dog["content"]  # the specifics kept
    for row in rows:
        assert (row["scope"], row["source"], row["veracity"]) == ("global", "fact", "inferred")
        assert row["author_id"] == settings.owner
        assert row["metadata"]["method"] == "extractive"
        sources = row["metadata"]["derived_from"]
        edges = query(
            layout.db_path,
            "SELECT target FROM graph_edges WHERE source = ? AND edge_type = ?",
            (row["id"], writer.DERIVES),
        )
        assert sorted(target for (target,) in edges) == sorted(sources)
        day = date.fromisoformat(row["metadata"]["graduation"]["said_on"])
        texts = [
            (
                query(layout.db_path, "SELECT content FROM working_memory WHERE id = ?", (i,))[0][
                    0
                ],
                day,
            )
            for i in sources
        ]
        statement = row["content"].split("; about: ")[0]  # kind words are checked apart
        assert graduation.unsupported(statement, texts) == set()  # faithful, checked again
    records = _records(layout)
    assert all(record["applied"] == store.APPLIED for record in records)
    # The next night reads only new rows: nothing more is written, nothing twice.
    again = _run(settings)
    assert again.changes["statements_graduated"] == 0
    assert len(_graduated(layout.db_path)) == 4


@pytest.mark.heavy
def test_a_restatement_on_a_later_night_reinforces_the_graduated_row(tmp_path):
    layout, ids = build(tmp_path / "home", _spec(_memory("dog", DOG, "hermes_a", 5)))
    settings = settings_for(layout, tmp_path)
    assert _run(settings).changes["statements_graduated"] == 1
    [before] = _graduated(layout.db_path)
    _, more = build(tmp_path / "home", _spec(_memory("again", DOG_AGAIN, "hermes_b", 1)))
    night = _run(settings)
    assert night.changes["statements_graduated"] == 0
    assert night.stats["sleep"]["graduation"]["reinforced"] == 1
    [after] = _graduated(layout.db_path)
    assert after["id"] == before["id"] and after["content"] == before["content"]
    assert after["metadata"]["derived_from"] == [ids["dog"], more["again"]]
    assert after["metadata"]["graduation"]["confirmations"] == 1
    edges = query(
        layout.db_path,
        "SELECT target FROM graph_edges WHERE source = ? AND edge_type = ?",
        (after["id"], writer.DERIVES),
    )
    assert sorted(target for (target,) in edges) == sorted([ids["dog"], more["again"]])


def test_a_killed_run_is_finished_and_never_stores_twice(plugin_home, tmp_path):
    layout, _ = plugin_home
    settings = settings_for(layout, tmp_path)
    assert _run(settings).changes["statements_graduated"] == 4
    # Killed after the child stored the rows and before state.db recorded it: the records are
    # still planned. The next run writes them first, finds each row by its key, stores none again.
    ledger = state.open_state(layout.state_dir / "state.db")
    with ledger.conn:
        ledger.conn.execute(
            f"UPDATE {store.GRADUATION} SET applied = ?, memory_id = NULL WHERE op = ?",
            (store.PLANNED, graduation.STORE),
        )
    ledger.close()
    again = _run(settings)
    assert again.status == "ok", again.error
    assert again.changes["statements_graduated"] == 0
    assert len(_graduated(layout.db_path)) == 4
    assert all(record["applied"] == store.APPLIED for record in _records(layout))


@pytest.mark.heavy
def test_graduation_is_bounded_per_night_and_per_owner(plugin_home, tmp_path):
    layout, _ = plugin_home
    nightly = settings_for(layout, tmp_path, "sleep:\n  graduate_per_night: 1\n")
    assert _run(nightly).changes["statements_graduated"] == 1
    assert _run(nightly).changes["statements_graduated"] == 1  # the rest wait for later nights
    capped = settings_for(layout, tmp_path, "sleep:\n  graduate_max_rows: 3\n")
    assert _run(capped).changes["statements_graduated"] == 1
    assert _run(capped).changes["statements_graduated"] == 0
    assert len(_graduated(layout.db_path)) == 3


OLD_HOME = "[USER] My brother Tomas lives in Oslo and works at the harbour office."
NEW_HOME = "[USER] My brother Tomas moved to Bergen last week, new flat near the fish market."


def _changed_home(tmp_path):
    """A home where Tomas lives in Oslo, graduated; then the user says he moved to Bergen."""
    layout, _ = build(
        tmp_path / "home",
        {
            **_spec(_memory("old", OLD_HOME, "hermes_a", 8)),
            "triples": [
                {"subject": "Tomas", "predicate": "lives_in", "object": "Oslo", "source_key": "old"}
            ],
        },
    )
    assert _run(settings_for(layout, tmp_path)).changes["statements_graduated"] == 1
    [first] = _graduated(layout.db_path)
    _, more = build(
        tmp_path / "home",
        {
            **_spec(_memory("new", NEW_HOME, "hermes_b", 1)),
            "triples": [
                {
                    "subject": "Tomas",
                    "predicate": "lives_in",
                    "object": "Bergen",
                    "source_key": "new",
                }
            ],
        },
    )
    return layout, first, more["new"]


@pytest.mark.heavy
def test_a_changed_fact_supersedes_the_graduated_row(tmp_path):
    layout, first, newer = _changed_home(tmp_path)
    night = _run(settings_for(layout, tmp_path))
    assert night.status == "ok", night.error
    assert night.stats["sleep"]["reinforcement"]["contradictions"]["closed"] == 1
    assert night.stats["sleep"]["graduation"]["superseded"] == 1
    live = _graduated(layout.db_path)
    assert [row["metadata"]["derived_from"] for row in live] == [[newer]]
    history = {row["id"]: row for row in _graduated(layout.db_path, live_only=False)}
    assert history[first["id"]]["valid_until"]  # closed, kept: the history
    assert history[first["id"]]["superseded_by"] == live[0]["id"]
    assert "Bergen" in live[0]["content"] and "Oslo" not in live[0]["content"]


@pytest.mark.heavy
def test_a_changed_fact_supersedes_even_before_the_new_one_graduates(tmp_path):
    """No room tonight for the newer statement: the old row is still closed, pointing to the newer
    statement itself (a supersession the recall guard does not count as a lost fact)."""
    layout, first, newer = _changed_home(tmp_path)
    full = settings_for(layout, tmp_path, "sleep:\n  graduate_max_rows: 1\n")
    night = _run(full)
    assert night.status == "ok", night.error
    assert night.changes["statements_graduated"] == 0
    assert _graduated(layout.db_path) == []
    [old] = _graduated(layout.db_path, live_only=False)
    assert old["valid_until"] and old["superseded_by"] == newer
    # The next night has room again: the newer statement graduates.
    assert _run(full).changes["statements_graduated"] == 1


@pytest.mark.heavy
def test_a_home_several_people_talk_to_graduates_nothing(tmp_path):
    layout, _ = build(
        tmp_path / "home",
        _spec(
            _memory("dog", DOG, "hermes_a", 3),
            _memory("job", JOB, "hermes_a", 2, author="someone-else"),
        ),
    )
    settings = settings_for(layout, tmp_path)
    result = _run(settings)
    assert result.changes["statements_graduated"] == 0
    assert result.stats["sleep"]["graduation"]["why"] == "another-author"
    assert _graduated(layout.db_path) == []
    # Allowed by the config: only the rows stamped with the owner as author.
    layout2, ids2 = build(
        tmp_path / "home2",
        _spec(
            _memory("dog", DOG, "hermes_a", 3, author="dana"),
            _memory("job", JOB, "hermes_a", 2, author="someone-else"),
            _memory("trip", TRIP, "hermes_a", 2),
        ),
    )
    shared = settings_for(layout2, tmp_path, "owner: dana\nsleep:\n  graduate_shared_home: true\n")
    assert _run(shared).changes["statements_graduated"] == 1
    [row] = _graduated(layout2.db_path)
    assert row["metadata"]["derived_from"] == [ids2["dog"]] and row["author_id"] == "dana"


def test_a_group_chat_graduates_nothing(tmp_path):
    layout, _ = build(
        tmp_path / "home",
        _spec(
            _memory("dog", DOG, "hermes_20261101_cli", 3),
            _memory("job", JOB, "hermes_agent:main:telegram:group:-1001234", 2),
        ),
    )
    result = _run(settings_for(layout, tmp_path))
    assert result.changes["statements_graduated"] == 0
    assert result.stats["sleep"]["graduation"]["why"] == "group-chat"


@pytest.mark.heavy
def test_one_profiles_facts_never_reach_anothers(tmp_path):
    """Two Hermes profiles, each with its own home (or bank): a night on one writes only there."""
    work, _ = build(tmp_path / "work", _spec(_memory("job", JOB, "hermes_a", 2)))
    personal, _ = build(tmp_path / "personal", _spec(_memory("dog", DOG, "hermes_b", 2)))
    personal_bytes = personal.db_path.read_bytes()
    assert _run(settings_for(work, tmp_path)).changes["statements_graduated"] == 1
    assert personal.db_path.read_bytes() == personal_bytes
    assert _run(settings_for(personal, tmp_path)).changes["statements_graduated"] == 1
    assert ["Halden" in row["content"] for row in _graduated(work.db_path)] == [True]
    assert ["Biscuit" in row["content"] for row in _graduated(personal.db_path)] == [True]


def test_graduated_rows_are_listed_and_closed_by_restore(plugin_home, tmp_path):
    layout, _ = plugin_home
    settings = settings_for(layout, tmp_path)
    assert _run(settings).changes["statements_graduated"] == 4
    listed = json.loads(run_cli(layout, "--json", "graduated", "list").stdout)["graduated"]
    assert len(listed) == 4 and {entry["status"] for entry in listed} == {"live"}
    first = listed[0]["memory_id"]
    bytes_before = layout.db_path.read_bytes()
    dry = json.loads(run_cli(layout, "--json", "graduated", "restore", "--all", "-n").stdout)
    assert dry["restored"] == 4 and layout.db_path.read_bytes() == bytes_before
    done = run_cli(layout, "--json", "graduated", "restore", first)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == 1
    assert {row["id"] for row in _graduated(layout.db_path)} == {
        entry["memory_id"] for entry in listed[1:]
    }
    # Closed, not deleted; and never written again: its sources stay judged.
    assert len(_graduated(layout.db_path, live_only=False)) == 4
    assert _run(settings).changes["statements_graduated"] == 0
    unknown = run_cli(layout, "graduated", "restore", "0123456789abcdef")
    assert unknown.returncode == 2 and "no graduated row" in unknown.stderr


@pytest.mark.heavy
def test_a_graduated_rows_source_is_never_archived(plugin_home, tmp_path):
    """Forgetting may archive a row whose facts survive in a current row, and a graduated row
    holds its source's facts: the lineage keeps the source (the evidence) from being archived.
    The importance stage is off here, so nothing else keeps the sources above the archive band."""
    layout, ids = plugin_home
    config = "sleep:\n  importance: false\n  max_archived_per_night: 100000\n"
    settings = settings_for(layout, tmp_path, config)
    assert _run(settings).changes["statements_graduated"] == 4
    sources = {i for row in _graduated(layout.db_path) for i in row["metadata"]["derived_from"]}
    for days in (1, 400):  # first seen, then a year later: every old turn is a candidate
        with freeze_time(datetime.now() + timedelta(days=days), tick=True):
            result = run_sleep(settings)
    assert result.status == "ok", result.error
    archived = {
        row[0]
        for row in query(
            layout.db_path, "SELECT id FROM working_memory WHERE valid_until IS NOT NULL"
        )
    }
    assert ids["chatter"] in archived or ids["assistant"] in archived  # forgetting did run
    assert not sources & archived


@pytest.mark.heavy
def test_a_failing_model_leaves_the_rows_for_the_next_night(
    plugin_home, tmp_path, monkeypatch, registered_test_models
):
    layout, _ = plugin_home
    failing = settings_for(layout, tmp_path, "models:\n  model: mnemo-test-fail\n  remote: false\n")
    night = _run(failing)
    assert night.status == "ok", night.error
    assert night.changes["statements_graduated"] == 0
    assert night.stats["sleep"]["graduation"]["deferred"] == 5
    # Without the model the next night graduates them (extractive): nothing was lost.
    assert _run(settings_for(layout, tmp_path)).changes["statements_graduated"] == 4


def _model_answers(tmp_path, monkeypatch, ids) -> None:
    answers = {
        "standalone statements of fact": {
            "statements": [
                {
                    "refs": [f"m:{ids['dog']}", f"m:{ids['dog-again']}"],
                    "text": "We adopted a greyhound named Biscuit, he is three years old.",
                    "kinds": ["dog", "pet", "Biscuit"],
                },
                {
                    "refs": [f"m:{ids['job']}"],
                    "text": "I started a new job at Halden Bridges in Trondheim.",
                    "kinds": ["job"],
                },
            ]
        }
    }
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers))
    monkeypatch.setenv("MNEMO_TEST_MODEL_ANSWERS", str(path))


@pytest.mark.heavy
def test_with_a_local_model_statements_carry_kinds_and_an_unfaithful_one_is_not_written(
    plugin_home, tmp_path, monkeypatch, registered_test_models
):
    layout, ids = plugin_home
    _model_answers(tmp_path, monkeypatch, ids)
    settings = settings_for(layout, tmp_path, "models:\n  model: mnemo-test\n  remote: false\n")
    dry = _run(settings, dry_run=True)
    assert calls(registered_test_models) == []  # a dry run never calls
    assert dry.stats["sleep"]["graduation"]["would_send_to_model"] == 5
    night = _run(settings)
    assert night.status == "ok", night.error
    stats = night.stats["sleep"]["graduation"]
    assert stats["unfaithful"] == 1 and "trondheim" in stats["unfaithful_words"]
    rows = {tuple(row["metadata"]["derived_from"]): row for row in _graduated(layout.db_path)}
    dog = rows[(ids["dog"], ids["dog-again"])]
    assert dog["metadata"]["method"] == "mnemo-test"
    assert dog["content"].startswith("We adopted a greyhound named Biscuit")
    assert "about: dog, pet" in dog["content"] and "Biscuit)" not in dog["content"]
    # The unfaithful statement was not written: its row graduated in the user's own words.
    job = rows[(ids["job"],)]
    assert "Trondheim" not in job["content"] and job["metadata"]["method"] == "extractive"
    assert "Halden Bridges" in job["content"]
    # Rows the model did not cite are judged: not a lasting fact.
    assert stats["passed"] >= 2
    assert night.stats["model"]["tasks"]["graduation"] == {"answered": 1}


def test_a_remote_model_never_sees_the_users_session_rows(
    plugin_home, tmp_path, monkeypatch, registered_test_models
):
    layout, ids = plugin_home
    _model_answers(tmp_path, monkeypatch, ids)
    settings = settings_for(layout, tmp_path, "models:\n  model: mnemo-test\n")
    night = _run(settings)
    assert night.status == "ok", night.error
    sent = "\n".join(call["prompt"] for call in calls(registered_test_models))
    assert "Biscuit" not in sent and "Halden" not in sent
    rows = _graduated(layout.db_path)
    assert len(rows) == 4 and {row["metadata"]["method"] for row in rows} == {"extractive"}


def _plugin_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("mnemosyne_hermes") is not None


@pytest.mark.skipif(not _plugin_installed(), reason="the Hermes plugin (the 4.0 venv) is needed")
def test_a_fact_said_in_one_session_reaches_a_new_one_after_the_night(tmp_path):
    """Through the real plugin: said in session A, asked in a brand-new session B, the fact is
    injected by the plugin's own prefetch after the night, and not before."""
    from mnemo_ops.evaluation.engines.base import Query
    from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
    from mnemo_ops.mnemosyne.sample_home import SampleLayout
    from tests.jobs.evening_batch.sleep import plugin_turns

    layout = SampleLayout(tmp_path / "home")
    said = "We adopted a greyhound named Biscuit yesterday, he is three years old."
    [dog, *_] = plugin_turns.write(
        layout,
        [
            {
                "session": "20261201_cli_a",
                "user": said,
                "assistant": "Congratulations!",
                "days_ago": 3,
            },
            {
                "session": "20261201_cli_a",
                "user": "haha ok thanks",
                "assistant": "Any time.",
                "days_ago": 3,
            },
            {
                "session": "20261202_cli_x",
                "user": "Can you help me plan the week?",
                "assistant": "Sure.",
                "days_ago": 2,
            },
        ],
    )
    question = "How old is Biscuit the greyhound?"
    # "dog" the user never said: only the row's kind word bridges it (the plugin injects a row
    # sharing at least two of the question's topical words: "old" and "dog").
    other_words = "How old is our dog?"

    def injected(text: str = question) -> list[str]:
        engine = MnemosyneEngine(layout.db_path, profile="hermes", hermes_home=layout.hermes_home)
        # session "": a brand-new conversation (a session key nothing was written in).
        [found] = engine.recall_many([Query(text=text, k=5, session="")])
        assert engine.profile_used == "hermes"
        return [item.content or "" for item in found]

    assert not any("Biscuit" in line for line in injected())  # before the night: nothing
    assert not any("Biscuit" in line for line in injected(other_words))
    night = _run(settings_for(layout, tmp_path))
    assert night.status == "ok", night.error
    assert night.changes["statements_graduated"] == 1
    lines = injected()
    assert any("greyhound named Biscuit" in line for line in lines), lines
    bridged = injected(other_words)
    assert any("greyhound named Biscuit" in line for line in bridged), bridged
    [row] = _graduated(layout.db_path)
    assert row["metadata"]["derived_from"] == [dog]
