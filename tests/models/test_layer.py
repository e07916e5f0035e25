"""The model layer through the real llm call path, with the deterministic test models."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

import pytest

from mnemo_ops.core import state
from mnemo_ops.models import EXTRACTIVE, Evidence, MalformedAnswer, ModelLayer, Request
from mnemo_ops.models.evidence import is_private_row
from mnemo_ops.settings import load_settings
from tests.models.plugin import calls, model_plugin_environment, registered_test_models

__all__ = ["registered_test_models"]  # the fixture, used by name below

SECRET = "sk-proj-abcdefghijklmnopqrstuvwx"


def settings_for(tmp_path, **models):
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"models": models}), encoding="utf-8")
    hermes = tmp_path / "hermes"
    hermes.mkdir(exist_ok=True)
    (hermes / ".env").write_text("MY_SERVICE_TOKEN=stored-token-value-42\n", encoding="utf-8")
    return load_settings(
        db=tmp_path / "mnemosyne.db",
        state_dir=tmp_path / "state",
        config=config,
        environ={"HERMES_HOME": str(hermes), "HOME": str(tmp_path)},
    )


def refs_request(evidence, validate=None):
    def accept(parsed, sent):
        if not isinstance(parsed, dict) or "refs" not in parsed:
            raise MalformedAnswer("no refs")
        return parsed["refs"]

    return Request(
        task="echo",
        system="You list references.",
        instructions='Answer {"refs": [...]}.',
        evidence=evidence,
        validate=validate or accept,
    )


def open_layer(settings, dry_run=False):
    state_db = state.open_state(settings.state_db_path)
    return ModelLayer.open(settings, state_db, job="test", dry_run=dry_run), state_db


EVIDENCE = [
    Evidence("m:shared", "a shared memory", private=False),
    Evidence("m:session", "a session-scoped memory, private to its session", private=True),
    Evidence("m:secret", f"the key is {SECRET} and stored-token-value-42", private=False),
]


def test_without_a_model_nothing_is_asked(tmp_path):
    layer, _ = open_layer(settings_for(tmp_path))
    answer = layer.ask(refs_request(EVIDENCE))
    assert (answer.ok, answer.reason, layer.method) == (False, "no-model", EXTRACTIVE)


def test_the_model_answers_private_rows_withheld_and_secrets_redacted(
    tmp_path, registered_test_models
):
    layer, _ = open_layer(settings_for(tmp_path, model="mnemo-test"))
    answer = layer.ask(refs_request(EVIDENCE))
    assert answer.ok and answer.method == "mnemo-test" and layer.method == "mnemo-test"
    assert answer.value == ["m:shared", "m:secret"]
    assert answer.withheld == ("m:session",)
    [call] = calls(registered_test_models)
    assert "session-scoped" not in call["prompt"]
    assert SECRET not in call["prompt"] and "stored-token-value-42" not in call["prompt"]
    assert "[REDACTED:openai-key]" in call["prompt"]
    stats = layer.stats()
    assert stats["withheld_private"] == 1 and stats["redactions"] == 2 and stats["calls"] == 1


def test_a_local_model_or_an_explicit_allowance_gets_private_rows(tmp_path, registered_test_models):
    for models in ({"remote": False}, {"send_private_to_remote": True}):
        layer, _ = open_layer(
            settings_for(tmp_path / str(len(models)), model="mnemo-test", **models)
        )
        assert "m:session" in layer.ask(refs_request(EVIDENCE)).value


def test_nothing_to_send_makes_no_call(tmp_path, registered_test_models):
    layer, _ = open_layer(settings_for(tmp_path, model="mnemo-test"))
    answer = layer.ask(refs_request([Evidence("m:p", "private", private=True)]))
    assert answer.reason == "nothing-to-send" and calls(registered_test_models) == []


def test_a_malformed_answer_is_retried_once_then_skipped(tmp_path, registered_test_models):
    layer, _ = open_layer(settings_for(tmp_path, model="mnemo-test-malformed"))
    answer = layer.ask(refs_request(EVIDENCE))
    assert (answer.ok, answer.reason) == (False, "malformed")
    assert len(calls(registered_test_models)) == 2
    assert "could not be used" in calls(registered_test_models)[1]["prompt"]
    assert layer.stats()["malformed"] == 1 and layer.stats()["retries"] == 1
    # The run goes on: the next request is asked as usual.
    assert layer.ask(refs_request(EVIDENCE[:1])).reason == "malformed"


def test_a_reply_the_task_rejects_counts_as_malformed(tmp_path, registered_test_models):
    def reject(parsed, sent):
        raise MalformedAnswer("cites nothing that was sent")

    layer, _ = open_layer(settings_for(tmp_path, model="mnemo-test"))
    assert layer.ask(refs_request(EVIDENCE, validate=reject)).reason == "malformed"


def test_outcomes_are_counted_per_task(tmp_path, registered_test_models):
    """One run asking for summaries and judgements (the sleep stages) reports each task's outcomes."""

    def reject(parsed, sent):
        raise MalformedAnswer("no scores")

    layer, _ = open_layer(settings_for(tmp_path, model="mnemo-test"))
    summary = dataclasses.replace(refs_request(EVIDENCE), task="summary")
    pair = dataclasses.replace(refs_request(EVIDENCE[:1] + EVIDENCE[2:]), task="judgement")
    assert layer.ask(summary).ok and layer.ask(pair).ok
    assert layer.ask(dataclasses.replace(pair, validate=reject)).reason == "malformed"
    assert layer.stats()["tasks"] == {
        "judgement": {"answered": 1, "malformed": 1},
        "summary": {"answered": 1},
    }


def test_the_retry_can_succeed(tmp_path, registered_test_models):
    layer, _ = open_layer(settings_for(tmp_path, model="mnemo-test-flaky"))
    answer = layer.ask(refs_request(EVIDENCE))
    assert answer.ok and layer.stats()["retries"] == 1 and layer.stats()["malformed"] == 0


def test_a_failing_model_is_skipped_and_counted(tmp_path, registered_test_models):
    layer, _ = open_layer(settings_for(tmp_path, model="mnemo-test-fail"))
    answer = layer.ask(refs_request(EVIDENCE))
    assert (answer.reason, answer.detail) == (
        "failed",
        "RuntimeError: the test model's backend is down",
    )
    assert layer.stats()["failed"] == 1


def test_a_slow_model_is_abandoned_after_the_timeout(tmp_path, registered_test_models, monkeypatch):
    monkeypatch.setenv("MNEMO_TEST_MODEL_SLEEP", "20")
    layer, _ = open_layer(settings_for(tmp_path, model="mnemo-test-slow", timeout_seconds=1))
    started = time.monotonic()
    answer = layer.ask(refs_request(EVIDENCE))
    assert answer.reason == "failed" and "within 1 s" in answer.detail
    assert time.monotonic() - started < 10


def test_the_budget_holds_across_runs_of_one_night(tmp_path, registered_test_models):
    settings = settings_for(tmp_path, model="mnemo-test", calls_per_night=2)
    layer, state_db = open_layer(settings)
    assert layer.ask(refs_request(EVIDENCE[:1])).ok
    assert layer.ask(refs_request(EVIDENCE[1:])).ok
    assert layer.ask(refs_request([Evidence("m:x", "third", private=False)])).reason == "budget"
    # A later run the same night (another job, or a re-run) finds the budget spent too.
    again, _ = open_layer(settings)
    assert again.ask(refs_request([Evidence("m:y", "fourth", private=False)])).reason == "budget"
    assert again.stats()["budget"]["calls_used_tonight"] == 2
    assert len(calls(registered_test_models)) == 2


def test_the_time_budget_caps_calls(tmp_path, registered_test_models):
    settings = settings_for(tmp_path, model="mnemo-test", seconds_per_night=0)
    layer, _ = open_layer(settings)
    assert layer.ask(refs_request(EVIDENCE)).reason == "budget"


def test_an_answer_is_asked_for_once(tmp_path, registered_test_models):
    """The guard's trial (its own state.db copy) and the live run share one call; a rerun after a
    kill finds the kept answer in state.db."""
    trial = settings_for(tmp_path / "trial", model="mnemo-test")
    live = settings_for(tmp_path / "live", model="mnemo-test")
    for settings in (trial, live, live):
        layer, state_db = open_layer(settings)
        assert layer.ask(refs_request(EVIDENCE[:1])).value == ["m:shared"]
    assert len(calls(registered_test_models)) == 1
    live_state = state.open_state(live.state_db_path)
    assert live_state.execute("SELECT SUM(calls) FROM model_usage").fetchone()[0] == 1
    assert live_state.execute("SELECT count(*) FROM model_answers").fetchone()[0] == 1


def test_an_unknown_model_or_bad_options_fall_back_with_a_warning(tmp_path, registered_test_models):
    for number, (models, expected) in enumerate(
        (
            ({"model": "no-such-model"}, "llm knows no model 'no-such-model'"),
            ({"model": "mnemo-test", "options": {"nonsense": 1}}, "models.options do not suit"),
        )
    ):
        warnings: list[tuple[str, str]] = []
        settings = settings_for(tmp_path / str(number), **models)
        state_db = state.open_state(settings.state_db_path)

        def note(code, message, found=warnings):
            found.append((code, message))

        layer = ModelLayer.open(settings, state_db, "test", False, warn=note)
        assert layer.ask(refs_request(EVIDENCE)).reason == "model-unavailable"
        assert layer.ask(refs_request(EVIDENCE)).reason == "model-unavailable"
        assert len(warnings) == 1 and expected in warnings[0][1]
        assert layer.method == EXTRACTIVE


def test_a_dry_run_never_calls(tmp_path, registered_test_models):
    settings = settings_for(tmp_path, model="mnemo-test")
    layer = ModelLayer.open(settings, None, "test", dry_run=True)
    answer = layer.ask(refs_request(EVIDENCE))
    assert answer.reason == "dry-run" and answer.sent == ("m:shared", "m:secret")
    assert calls(registered_test_models) == []


@pytest.mark.parametrize(
    ("scope", "metadata", "private"),
    [
        ("global", None, False),
        ("global", '{"source": "x"}', False),
        ("session", None, True),
        ("private", None, True),
        (None, None, False),
        ("global", '{"private": true}', True),
        ("global", {"sensitive": True}, True),
        ("global", '{"visibility": "Private"}', True),
        ("global", "not json", False),
    ],
)
def test_what_is_private(scope, metadata, private):
    assert is_private_row(scope, metadata) is private


def test_a_subprocess_loads_the_test_plugin_through_its_entry_point(tmp_path):
    """The CLI runs in a subprocess: there llm finds the plugin as an installed distribution."""
    pytest.importorskip("llm")
    environment = model_plugin_environment(tmp_path)
    import os

    completed = subprocess.run(
        [sys.executable, "-c", "import llm; print(llm.get_model('mnemo-test').model_id)"],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.stdout.strip() == "mnemo-test", completed.stderr
