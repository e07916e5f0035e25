"""A dry run leaves no file behind: not even the empty -wal and -shm files a read-only SQLite
connection creates beside a WAL database nobody has open (real jobs, real Mnemosyne home)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from mnemo_ops import database
from mnemo_ops.jobs import implemented_jobs, run_job
from mnemo_ops.settings import load_settings
from tests.conftest import run_cli


def closed_cleanly(db_path: Path) -> None:
    """The test's own copy as a database nobody has open: its WAL checkpointed and, on the last
    close, -wal and -shm removed by SQLite itself."""
    connection = sqlite3.connect(db_path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    assert database.side_files(db_path) == []
    assert db_path.read_bytes()[18:20] == b"\x02\x02"  # still a WAL database


def folder_state(folder: Path) -> dict[str, str]:
    """Every file of `folder` by name, with a digest of its bytes."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
        if path.is_file()
    }


DRY_RUN_OPTIONS = {"retrieval-eval": {"allow_no_suite": "true"}}
"""The sample has no eval suite: the gate's dry run is told that is allowed."""


@pytest.mark.parametrize("job", implemented_jobs())
def test_a_dry_run_leaves_the_database_folder_as_it_was(sample, job):
    closed_cleanly(sample.db_path)
    before = folder_state(sample.data_dir)
    settings = load_settings(
        db=sample.db_path, state_dir=sample.state_dir, environ=sample.environ()
    )

    result = run_job(
        settings, job, dry_run=True, show_progress=False, options=DRY_RUN_OPTIONS.get(job)
    )

    assert result.dry_run and result.status != "failed", result.error
    assert folder_state(sample.data_dir) == before


def test_a_dry_run_through_the_cli_leaves_no_wal_or_shm(sample):
    closed_cleanly(sample.db_path)
    before = folder_state(sample.data_dir)

    completed = run_cli(sample, "run", "memory-maintain", "--dry-run")

    assert completed.returncode == 0, completed.stderr
    assert folder_state(sample.data_dir) == before


def test_a_database_someone_has_open_is_read_beside_them(sample):
    """With the agent's -wal and -shm present, a read-only connection reads through them (a reader
    never blocks the writer, and sees its committed rows); it creates nothing new."""
    writer = sqlite3.connect(sample.db_path)
    try:
        writer.execute("CREATE TABLE mnemo_probe (x)")
        writer.execute("INSERT INTO mnemo_probe VALUES (1)")
        writer.commit()
        present = {path.name for path in database.side_files(sample.db_path)}
        assert present == {"mnemosyne.db-wal", "mnemosyne.db-shm"}
        with database.untouched_reads():
            reader = database.connect(sample.db_path, readonly=True)
            try:
                assert reader.execute("SELECT x FROM mnemo_probe").fetchall() == [(1,)]
            finally:
                reader.close()
        assert {path.name for path in database.side_files(sample.db_path)} == present
    finally:
        writer.close()
