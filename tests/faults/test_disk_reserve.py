"""The agent's free-space reserve on a small real filesystem (a size-limited tmpfs).

Issue 20, item 6: on a 30 MB filesystem holding a 13 MB database, a pre-write checkpoint and a
job's writes left the live agent no room ("database or disk is full"). Here the sample home lives
on a 24 MiB tmpfs, a filler file sets the free space, and the reserve is 2x the database and its
WAL (floor 0). Below it a writing job and its dry run do not start (exit 2, one line naming the
folder, the free space and the reserve, before the lock: no ledger row) and write nothing, a
checkpoint is refused, and the morning report says so; just above it the report warns first.
"""

import json
import os
from pathlib import Path

import pytest

from tests.conftest import copy_sample, run_cli
from tests.faults.tmpfs import mounted_tmpfs
from tests.purity import sample_snapshot

MEBIBYTE = 1024 * 1024


@pytest.fixture
def small_home(sample_template, tmp_path):
    """The sample home on a 24 MiB tmpfs (needs root; skipped otherwise)."""
    with mounted_tmpfs(tmp_path / "small", "24m", mode="0755") as mount_point:
        layout = copy_sample(sample_template, mount_point / "home")
        config = mount_point / "home" / "config.yaml"
        config.write_text("disk:\n  reserve_factor: 2\n  reserve_floor_mb: 0\n")
        yield layout, mount_point, config


def _fill_to(mount_point: Path, free_bytes: int) -> None:
    """Size a filler file so that `free_bytes` are left on the filesystem."""
    filler = mount_point / "filler"
    filler.touch()
    stats = os.statvfs(mount_point)
    free = stats.f_bavail * stats.f_frsize
    current = filler.stat().st_size
    target = max(0, current + free - free_bytes)
    if target < current:
        os.truncate(filler, target)  # tmpfs gives the pages back
        return
    with open(filler, "r+b") as handle:  # tmpfs allocates on write, not on truncate
        handle.seek(current)
        remaining = target - current
        while remaining:
            chunk = min(remaining, MEBIBYTE)
            handle.write(b"\0" * chunk)
            remaining -= chunk


def _database_bytes(layout) -> int:
    wal = Path(f"{layout.db_path}-wal")
    return layout.db_path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def test_below_the_reserve_jobs_do_not_start_checkpoints_are_refused_and_the_report_says_so(
    small_home,
):
    layout, mount_point, config = small_home
    reserve = 2 * _database_bytes(layout)
    _fill_to(mount_point, reserve - 64 * 1024)  # just below the reserve
    before = sample_snapshot(layout)

    for mode in ((), ("--dry-run",)):
        result = run_cli(layout, "--config", str(config), "--json", "run", "memory-maintain", *mode)
        data = json.loads(result.stdout)
        assert result.returncode == 2, result.stderr
        assert data["exit_code"] == 2
        assert "not starting memory-maintain" in data["error"]
        assert f"MiB free at {layout.db_path.parent}" in data["error"]
        assert "reserve kept for the live agent" in data["error"]
        assert "\n" not in data["error"]

    # Nothing was written: the database, its WAL, the memory blocks, nor the state dir (no lock
    # file, no checkpoint, no ledger row: the refusal is not a run).
    after = sample_snapshot(layout)
    for name in ("db", "wal", "beside_db", "memory_blocks", "state_dir"):
        assert before[name] == after[name], name

    report = run_cli(layout, "--config", str(config), "--json", "run", "nightly-selfcare")
    codes = {warning["code"]: warning for warning in json.loads(report.stdout)["warnings"]}
    assert codes["disk-reserve-reached"]["severity"] == "error"

    # Room for a checkpoint, but not for the checkpoint and the reserve: the checkpoint is refused,
    # and a job whose manifest wants one before its first write fails before writing.
    _fill_to(mount_point, reserve + _database_bytes(layout) * 3 // 2)
    backup = run_cli(layout, "--config", str(config), "--json", "run", "backup")
    assert backup.returncode == 1
    assert "checkpoint refused" in json.loads(backup.stdout)["error"]
    before = sample_snapshot(layout)
    job = run_cli(layout, "--config", str(config), "--json", "run", "memory-maintain")
    assert job.returncode == 1
    assert "checkpoint refused" in json.loads(job.stdout)["error"]
    assert sample_snapshot(layout)["db"] == before["db"]


def test_the_report_warns_before_the_reserve_is_reached_and_jobs_still_run(small_home):
    layout, mount_point, config = small_home
    database = _database_bytes(layout)
    # Above the reserve, but one more checkpoint of the database would cross it.
    _fill_to(mount_point, 2 * database + database // 2)
    report = run_cli(layout, "--config", str(config), "--json", "run", "nightly-selfcare")
    codes = {warning["code"]: warning for warning in json.loads(report.stdout)["warnings"]}
    assert codes["disk-reserve-near"]["severity"] == "warning", codes
    assert "disk-reserve-reached" not in codes
    result = run_cli(layout, "--config", str(config), "--json", "run", "bridge-drain")
    assert result.returncode == 0, result.stdout
