"""Folders mnemo-ops cannot write: one line naming the path and what to do, exit 2, no change
counted that was not made, and the dry run finds the same problem (issue 28, item 2).

A folder is made unwritable for real: root ignores permission bits, so as root the folder is made
immutable (``chattr +i``, EPERM), as any other user its write bit is taken away (EACCES); either
way creating a file in it raises PermissionError, which the fixture checks before the test runs.
A path that is a file where a folder should be fails the same way for every user.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.purity import assert_unchanged, sample_snapshot


@contextlib.contextmanager
def unwritable(folder: Path) -> Iterator[Path]:
    """`folder` (created) that this user really cannot create files in, for the block's length."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("as root a folder can only be made unwritable with chattr")
        made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"chattr +i is not supported here: {made.stderr.strip()}")
        undo = ["chattr", "-i", str(folder)]
    else:
        folder.chmod(0o500)
        undo = None
    try:
        with pytest.raises(PermissionError):
            (folder / "probe").mkdir()
        yield folder
    finally:
        if undo:
            subprocess.run(undo, check=True)
        else:
            folder.chmod(0o700)


def _one_line(completed: subprocess.CompletedProcess, path: Path) -> str:
    """The error line on stderr: exactly one, naming `path`, and no traceback or internal error."""
    lines = [line for line in completed.stderr.splitlines() if line.startswith("mnemo-ops: error:")]
    assert len(lines) == 1, completed.stderr
    assert str(path) in lines[0], lines[0]
    assert "internal error" not in completed.stderr and "Traceback" not in completed.stderr
    return lines[0]


@pytest.mark.heavy
def test_an_unwritable_backups_folder_fails_the_backup_and_its_dry_run_alike(sample, cli):
    backups = sample.state_dir / "backups"
    assert cli("run", "backup").returncode == 0
    with unwritable(backups):
        before = sample_snapshot(sample)
        runs = {
            (mode, output): cli(*(["--json"] if output == "json" else []), "run", "backup", *mode)
            for mode in ((), ("--dry-run",))
            for output in ("text", "json")
        }
        after = sample_snapshot(sample)
    for (_mode, output), completed in runs.items():
        assert completed.returncode == 2, completed.stderr
        if output == "text":
            line = _one_line(completed, backups)
            assert "not writable" in line and "--state-dir" in line
            assert "changes:" not in completed.stdout and "would change" not in completed.stdout
        else:
            result = json.loads(completed.stdout)
            assert result["exit_code"] == 2, result
            assert str(backups) in result["error"] and "not writable" in result["error"]

    # Nothing was made: the database, the checkpoints and the state dir are as they were (the
    # refusal comes before the writer lock and is not a run, so there is no ledger row either).
    assert_unchanged(before, after)


@pytest.mark.heavy
def test_an_unwritable_state_folder_is_one_line_for_jobs_and_their_dry_runs(sample, cli):
    with unwritable(sample.state_dir):
        completed = [
            cli("run", "backup"),
            cli("run", "memory-maintain", "--dry-run"),
            cli("run", "nightly-selfcare"),
        ]
    for each in completed:
        assert each.returncode == 2, each.stderr
        assert "run ledger" in _one_line(each, sample.state_dir)


def test_a_state_dir_that_is_a_file_is_one_line(sample, cli, tmp_path):
    not_a_folder = tmp_path / "state"
    not_a_folder.write_text("a file where the state dir should be\n")
    completed = cli("--state-dir", str(not_a_folder), "--json", "run", "backup", "--dry-run")
    assert completed.returncode == 2
    assert "it is a file, not a folder" in _one_line(completed, not_a_folder)
    assert json.loads(completed.stdout)["exit_code"] == 2


def test_report_names_an_unwritable_reports_folder_and_runs_with_no_write(sample, cli):
    reports = sample.state_dir / "reports"
    with unwritable(reports):
        refused = cli("report")
        without_file = cli("report", "--no-write")
    assert refused.returncode == 2
    assert "--no-write" in _one_line(refused, reports)
    assert without_file.returncode in (0, 1) and "morning report" in without_file.stdout


def test_report_on_a_missing_database_exits_2_and_writes_nothing(tmp_path):
    from tests.conftest import run_cli

    state = tmp_path / "state"
    completed = run_cli(
        None, "--db", str(tmp_path / "none.db"), "--state-dir", str(state), "report"
    )
    assert completed.returncode == 2
    _one_line(completed, tmp_path / "none.db")
    assert not state.exists()


def test_demo_refuses_a_dir_that_is_a_file(tmp_path):
    from tests.conftest import run_cli

    readme = tmp_path / "README.md"
    readme.write_text("# not a folder\n")
    completed = run_cli(None, "--json", "demo", "--dir", str(readme))
    assert completed.returncode == 2
    assert "is a file, not a folder" in _one_line(completed, readme)
    assert json.loads(completed.stdout) == {
        "error": f"--dir {readme} is a file, not a folder; pass an empty or new folder",
        "exit_code": 2,
    }
