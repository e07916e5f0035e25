"""Test children of tests/foundation/test_child_process.py: one handler, its behaviour chosen by the
request's ``mode`` (``python -m tests.foundation.children``, request on stdin)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import PARENT_PID_VARIABLE, child_main, send_progress

SLEEPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
"""A grandchild that ignores SIGTERM, so only the group's SIGKILL ends it."""


def hang(request: dict[str, Any]) -> None:
    """Start a sleeping grandchild (when asked), write both pids, say so on stderr, never return."""
    if request.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pids = [os.getpid()]
    if request.get("grandchild"):
        pids.append(subprocess.Popen([sys.executable, "-c", SLEEPER]).pid)
    Path(request["pid_file"]).write_text(" ".join(map(str, pids)), encoding="utf-8")
    print("hanging now, the grandchild sleeps", file=sys.stderr)
    time.sleep(600)


def noise() -> dict[str, bool]:
    """Write to stdout every way a library could: print, the raw descriptor, a grandchild."""
    print("a banner printed on stdout")
    print('{"kind": "result", "data": "a fake result printed by a library"}')
    os.write(1, b"raw bytes written to descriptor 1\n")
    subprocess.run([sys.executable, "-c", "print('a grandchild writing to stdout')"], check=True)
    return {"clean": True}


def chatty(size: int) -> int:
    """Far more output than a pipe holds, on stderr and (redirected) stdout."""
    line = "chatter " * 16 + "\n"
    for _ in range(size // len(line)):
        sys.stderr.write(line)
        sys.stdout.write(line)
    return size


def handle(request: dict[str, Any]) -> Any:
    """Do what `request["mode"]` says."""
    mode = request["mode"]
    if mode == "echo":
        return request["payload"]
    if mode == "progress":
        for step in range(request["count"]):
            send_progress({"step": step})
        return "done"
    if mode == "raise":
        raise ValueError("the handler broke\non two lines")
    if mode == "exit":
        print("last words before the exit", file=sys.stderr)
        sys.exit(3)
    if mode == "signal":
        print("about to be killed", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        hang(request)
    if mode == "noise":
        return noise()
    if mode == "chatty":
        return chatty(request["size"])
    if mode == "environment":
        return {
            "parent_variable": os.environ.get(PARENT_PID_VARIABLE),
            "unbuffered": os.environ.get("PYTHONUNBUFFERED"),
            "marker": os.environ.get("MNEMO_OPS_TEST_MARKER"),
            "cwd": os.getcwd(),
            "descriptor_open": _is_open(request["descriptor"]),
        }
    raise KeyError(mode)


def _is_open(descriptor: int) -> bool:
    try:
        os.fstat(descriptor)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    child_main(handle)
