"""Fixtures of the vector tests: the embedding server, a vector home built through the real
Mnemosyne with sqlite-vec loaded, and the CLI run in that home's environment.

Every test here is marked ``vectors``. They skip, with the reason, only where this Python lacks what
the path needs (numpy, sqlite-vec, an extension-loading sqlite3); in CI (``CI`` set) that is a
failure instead, so the suite never passes without having run them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mnemo_ops.mnemosyne.sample_home import SampleLayout, build_sample, copy_home
from tests.vectors.embedding_server import EmbeddingServer
from tests.vectors.environment import (
    embeddings_switched_on,
    vector_environment,
    vector_support,
    vector_variables,
)


def pytest_collection_modifyitems(config, items):
    """Mark every test of this folder ``vectors``; skip them (or fail, in CI) without support."""
    reason = vector_support()
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.vectors)
            if reason and not os.environ.get("CI"):
                item.add_marker(pytest.mark.skip(reason=f"no vector path here: {reason}"))


@pytest.fixture(scope="session")
def embedding_server():
    """The deterministic embedding server, one per test session (per xdist worker)."""
    reason = vector_support()
    if reason:  # reached only in CI, where a missing vector path fails
        pytest.fail(f"the vector tests cannot run here: {reason}")
    with EmbeddingServer() as server:
        yield server


@pytest.fixture(scope="session")
def vector_template(embedding_server, tmp_path_factory) -> SampleLayout:
    """The sample home written by the real Mnemosyne with embeddings on and sqlite-vec loaded."""
    with embeddings_switched_on():
        return build_sample(
            tmp_path_factory.mktemp("vector-template"),
            environment=vector_variables(embedding_server),
        )


@pytest.fixture
def vector_home(vector_template, tmp_path) -> SampleLayout:
    """A private copy of the vector home for one test."""
    return copy_home(vector_template, tmp_path / "vector-home")


@pytest.fixture
def vector_env(embedding_server, monkeypatch):
    """This test process's environment made a vector home's (for engines that inherit it)."""
    for name in (
        "MNEMOSYNE_NO_EMBEDDINGS",
        "MNEMOSYNE_SKIP_EMBEDDINGS",
        "MNEMOSYNE_EMBEDDINGS_OFF",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in vector_variables(embedding_server).items():
        monkeypatch.setenv(name, value)
    return embedding_server


@pytest.fixture
def vector_cli(vector_home, embedding_server):
    """Call the CLI on the vector home, in the environment the agent's vector path runs in."""

    def call(*args: str, env: dict[str, str] | None = None, timeout: float = 300):
        environment = vector_environment(vector_home.environ(), embedding_server)
        environment.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "mnemo_ops", *args],
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return call


@pytest.fixture(scope="session")
def vector_experiment_template(embedding_server, tmp_path_factory):
    """The forgetting experiment's home (``tests/jobs/evening_batch/sleep``) written with embeddings on."""
    from tests.jobs.evening_batch.sleep import homes
    from tests.jobs.evening_batch.sleep.conftest import experiment_spec

    layout = SampleLayout(tmp_path_factory.mktemp("vector-experiment") / "home")
    for folder in (layout.data_dir, layout.memory_blocks_dir, layout.state_dir):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    (layout.directory / "home").mkdir(mode=0o700)
    for block in ("MEMORY.md", "USER.md"):
        (layout.memory_blocks_dir / block).write_text("", encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, homes.__file__, str(layout.db_path)],
        input=json.dumps(experiment_spec()),
        capture_output=True,
        text=True,
        env=vector_environment(layout.environ(), embedding_server),
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return layout, json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture
def vector_experiment(vector_experiment_template, tmp_path):
    """A private copy of the vector experiment home and its ids by key."""
    layout, ids = vector_experiment_template
    return copy_home(layout, tmp_path / "experiment"), ids
