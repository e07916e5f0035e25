"""The one flock helper across real processes: real files, a real flock, no mocks."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo_ops.foundation.flock import FileLock, LockFileBusy, is_locked

REPOSITORY = Path(__file__).resolve().parents[2]

HOLDER = """
import fcntl, os, subprocess, sys, time
from pathlib import Path
from mnemo_ops.foundation.flock import FileLock
path, kind = Path(sys.argv[1]), sys.argv[2]
if kind == "helper":
    handle = FileLock(path).acquire()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
elif kind == "shared":
    handle = FileLock(path, shared=True).acquire()
elif kind == "raw-flock":
    handle = open(path, "a+")
    fcntl.flock(handle, fcntl.LOCK_EX)
elif kind == "raw-lockf":
    handle = open(path, "a+")
    fcntl.lockf(handle, fcntl.LOCK_EX)
elif kind == "helper-with-child":
    handle = FileLock(path).acquire()
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=False)
print("locked", flush=True)
time.sleep(60)
"""


def _start(path: Path, kind: str) -> subprocess.Popen:
    """A process that holds `path` the `kind` way until it is killed (its own process group)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), kind],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
    )
    assert process.stdout.readline().strip() == "locked"
    return process


def _kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_a_second_process_finds_the_lock_held_and_reads_what_the_holder_wrote(tmp_path):
    path = tmp_path / "job.lock"
    holder = _start(path, "helper")
    try:
        with pytest.raises(LockFileBusy) as raised:
            FileLock(path).acquire()
        assert raised.value.path == path
        assert path.read_text() == f"pid {holder.pid}"  # "a+" never truncated the holder's text
        assert is_locked(path)
    finally:
        _kill(holder)
    assert not is_locked(path)  # kill -9 released it
    with FileLock(path) as handle:
        handle.write("second")
    assert path.read_text() == f"pid {holder.pid}second"


def test_it_is_a_flock_as_hermes_takes_not_a_posix_record_lock(tmp_path):
    """Hermes takes fcntl.flock: its holder must block us, and ours must block it."""
    path = tmp_path / "MEMORY.md.lock"
    holder = _start(path, "raw-flock")
    try:
        with pytest.raises(LockFileBusy):
            FileLock(path).acquire()
    finally:
        _kill(holder)
    holder = _start(path, "helper")
    try:
        with open(path, "a+") as handle, pytest.raises(BlockingIOError):
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        _kill(holder)
    # A lockf (fcntl record lock) is another kind that a flock does not see on Linux: were the
    # helper a lockf, this would be refused.
    holder = _start(path, "raw-lockf")
    try:
        with FileLock(path) as handle:
            assert handle is not None
    finally:
        _kill(holder)


def test_a_wait_gets_the_lock_once_the_holder_dies(tmp_path):
    path = tmp_path / "job.lock"
    holder = _start(path, "helper")
    subprocess.Popen(
        [sys.executable, "-c", f"import os, time; time.sleep(0.5); os.kill({holder.pid}, 9)"]
    )
    started = time.monotonic()
    with FileLock(path, poll_seconds=0.05).hold(wait_seconds=30):
        assert time.monotonic() - started >= 0.4
    holder.wait()


def test_a_wait_gives_up_after_its_deadline(tmp_path):
    path = tmp_path / "job.lock"
    holder = _start(path, "helper")
    try:
        started = time.monotonic()
        with pytest.raises(LockFileBusy):
            FileLock(path, poll_seconds=0.05).acquire(0.3)
        assert 0.3 <= time.monotonic() - started < 5
    finally:
        _kill(holder)


def test_a_blocking_wait_waits_as_long_as_it_takes(tmp_path):
    path = tmp_path / "build.lock"
    holder = _start(path, "helper")
    subprocess.Popen(
        [sys.executable, "-c", f"import os, time; time.sleep(0.5); os.kill({holder.pid}, 9)"]
    )
    started = time.monotonic()
    with FileLock(path).hold(wait_seconds=None):
        assert time.monotonic() - started >= 0.4
    holder.wait()


def test_shared_holders_share_and_keep_an_exclusive_one_out(tmp_path):
    path = tmp_path / "job.lock"
    holder = _start(path, "shared")
    try:
        with FileLock(path, shared=True):
            pass
        with pytest.raises(LockFileBusy):
            FileLock(path).acquire()
    finally:
        _kill(holder)


def test_children_of_a_holder_do_not_keep_the_lock(tmp_path):
    path = tmp_path / "job.lock"
    holder = _start(path, "helper-with-child")
    try:
        os.kill(holder.pid, signal.SIGKILL)  # the holder dies; its child (same group) lives on
        holder.wait()
        with FileLock(path):
            pass
    finally:
        os.killpg(holder.pid, signal.SIGKILL)


def test_a_symlinked_lock_file_is_not_followed_when_asked(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("not a lock")
    link = tmp_path / "job.lock"
    link.symlink_to(target)
    with pytest.raises(OSError) as raised:
        FileLock(link, follow_symlinks=False).acquire()
    assert raised.value.errno == errno.ELOOP
    assert target.read_text() == "not a lock"


def test_a_new_lock_file_gets_the_creation_mode_and_release_lets_go(tmp_path):
    path = tmp_path / "job.lock"
    lock = FileLock(path, mode="ab", create_mode=0o600)
    handle = lock.acquire()
    assert lock.held and lock.handle is handle and (path.stat().st_mode & 0o777) == 0o600
    lock.release()
    assert not lock.held and handle.closed
    lock.release()  # a second release does nothing


def test_the_probe_creates_nothing(tmp_path):
    path = tmp_path / "missing.lock"
    assert not is_locked(path) and not path.exists()
