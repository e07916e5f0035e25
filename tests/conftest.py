"""Shared fixtures: an isolated environment, the sample home (built once by the real Mnemosyne API,
copied per test), settings for it, and the CLI (in this process, or a real child for job runs)."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

import pytest

from mnemo_ops.mnemosyne.sample_home import SampleLayout, build_sample, copy_home
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
    # Children write and reuse bytecode, as an installed mnemo-ops does: without it every child
    # process of a test compiles each module it imports again.
    for name in (
        "PYTHONDONTWRITEBYTECODE",
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
    from devtools.samples.realistic_memories import add_realistic_memories

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
    written once per session through the real Mnemosyne API (``devtools/samples/conversations.py``)."""
    from devtools.samples.conversations import build

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
    from devtools.samples.conversations import as_agent_sessions

    target = tmp_path_factory.mktemp("agent-conversations") / "home"
    return as_agent_sessions(copy_sample(conversations_template, target))


@pytest.fixture
def agent_conversations(agent_conversations_template, tmp_path) -> SampleLayout:
    """A private copy of the agent-session conversation home for one test."""
    return copy_sample(agent_conversations_template, tmp_path / "agent-conversations")


@pytest.fixture(scope="session")
def hermes_home_template(tmp_path_factory) -> SampleLayout:
    """The tests' Hermes conversation home, written the way the plugin writes it (sessions as Hermes
    makes them; ``devtools/samples/hermes_conversations``), built once per session."""
    from devtools.samples import hermes_conversations

    return hermes_conversations.build(tmp_path_factory.mktemp("hermes-home") / "home")


@pytest.fixture
def hermes_home(hermes_home_template, tmp_path) -> SampleLayout:
    """A private copy of the tests' Hermes conversation home for one test."""
    from mnemo_ops.mnemosyne.sample_home import copy_home

    return copy_home(hermes_home_template, tmp_path / "home")


@pytest.fixture
def sample_settings(sample) -> Settings:
    """Settings resolved for the test's sample home, as the CLI would resolve them."""
    return load_settings(db=sample.db_path, state_dir=sample.state_dir, environ=sample.environ())


CHILD_PROCESS_COMMANDS = frozenset({"run", "demo"})
"""Commands `run_cli` runs in a real child process unless told otherwise: a job's run is where the
process is the subject (its lock, its signals, its children, Mnemosyne imported by its stages)."""


def run_cli(
    layout: SampleLayout | None,
    *args: str,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
    timeout: float = 120,
    child_process: bool | None = None,
) -> subprocess.CompletedProcess:
    """Run ``mnemo-ops ARGS`` with the sample's environment; the outcome as a CompletedProcess.

    Help, usage errors, config errors, JSON shapes and the read-only commands run in this process
    through the real entry point (``cli.main``, milliseconds each); ``run`` and ``demo`` run as
    ``python -m mnemo_ops ARGS`` in a child. `child_process` forces either way.
    """
    environ = layout.environ() if layout is not None else dict(os.environ)
    environ.update(env or {})
    if child_process is None:
        child_process = command_of(args) in CHILD_PROCESS_COMMANDS
    if child_process:
        return run_cli_process(args, environ, input_text, timeout)
    return run_cli_in_process(args, environ, input_text)


GLOBAL_OPTIONS_WITH_VALUES = frozenset({"--db", "--state-dir", "--config"})


def command_of(args: tuple[str, ...] | list[str]) -> str | None:
    """The command word of a command line (``run`` in ``--config FILE run backup``)."""
    arguments = iter(args)
    for argument in arguments:
        if argument in GLOBAL_OPTIONS_WITH_VALUES:
            next(arguments, None)
        elif not argument.startswith("-"):
            return argument
    return None


def run_cli_process(
    args: tuple[str, ...] | list[str],
    environ: dict[str, str],
    input_text: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    """``python -m mnemo_ops ARGS`` in a real child process with `environ`."""
    return subprocess.run(
        [sys.executable, "-m", "mnemo_ops", *args],
        env=environ,
        capture_output=True,
        text=True,
        input=input_text,
        timeout=timeout,
    )


def run_cli_in_process(
    args: tuple[str, ...] | list[str], environ: dict[str, str], input_text: str | None = None
) -> subprocess.CompletedProcess:
    """``mnemo-ops ARGS`` through ``cli.main`` in this process, as a child would see it: `environ`
    as the whole environment, stdin from `input_text`, stdout and stderr captured (not terminals),
    the exit code from its SystemExit. The environment, the logging set-up and the working folder
    are put back afterwards."""
    from mnemo_ops import cli

    saved_environ = dict(os.environ)
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    saved_directory = os.getcwd()
    stdin = io.TextIOWrapper(io.BytesIO((input_text or "").encode()), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    os.environ.clear()
    os.environ.update(environ)
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        try:
            cli.main(list(args))
            code = 0
        except SystemExit as error:
            code = error.code if isinstance(error.code, int) else (0 if error.code is None else 1)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.environ.clear()
        os.environ.update(saved_environ)
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        os.chdir(saved_directory)
    return subprocess.CompletedProcess(
        ["mnemo-ops", *args], code, stdout=captured(stdout), stderr=captured(stderr)
    )


def captured(stream: io.TextIOWrapper) -> str:
    """What was written to `stream`, as text (universal newlines, as ``text=True`` reads a pipe)."""
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="replace").replace("\r\n", "\n")


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


E2E_MARKERS = ("slow", "realistic", "contention", "heavy")
"""Markers whose tests belong to the e2e tier too: long fault runs, homes of 50k rows beside a live
agent, runs with every core kept busy, and job and guard tests kept out of the fast tier for their
time alone (`heavy`: CI runs those on every Mnemosyne line)."""

SLOW_FAST_TIER_TEST_S = 5.0
"""A fast-tier test that takes longer than this is listed at the end of the run (never failed)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Every test with an e2e-tier marker is in the e2e tier (the fast tier is ``-m "not e2e"``)."""
    for item in items:
        if any(item.get_closest_marker(name) for name in E2E_MARKERS):
            item.add_marker(pytest.mark.e2e)


FAST_TIER_DURATIONS: dict[str, float] = {}
"""Seconds per fast-tier test of this run (its setup, call and teardown), for the listing at the
end; under xdist the controller receives every worker's reports and fills its own."""


def pytest_runtest_logreport(report):
    """Add each phase's time to its test, unless the test is in the e2e tier."""
    if "e2e" not in report.keywords:
        FAST_TIER_DURATIONS[report.nodeid] = (
            FAST_TIER_DURATIONS.get(report.nodeid, 0.0) + report.duration
        )


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """List the fast-tier tests that took longer than SLOW_FAST_TIER_TEST_S (a listing, not a
    failure: the budget is read, never asserted)."""
    slow = sorted(
        (
            (seconds, nodeid)
            for nodeid, seconds in FAST_TIER_DURATIONS.items()
            if seconds > SLOW_FAST_TIER_TEST_S
        ),
        reverse=True,
    )
    if not slow:
        return
    terminalreporter.section(f"fast-tier tests over {SLOW_FAST_TIER_TEST_S:.0f} s")
    for seconds, nodeid in slow:
        terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")
