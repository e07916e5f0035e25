"""A read-only database file, database folder or state dir is refused before anything is written.

The job and its dry run alike exit 2 with one line naming the path; nothing is written first: no
writer lock file, no checkpoint, no ledger row (the refusal is not a run, as a usage error is not),
and the database keeps every byte. The ``trigger`` commands refuse the same way, with no internal
error.

The paths are made read-only for real with ``chmod`` (a file at 0444, a folder at 0555). As root
``chmod`` does not stop a write, so the refusal does not rest on the kernel saying no: a path whose
mode grants nobody write permission is refused for every user, root included
(``foundation/writable``; docs/contracts.md, "Running a job"). The tests therefore run the same
way as root and as any other user.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.purity import assert_unchanged, sample_snapshot


@contextlib.contextmanager
def read_only(path: Path, mode: int) -> Iterator[Path]:
    """`path` chmod-ed to `mode` (0444 for a file, 0555 for a folder) for the block's length."""
    previous = path.stat().st_mode & 0o7777
    path.chmod(mode)
    try:
        yield path
    finally:
        path.chmod(previous)


def error_line(completed: subprocess.CompletedProcess, path: Path) -> str:
    """The one error line on stderr, naming `path`; no traceback and no internal error."""
    lines = [line for line in completed.stderr.splitlines() if line.startswith("mnemo-ops: error:")]
    assert len(lines) == 1, completed.stderr
    assert str(path) in lines[0], lines[0]
    assert "internal error" not in completed.stderr and "Traceback" not in completed.stderr
    return lines[0]


def ledger_rows(state_db: Path) -> list[tuple[str, str]]:
    """(job, status) of every ledger row; [] when there is no ledger yet."""
    if not state_db.exists():
        return []
    connection = sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)
    try:
        return connection.execute("SELECT job, status FROM runs ORDER BY id").fetchall()
    finally:
        connection.close()


def checkpoints(state_dir: Path) -> list[str]:
    """The names under the state dir's backups folder."""
    folder = state_dir / "backups"
    return sorted(path.name for path in folder.rglob("*")) if folder.exists() else []


def refuses_everything(sample, cli, path: Path, reason: str, jobs=("memory-maintain",)):
    """Every job in `jobs`, real and dry, exits 2 naming `path` and `reason`, and changes nothing."""
    before, rows = sample_snapshot(sample), ledger_rows(sample.state_dir / "state.db")
    saved = checkpoints(sample.state_dir)
    for job in jobs:
        for mode in ((), ("--dry-run",)):
            completed = cli("run", job, *mode)
            assert completed.returncode == 2, (job, mode, completed.stdout, completed.stderr)
            assert reason in error_line(completed, path)
            as_json = cli("--json", "run", job, *mode)
            assert as_json.returncode == 2
            data = json.loads(as_json.stdout)
            assert data["exit_code"] == 2 and str(path) in data["error"], data
    after = sample_snapshot(sample)
    assert_unchanged(before, after)  # database bytes, state dir (no lock, no ledger row), blocks
    assert ledger_rows(sample.state_dir / "state.db") == rows
    assert checkpoints(sample.state_dir) == saved


@pytest.mark.heavy
def test_a_read_only_database_file_is_refused_before_the_checkpoint(sample, cli):
    assert cli("run", "backup").returncode == 0  # a ledger and a backups folder to compare against
    with read_only(sample.db_path, 0o444):
        refuses_everything(
            sample,
            cli,
            sample.db_path,
            "read-only (mode 0444)",
            ("memory-maintain", "evening-batch"),
        )
    # Writable again, the same job runs: the refusal was the file, nothing else.
    assert cli("run", "memory-maintain").returncode == 0


@pytest.mark.heavy
def test_a_read_only_database_folder_is_refused(sample, cli):
    with read_only(sample.db_path.parent, 0o555):
        refuses_everything(sample, cli, sample.db_path.parent, "read-only (mode 0555)")


@pytest.mark.heavy
def test_a_read_only_state_dir_is_refused_for_jobs_that_write_no_database_too(sample, cli):
    sample.state_dir.mkdir(parents=True, exist_ok=True)
    with read_only(sample.state_dir, 0o555):
        refuses_everything(
            sample, cli, sample.state_dir, "run ledger", ("memory-maintain", "nightly-selfcare")
        )


def test_the_commands_that_write_refuse_a_read_only_database_in_one_line(sample, cli):
    before = sample_snapshot(sample)
    with read_only(sample.db_path, 0o444):
        completed = [
            cli(*command, *mode)
            for command in (
                ("trigger", "install"),
                ("trigger", "uninstall"),
                ("summaries", "revert"),
                ("forgotten", "restore", "--all"),
                ("importance", "restore", "--all"),
            )
            for mode in ((), ("--dry-run",))
        ]
    for each in completed:
        assert each.returncode == 2, (each.args, each.stdout, each.stderr)
        assert "read-only (mode 0444)" in error_line(each, sample.db_path)
    assert_unchanged(before, sample_snapshot(sample))
    # The status only reads: it still answers.
    with read_only(sample.db_path, 0o444):
        assert cli("trigger", "status").returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="shows the rule where chmod alone stops nothing")
def test_as_root_the_mode_is_the_refusal_not_the_kernel(sample):
    """As root the kernel would let the write through; the mode bits refuse it all the same."""
    from mnemo_ops.foundation.writable import unwritable_file_reason

    with read_only(sample.db_path, 0o444):
        assert os.access(sample.db_path, os.W_OK)  # root: the kernel says yes
        assert unwritable_file_reason(sample.db_path) == "it is read-only (mode 0444)"


def test_backup_restore_refuses_a_read_only_database_folder_before_moving_anything(sample, cli):
    assert cli("run", "backup").returncode == 0
    name = json.loads(cli("--json", "backup", "list").stdout)["checkpoints"][-1]["name"]
    before = sample_snapshot(sample)
    with read_only(sample.db_path.parent, 0o555):
        refused = [cli("backup", "restore", name, *mode) for mode in ((), ("--dry-run",))]
    for completed in refused:
        assert completed.returncode == 2, (completed.args, completed.stdout, completed.stderr)
        assert "read-only (mode 0555)" in error_line(completed, sample.db_path.parent)
    # Nothing moved aside, no restored copy, no lock: the live database keeps every byte.
    assert_unchanged(before, sample_snapshot(sample))
    assert not (sample.state_dir / "restore-safety").exists()
    # Writable again, the same restore runs: the refusal was the folder.
    assert cli("backup", "restore", name, "--force").returncode == 0
