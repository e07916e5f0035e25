"""SIGINT and SIGTERM under `safe_points`: a flag, raised at the next safe point, with real signals
sent to this process and a real child ended when the stop comes while it runs."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from mnemo_ops.foundation import interrupts
from mnemo_ops.foundation.child_process import run_child
from tests.foundation.test_child_process import CHILDREN, _gone, _pids


def _signal_when_written(number: int, pid_file) -> threading.Thread:
    """Send `number` to this process once `pid_file` holds the child's pids (the handler runs in
    the main thread, which is waiting for the child meanwhile)."""

    def send() -> None:
        _pids(pid_file)
        os.kill(os.getpid(), number)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


@pytest.mark.parametrize(("number", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_waits_for_the_next_safe_point(number, exit_code):
    previous = signal.getsignal(number)
    with interrupts.safe_points():
        interrupts.check()  # nothing asked yet
        os.kill(os.getpid(), number)  # the process goes on: the handler only notes it
        assert interrupts.requested() == number
        with pytest.raises(interrupts.Interrupted) as raised:
            interrupts.check()
    assert raised.value.exit_code == exit_code and raised.value.signal == number
    assert str(raised.value) == f"interrupted by {signal.Signals(number).name}"
    assert not isinstance(raised.value, Exception)  # `except Exception` in a step does not hide it
    assert signal.getsignal(number) == previous and interrupts.requested() is None
    interrupts.check()  # outside the block: never raises


def test_a_stop_while_a_child_runs_ends_the_child_and_its_group(tmp_path):
    pid_file = tmp_path / "pids"
    request = {"mode": "hang", "pid_file": str(pid_file), "grandchild": True}
    sender = _signal_when_written(signal.SIGTERM, pid_file)
    started = time.monotonic()
    with interrupts.safe_points(), pytest.raises(interrupts.Interrupted):
        run_child(CHILDREN, request, timeout=None, kill_grace_s=0.5)
    sender.join()
    assert time.monotonic() - started < 30  # not the child's 600 s: the stop was noticed
    child, grandchild = _pids(pid_file)
    assert _gone(child) and _gone(grandchild)
