"""The writer lock across real processes: exclusive, holder metadata, released by kill -9, not inherited."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mnemo_ops.core.lock import WriterLock, lock_path_for, probe_holder
from mnemo_ops.foundation.errors import LockHeldError
from tests.conftest import run_cli

HOLDER_SCRIPT = """
import sys, time, subprocess
from pathlib import Path
from mnemo_ops.core.lock import WriterLock
lock = WriterLock(Path(sys.argv[1]), "holder-job")
lock.acquire()
if len(sys.argv) > 2:  # start a long-lived child, as a job might, then keep going
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=False)
print("locked", flush=True)
time.sleep(60)
"""


def _start_holder(lock_path: Path, spawn_child: bool = False) -> subprocess.Popen:
    args = [sys.executable, "-c", HOLDER_SCRIPT, str(lock_path)] + (
        ["child"] if spawn_child else []
    )
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def _kill_group(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_lock_path_is_per_database(tmp_path):
    first = lock_path_for(tmp_path, tmp_path / "a.db")
    assert first == lock_path_for(tmp_path, tmp_path / "." / "a.db")
    assert first != lock_path_for(tmp_path, tmp_path / "b.db")
    assert first.parent == tmp_path / "locks"


def test_second_holder_is_refused_with_metadata(tmp_path):
    lock_path = tmp_path / "locks" / "writer.lock"
    holder = _start_holder(lock_path)
    try:
        with pytest.raises(LockHeldError) as raised:
            WriterLock(lock_path, "second").acquire()
        assert raised.value.holder["job"] == "holder-job"
        assert raised.value.holder["pid"] == holder.pid
        assert "holder-job" in raised.value.message
        assert probe_holder(lock_path)["pid"] == holder.pid
        assert oct(lock_path.stat().st_mode & 0o777) == "0o600"
    finally:
        _kill_group(holder)


def test_kill_9_releases_the_lock(tmp_path):
    lock_path = tmp_path / "locks" / "writer.lock"
    holder = _start_holder(lock_path)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with WriterLock(lock_path, "after") as lock:
        assert lock.held
        assert json.loads(lock_path.read_text())["job"] == "after"
    assert probe_holder(lock_path) is None


def test_children_of_a_holder_do_not_keep_the_lock(tmp_path):
    lock_path = tmp_path / "locks" / "writer.lock"
    holder = _start_holder(lock_path, spawn_child=True)
    try:
        os.kill(holder.pid, signal.SIGKILL)  # the holder dies; its child (same group) lives on
        holder.wait()
        with WriterLock(lock_path, "after"):
            pass
    finally:
        os.killpg(holder.pid, signal.SIGKILL)


def test_wait_gets_the_lock_once_released(tmp_path):
    lock_path = tmp_path / "locks" / "writer.lock"
    holder = _start_holder(lock_path)
    subprocess.Popen(
        [sys.executable, "-c", f"import os, time; time.sleep(0.5); os.kill({holder.pid}, 9)"]
    )
    with WriterLock(lock_path, "waiter", wait_s=30):
        pass
    holder.wait()  # getting here means the waiter took the lock once the holder died


def test_wait_gives_up_after_the_deadline(tmp_path):
    lock_path = tmp_path / "locks" / "writer.lock"
    holder = _start_holder(lock_path)
    try:
        with pytest.raises(LockHeldError):
            WriterLock(lock_path, "waiter", wait_s=0.3).acquire()
    finally:
        _kill_group(holder)


def test_lock_file_is_not_the_database(sample, sample_settings):
    lock_path = lock_path_for(sample_settings.state_dir, sample_settings.db_path)
    assert lock_path.parent.parent == sample_settings.state_dir
    assert not str(lock_path).startswith(str(sample_settings.db_path))


def test_a_symlinked_lock_file_is_refused_and_its_target_left_alone(sample, tmp_path):
    """A symlink planted where the writer lock lives would have the job truncate and overwrite its
    target (the holder's metadata goes into the file opened): the run is refused with exit 2 naming
    the lock, nothing is recorded, and the target keeps its bytes and mode."""
    target = tmp_path / "outside.txt"
    target.write_text("not mnemo-ops' file\n", encoding="utf-8")
    target.chmod(0o644)
    lock_path = lock_path_for(sample.state_dir, sample.db_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock_path.symlink_to(target)

    completed = run_cli(sample, "--json", "run", "backup")

    assert completed.returncode == 2, completed.stderr
    assert f"the writer lock {lock_path} is a symlink" in completed.stderr
    assert json.loads(completed.stdout)["exit_code"] == 2
    assert target.read_text(encoding="utf-8") == "not mnemo-ops' file\n"
    assert target.stat().st_mode & 0o777 == 0o644
    assert lock_path.is_symlink()
