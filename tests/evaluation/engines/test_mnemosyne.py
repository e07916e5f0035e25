"""Engines: deterministic tie handling, the worker's error path, and the options check."""

import os

import pytest

from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine, run_worker
from mnemo_ops.foundation.errors import MnemoOpsError, UsageError
from mnemo_ops.mnemosyne.plugin_prefetch import break_ties


def test_only_adjacent_equal_scores_are_reordered_by_id():
    found = [
        {"id": "b", "score": 0.9},
        {"id": "a", "score": 0.9},
        {"id": "c", "score": 0.5},
        {"id": "z", "score": 0.7},
        {"id": "y", "score": 0.7},
    ]
    # The 0.7 pair comes after 0.5 (appended by Mnemosyne): it stays there, only ordered within itself.
    assert [item["id"] for item in break_ties(found)] == ["a", "b", "c", "y", "z"]
    assert break_ties([]) == []


def test_worker_failure_is_one_line(tmp_path):
    environment = dict(
        os.environ, MNEMOSYNE_DATA_DIR=str(tmp_path), HERMES_HOME=str(tmp_path / "hermes")
    )
    with pytest.raises(
        MnemoOpsError, match="Mnemosyne worker: .*mnemosyne.worker failed: KeyError"
    ):
        run_worker({"mode": "nope"}, environment)


def test_engine_rejects_unknown_options(tmp_path):
    with pytest.raises(UsageError, match="unknown option 'colour'"):
        MnemosyneEngine(tmp_path / "m.db", recall_options={"colour": 1})
    with pytest.raises(UsageError, match="not a MNEMOSYNE_"):
        MnemosyneEngine(tmp_path / "m.db", environment={"PATH": "/tmp"})
    with pytest.raises(UsageError, match="set by the eval itself"):
        MnemosyneEngine(tmp_path / "m.db", environment={"MNEMOSYNE_DATA_DIR": "/tmp"})
    engine = MnemosyneEngine(tmp_path / "m.db", enhanced_recall=False, cross_session=False)
    assert engine.effective_environment() == {
        "MNEMOSYNE_CROSS_SESSION": "0",
        "MNEMOSYNE_ENHANCED_RECALL": "0",
    }
