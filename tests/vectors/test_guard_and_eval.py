"""The recall guard and the eval on a vector home: they recall with the home's embedding
configuration (the trial's recall has its vector voice), and when the model cannot be reached they
say so and refuse rather than measure a keyword-only recall."""

from __future__ import annotations

import json

import pytest

from mnemo_ops.foundation.resources import resource_dir
from tests.purity import sample_snapshot
from tests.vectors.inspection import read_state

SAMPLE_SUITE = resource_dir("fixtures") / "eval" / "sample.jsonl"


@pytest.fixture
def failing_model(embedding_server):
    """The embedding endpoint answers 401 for the test (a model that cannot be reached)."""
    embedding_server.failing = True
    yield embedding_server
    embedding_server.failing = False


def _json(completed) -> dict:
    assert completed.stdout.strip(), completed.stderr
    return json.loads(completed.stdout)


@pytest.mark.e2e
def test_the_guard_measures_with_the_vector_voice(vector_home, vector_cli, embedding_server):
    embedded_before = embedding_server.texts_embedded

    result = _json(vector_cli("--json", "run", "memory-block-migrate", "--force"))
    batch = _json(vector_cli("--json", "run", "evening-batch", "--force"))

    assert result["status"] == "ok", result
    assert batch["status"] == "ok", batch
    guard = batch["stats"]["guard"]
    assert guard["verdict"] == "ok"
    for side in ("before", "after"):
        vectors = guard["vectors"][side]
        assert vectors["home_keeps_vectors"] and vectors["sqlite_vec"]
        assert vectors["embedded"] == vectors["queries"] > 0
    assert embedding_server.texts_embedded > embedded_before  # the trial really asked the model


@pytest.mark.e2e
def test_the_guard_refuses_when_the_model_cannot_be_reached(vector_home, vector_cli, failing_model):
    before = read_state(vector_home.db_path)

    completed = vector_cli("--json", "run", "evening-batch", "--force")

    assert completed.returncode == 1, completed.stdout + completed.stderr
    result = _json(completed)
    assert result["status"] == "failed"
    assert result["stats"]["guard"]["verdict"] == "refused"
    warning = next(w for w in result["warnings"] if w["code"] == "recall-guard-no-vectors")
    assert "recalls with vectors" in warning["message"]
    # 3.15's model call returns nothing on the 401; 4.0's raises: both are named.
    assert "gave no vector" in warning["message"] or "could not be loaded" in warning["message"]
    assert "the live database was not changed" in result["error"]
    after = read_state(vector_home.db_path)
    assert after.episodes == before.episodes == set()  # nothing consolidated on the live file


@pytest.mark.e2e
def test_the_guard_measures_without_vectors_when_they_are_switched_off(vector_home, vector_cli):
    """The off switch is the user's word that the agent runs without vectors: measured so."""
    result = _json(
        vector_cli(
            "--json", "run", "evening-batch", "--force", env={"MNEMOSYNE_NO_EMBEDDINGS": "1"}
        )
    )

    assert result["status"] == "ok", result
    assert result["stats"]["guard"]["verdict"] == "ok"
    vectors = result["stats"]["guard"]["vectors"]["before"]
    assert vectors["switched_off"] and vectors["embedded"] == 0


@pytest.mark.heavy
def test_the_eval_recalls_with_vectors_and_refuses_without_them(
    vector_home, vector_cli, embedding_server, tmp_path
):
    baseline = tmp_path / "baseline.json"
    arguments = ("--json", "eval", "baseline", "--suite", str(SAMPLE_SUITE), "--out", str(baseline))
    made = vector_cli(*arguments)
    assert made.returncode == 0, made.stdout + made.stderr
    assert baseline.exists()

    embedding_server.failing = True
    try:
        before = sample_snapshot(vector_home)["db"]
        refused = vector_cli(
            "--json", "eval", "run", "--suite", str(SAMPLE_SUITE), "--baseline", str(baseline)
        )
    finally:
        embedding_server.failing = False
    assert refused.returncode != 0
    assert "refusing to measure recall without them" in refused.stdout + refused.stderr
    assert sample_snapshot(vector_home)["db"] == before
