"""Shared fixtures: an isolated environment, the sample home (built once by the real Mnemosyne API,
copied per test), settings for it, and the CLI run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mnemo_ops.samples.sample_database import SampleLayout, build_sample, copy_home
from mnemo_ops.settings import Settings, load_settings
from tests.other_mnemosyne import OtherMnemosyne
from tests.other_mnemosyne import other_mnemosyne as find_other_mnemosyne


@pytest.fixture(scope="session", autouse=True)
def isolated_environment(tmp_path_factory):
    """Point HOME, HERMES_HOME and MNEMOSYNE_DATA_DIR at a temp dir for the whole session.

    Importing Mnemosyne initialises a DB at its default path, so nothing a test does may reach the
    real home directory.
    """
    root = tmp_path_factory.mktemp("isolated-home")
    saved = dict(os.environ)
    os.environ.update(
        {
            "HOME": str(root / "home"),
            "HERMES_HOME": str(root / "hermes"),
            "MNEMOSYNE_DATA_DIR": str(root / "default-data"),
        }
    )
    for name in (
        "MNEMO_OPS_DB",
        "MNEMO_OPS_STATE_DIR",
        "MNEMO_OPS_CONFIG",
        "XDG_CONFIG_HOME",
        "MNEMOSYNE_ENHANCED_RECALL",
        "MNEMOSYNE_DEFAULT_OWNER",
    ):
        os.environ.pop(name, None)
    (root / "home").mkdir()
    yield root
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def sample_template(tmp_path_factory) -> SampleLayout:
    """The sample home, built once per session through the real mnemosyne-memory API."""
    return build_sample(tmp_path_factory.mktemp("sample-template"))


@pytest.fixture(scope="session")
def other_mnemosyne() -> OtherMnemosyne:
    """The other Mnemosyne line (4.0 beside 3.15 and back): a cached venv without mnemo-ops."""
    return find_other_mnemosyne()


@pytest.fixture(scope="session")
def other_sample_template(other_mnemosyne, tmp_path_factory) -> SampleLayout:
    """The sample home with its database written by the other Mnemosyne line."""
    return build_sample(
        tmp_path_factory.mktemp("other-sample-template"),
        python=other_mnemosyne.python,
        environment=other_mnemosyne.environ({}),
    )


copy_sample = copy_home
"""A private copy of a built home for one test (``samples.sample_database.copy_home``)."""


REALISTIC_ROWS = 50_000
"""Rows of realistic generated text in the large shared fixture (issue 20: many batches per job)."""


@pytest.fixture(scope="session")
def realistic_template(sample_template, tmp_path_factory) -> SampleLayout:
    """The sample home grown by REALISTIC_ROWS rows of realistic text, built once per session."""
    from mnemo_ops.samples.realistic_memories import add_realistic_memories

    layout = copy_sample(sample_template, tmp_path_factory.mktemp("realistic") / "home")
    add_realistic_memories(layout.db_path, REALISTIC_ROWS, seed=20)
    return layout


@pytest.fixture
def realistic(realistic_template, tmp_path) -> SampleLayout:
    """A private copy of the realistic home for one test."""
    return copy_sample(realistic_template, tmp_path / "realistic")


@pytest.fixture
def sample(sample_template, tmp_path) -> SampleLayout:
    """A private copy of the sample home for one test."""
    return copy_sample(sample_template, tmp_path / "sample")


@pytest.fixture(scope="session")
def conversations_template(tmp_path_factory) -> SampleLayout:
    """An aged multi-session conversation home (900 turns in 6 sessions) with its eval suite,
    written once per session through the real Mnemosyne API (``samples/conversations.py``)."""
    from mnemo_ops.samples.conversations import build

    return build(
        tmp_path_factory.mktemp("conversations-template"), sessions=6, turns_per_session=150
    )


@pytest.fixture
def conversations(conversations_template, tmp_path) -> SampleLayout:
    """A private copy of the aged conversation home for one test."""
    return copy_sample(conversations_template, tmp_path / "conversations")


@pytest.fixture(scope="session")
def agent_conversations_template(conversations_template, tmp_path_factory) -> SampleLayout:
    """The conversation home with its sessions made the Hermes plugin's own (``hermes_<session>``,
    so the plugin's prefetch finds them), built once per session."""
    from mnemo_ops.samples.conversations import as_agent_sessions

    target = tmp_path_factory.mktemp("agent-conversations") / "home"
    return as_agent_sessions(copy_sample(conversations_template, target))


@pytest.fixture
def agent_conversations(agent_conversations_template, tmp_path) -> SampleLayout:
    """A private copy of the agent-session conversation home for one test."""
    return copy_sample(agent_conversations_template, tmp_path / "agent-conversations")


@pytest.fixture
def sample_settings(sample) -> Settings:
    """Settings resolved for the test's sample home, as the CLI would resolve them."""
    return load_settings(db=sample.db_path, state_dir=sample.state_dir, environ=sample.environ())


def run_cli(
    layout: SampleLayout | None,
    *args: str,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    """Run ``python -m mnemo_ops ARGS`` in a real subprocess with the sample's environment."""
    environ = layout.environ() if layout is not None else dict(os.environ)
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "mnemo_ops", *args],
        env=environ,
        capture_output=True,
        text=True,
        input=input_text,
        timeout=timeout,
    )


@pytest.fixture
def cli(sample):
    """Call the CLI against the test's sample home: ``cli("--json", "status")``."""

    def call(*args: str, **kwargs) -> subprocess.CompletedProcess:
        return run_cli(sample, *args, **kwargs)

    return call


def spin_every_core() -> list[subprocess.Popen]:
    """Start one process spinning per core (at least two): an agent's machine is rarely idle."""
    spin = "while True: pass"
    return [
        subprocess.Popen([sys.executable, "-c", spin]) for _ in range(max(2, os.cpu_count() or 2))
    ]


def stop_spinners(spinners: list[subprocess.Popen]) -> None:
    """Kill the processes `spin_every_core` started (each by its own handle) and reap them."""
    for spinner in spinners:
        spinner.kill()
    for spinner in spinners:
        spinner.wait(timeout=30)


@pytest.fixture
def busy_cores():
    """Every core kept busy for the whole test by a spinning process, killed afterwards.

    The live-writer tests run under it (marked ``contention``): the write transactions of a job
    stretch when the job shares the CPU, and a promise to the agent that holds only on an idle
    machine does not hold.
    """
    spinners = spin_every_core()
    try:
        yield spinners
    finally:
        stop_spinners(spinners)
