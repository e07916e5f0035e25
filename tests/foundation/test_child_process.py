"""The child-process boundary with real child processes: results, progress, every way a child can
fail, the process group ended on a timeout, stdout noise, and a child that dies with its parent."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo_ops.foundation.child_process import STANDIN_FILES, ChildProcessFailed, run_child
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.mnemosyne.worker import STANDALONE_FILES

REPO = Path(__file__).resolve().parents[2]
CHILDREN = "tests.foundation.children"
PLAIN = "tests.foundation.plain_child"


def _alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (dead, not yet reaped by its new parent) counts as gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Wait until `pid` is gone (a killed process takes a moment to be torn down)."""
    deadline = time.monotonic() + within_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _pids(pid_file: Path, within_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the child never wrote its pids"
        time.sleep(0.02)
    return [int(pid) for pid in pid_file.read_text().split()]


def test_the_result_comes_back_whole():
    payload = {"text": "Grüße, ✓", "numbers": [1, 2.5, None], "large": "x" * 300_000}
    assert run_child(CHILDREN, {"mode": "echo", "payload": payload}, timeout=60) == payload


def test_progress_messages_reach_the_callback_in_order():
    seen = []
    result = run_child(
        CHILDREN, {"mode": "progress", "count": 3}, timeout=60, on_progress=seen.append
    )
    assert result == "done"
    assert seen == [{"step": 0}, {"step": 1}, {"step": 2}]


@pytest.mark.heavy
def test_a_hung_child_and_its_grandchild_are_killed_on_timeout(tmp_path):
    pid_file = tmp_path / "pids"
    request = {
        "mode": "hang",
        "pid_file": str(pid_file),
        "grandchild": True,
        "ignore_sigterm": True,
    }
    started = time.monotonic()
    with pytest.raises(ChildProcessFailed) as caught:
        run_child(CHILDREN, request, timeout=4, kill_grace_s=0.5)
    assert time.monotonic() - started < 30
    child, grandchild = _pids(pid_file)
    # Both ignore SIGTERM: only the SIGKILL to the whole group ends them.
    assert _gone(child) and _gone(grandchild)
    error = caught.value
    assert error.reason == "timeout"
    assert str(error) == (
        f"{CHILDREN} timed out after 4 s (its process group was killed); "
        "stderr: hanging now, the grandchild sleeps"
    )


def test_a_child_that_exits_non_zero_reports_its_stderr():
    with pytest.raises(ChildProcessFailed) as caught:
        run_child(CHILDREN, {"mode": "exit"}, timeout=60)
    error = caught.value
    assert (error.reason, error.returncode) == ("exit", 3)
    assert str(error) == f"{CHILDREN} exited with status 3; stderr: last words before the exit"
    assert isinstance(error, MnemoOpsError) and error.exit_code == 1


def test_a_handler_exception_comes_back_as_one_line():
    with pytest.raises(ChildProcessFailed) as caught:
        run_child(CHILDREN, {"mode": "raise"}, timeout=60)
    error = caught.value
    assert error.reason == "error"
    assert error.error == "ValueError: the handler broke on two lines"
    assert str(error) == f"{CHILDREN} failed: ValueError: the handler broke on two lines"
    assert "\n" not in str(error)
    assert any("Traceback" in line for line in error.stderr_tail)  # the traceback went to stderr


def test_a_killed_child_names_the_signal():
    with pytest.raises(ChildProcessFailed) as caught:
        run_child(CHILDREN, {"mode": "signal"}, timeout=60)
    assert caught.value.reason == "signal"
    assert str(caught.value) == (
        f"{CHILDREN} was killed by signal SIGKILL; stderr: about to be killed"
    )


def test_noise_on_stdout_does_not_break_the_protocol():
    # print, the raw descriptor 1 and a grandchild's stdout all land in stderr, even a line that
    # looks like a result; the real result comes back.
    assert run_child(CHILDREN, {"mode": "noise"}, timeout=60) == {"clean": True}
    # Printed at import, before child_main took stdout: skipped by the parent.
    assert run_child("tests.foundation.noisy_child", {"a": 1}, timeout=60) == {"a": 1}


def test_a_chatty_child_never_stalls():
    size = 2_000_000  # far beyond a pipe's 64 KiB, on stderr and on (redirected) stdout
    assert run_child(CHILDREN, {"mode": "chatty", "size": size}, timeout=120) == size


@pytest.mark.parametrize(
    ("lines", "status", "expected"),
    [
        ([], 0, "exited with status 0 without a result"),
        (["some text"], 0, "exited with status 0 without a result (stdout: some text)"),
        (['{"kind": "result"}'], 0, 'sent a bad message: {"kind": "result"}'),
        (['{"kind": "shout", "data": 1}'], 0, 'sent a bad message: {"kind": "shout", "data": 1}'),
        (
            ['{"kind": "result", "data": 1}', '{"kind": "progress", "data": 2}'],
            0,
            'sent a bad message: a message after the last one: {"kind": "progress", "data": 2}',
        ),
        (['{"kind": "result", "data": 1}'], 4, "exited with status 4 after its result"),
    ],
)
def test_protocol_failures_are_named(lines, status, expected):
    with pytest.raises(ChildProcessFailed) as caught:
        run_child(PLAIN, {"lines": lines, "status": status}, timeout=60)
    assert str(caught.value) == f"{PLAIN} {expected}"


def test_environment_working_folder_and_descriptors(tmp_path):
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)  # even an inheritable descriptor is closed for the child
    try:
        environment = {
            **os.environ,
            "MNEMO_OPS_TEST_MARKER": "set by the test",
            "PYTHONPATH": str(REPO),  # the working folder is elsewhere: find the tests package
        }
        result = run_child(
            CHILDREN,
            {"mode": "environment", "descriptor": write_end},
            timeout=60,
            environment=environment,
            cwd=tmp_path,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result == {
        "parent_variable": None,  # read and removed by child_main: grandchildren do not get it
        "unbuffered": "1",
        "marker": "set by the test",
        "cwd": str(tmp_path),
        "descriptor_open": False,
    }


def test_a_child_that_cannot_start(tmp_path):
    with pytest.raises(ChildProcessFailed) as caught:
        run_child(CHILDREN, {}, timeout=60, python=tmp_path / "no-python")
    assert caught.value.reason == "start"
    assert str(caught.value).startswith(f"{CHILDREN} could not start: ")


def test_a_missing_module_reports_the_import_error():
    with pytest.raises(ChildProcessFailed) as caught:
        run_child("tests.foundation.no_such_child", {}, timeout=60)
    message = str(caught.value)
    assert message.startswith("tests.foundation.no_such_child exited with status 1; stderr: ")
    assert message.endswith("No module named tests.foundation.no_such_child")


def test_a_standalone_child_runs_from_a_copy_without_the_checkout(tmp_path):
    progress = []
    result = run_child(
        "tests.foundation.standalone_child",
        {"question": "where from?"},
        timeout=60,
        python=sys.executable,
        standalone=True,
        environment={**os.environ, "PYTHONPATH": str(REPO)},
        on_progress=progress.append,
    )
    folder = Path(result["path0"])
    assert Path(result["script"]).parent == folder
    assert Path(result["module_file"]) == folder / "mnemo_ops" / "foundation" / "child_process.py"
    assert REPO not in folder.parents
    assert result["pythonpath"] is None
    assert result["request"] == {"question": "where from?"}
    assert progress == ["started"]
    assert not folder.exists()  # the private copy is removed afterwards


def test_the_context_leads_the_message():
    with pytest.raises(ChildProcessFailed) as caught:
        try:
            run_child(CHILDREN, {"mode": "raise"}, timeout=60)
        except ChildProcessFailed as error:
            raise error.with_context("storing the lessons failed after 0 of 2 writes") from None
    assert str(caught.value) == (
        "storing the lessons failed after 0 of 2 writes: "
        f"{CHILDREN} failed: ValueError: the handler broke on two lines"
    )
    assert caught.value.reason == "error"


def test_a_child_dies_with_its_parent(tmp_path):
    """kill -9 of the parent alone (not its group): the child, in a session of its own, follows."""
    pid_file = tmp_path / "pids"
    parent = subprocess.Popen(
        [sys.executable, "-m", "tests.foundation.orphan_parent", str(pid_file)],
        cwd=REPO,
        start_new_session=True,
    )
    try:
        (child,) = _pids(pid_file)
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _gone(child), "the child outlived its parent"
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()


STANDALONE_CHILDREN = {
    "mnemo_ops/mnemosyne/worker.py": STANDALONE_FILES,
    "mnemo_ops/mnemosyne/version_probe.py": (),
}
"""The package's children that run standalone, under an interpreter without mnemo-ops, with the
modules of their own each one's stand-in package holds (relative to the ``mnemo_ops`` folder)."""


def _module_of(relative: str) -> str:
    return ".".join(("mnemo_ops", *Path(relative).with_suffix("").parts)).removesuffix(".__init__")


def test_standalone_code_imports_only_the_stand_in_and_parses_as_python_3_10():
    package = REPO / "mnemo_ops"
    stand_in = {_module_of(relative) for relative in STANDIN_FILES}
    checked = [(package / relative, stand_in) for relative in STANDIN_FILES]
    for child, companions in STANDALONE_CHILDREN.items():
        allowed = stand_in | {_module_of(relative) for relative in companions}
        checked += [(REPO / child, allowed)]
        checked += [(package / relative, allowed) for relative in companions]
    for path, allowed in checked:
        tree = ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 10))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mnemo_ops"):
                for alias in node.names:
                    # ``from package import module`` imports the module; else the name's module.
                    candidate = f"{node.module}.{alias.name}"
                    source = REPO / Path(*candidate.split("."))
                    is_module = source.with_suffix(".py").is_file() or source.is_dir()
                    imported = candidate if is_module else node.module
                    assert imported in allowed, (
                        f"{path.name} imports {imported}, not in the stand-in"
                    )
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("mnemo_ops") or alias.name in allowed, (
                        f"{path.name} imports {alias.name}, not in the stand-in"
                    )


def test_the_mnemosyne_worker_runs_standalone_with_its_own_modules():
    """The worker split by concern runs from a copy: its stand-in package holds the modules it
    imports (an unknown mode reaches its dispatch); without them it cannot even start."""
    with pytest.raises(ChildProcessFailed) as caught:
        run_child(
            "mnemo_ops.mnemosyne.worker",
            {"mode": "no-such-mode"},
            timeout=120,
            python=sys.executable,
            standalone=True,
            standalone_files=STANDALONE_FILES,
        )
    assert caught.value.reason == "error"
    assert caught.value.error == "KeyError: 'no-such-mode'"
    with pytest.raises(ChildProcessFailed) as caught:
        run_child(
            "mnemo_ops.mnemosyne.worker",
            {"mode": "no-such-mode"},
            timeout=120,
            python=sys.executable,
            standalone=True,
        )
    assert caught.value.reason == "exit"
    assert "No module named 'mnemo_ops.mnemosyne'" in str(caught.value)
