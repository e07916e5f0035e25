"""Loading the test llm plugin (``tests/models/llm_test_plugin.py``) the ways llm loads plugins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
DISTRIBUTION = "mnemo-ops-test-model"


def write_test_distribution(folder: Path) -> Path:
    """A minimal installed distribution whose ``llm`` entry point is the test plugin (no pip needed:
    a ``.dist-info`` folder on ``sys.path`` is what importlib.metadata, and so llm, looks for)."""
    info = folder / "mnemo_ops_test_model-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[llm]\nmnemo_test = tests.models.llm_test_plugin\n", encoding="utf-8"
    )
    return folder


def model_plugin_environment(folder: Path) -> dict[str, str]:
    """Environment for a subprocess whose llm loads only the test plugin (``LLM_LOAD_PLUGINS`` names
    its distribution), with llm's user folder and the call log inside `folder`."""
    site = write_test_distribution(folder / "site")
    python_path = os.pathsep.join(
        part for part in (str(site), str(REPOSITORY), os.environ.get("PYTHONPATH", "")) if part
    )
    return {
        "PYTHONPATH": python_path,
        "LLM_LOAD_PLUGINS": DISTRIBUTION,
        "LLM_USER_PATH": str(folder / "llm-user"),
        "MNEMO_TEST_MODEL_LOG": str(folder / "model-calls.jsonl"),
    }


@pytest.fixture
def registered_test_models(tmp_path, monkeypatch):
    """The test models registered with llm's plugin manager in this process; yields the call log."""
    llm = pytest.importorskip("llm")
    from mnemo_ops.models.layer import forget_process_answers
    from tests.models import llm_test_plugin

    log = tmp_path / "model-calls.jsonl"
    monkeypatch.setenv("MNEMO_TEST_MODEL_LOG", str(log))
    monkeypatch.setenv("LLM_USER_PATH", str(tmp_path / "llm-user"))
    llm.plugins.pm.register(llm_test_plugin, name="mnemo-test-plugin")
    forget_process_answers()
    try:
        yield log
    finally:
        llm.plugins.pm.unregister(name="mnemo-test-plugin")


def calls(log: Path) -> list[dict]:
    """The calls the test models received (in order)."""
    import json

    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
