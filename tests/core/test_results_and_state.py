"""The result object's JSON contract and the run ledger in state.db."""

import json
import os
import stat
from datetime import UTC, datetime

import pytest
from freezegun import freeze_time

from mnemo_ops.core import state
from mnemo_ops.core.results import JobResult, JobWarning


def test_result_json_contract():
    with freeze_time("2026-11-30 02:00:00"):
        result = JobResult(job="backup", db="/x/mnemosyne.db")
    result.count("files_written", 3)
    result.count("files_written")
    result.warn(
        "wal-large", "WAL is 300 MB", severity="warning", fix="mnemo-ops run monthly-maintenance"
    )
    with freeze_time("2026-11-30 02:00:02.5"):
        result.finish()
    data = result.to_dict()
    assert set(data) == {
        "job",
        "status",
        "dry_run",
        "started_at",
        "finished_at",
        "duration_s",
        "db",
        "checkpoint",
        "changes",
        "stats",
        "warnings",
        "error",
    }
    assert data["status"] == "ok" and data["duration_s"] == 2.5
    assert data["started_at"] == "2026-11-30T02:00:00+00:00"
    assert data["changes"] == {"files_written": 4}
    assert data["warnings"][0] == {
        "code": "wal-large",
        "severity": "warning",
        "message": "WAL is 300 MB",
        "fix": "mnemo-ops run monthly-maintenance",
    }
    assert result.exit_code == 0 and result.worst_severity == "warning"
    json.dumps(data)


def test_status_and_exit_codes():
    dry = JobResult(job="x", dry_run=True).finish()
    assert dry.status == "dry-run" and dry.exit_code == 0
    failed = JobResult(job="x")
    failed.fail("boom")
    assert failed.finish().status == "failed" and failed.exit_code == 1
    skipped = JobResult(job="x", status="skipped").finish()
    assert skipped.exit_code == 75
    override = JobResult(job="x")
    override.exit_code_override = 2
    assert override.exit_code == 2


def test_unknown_severity_is_rejected():
    with pytest.raises(ValueError):
        JobWarning(code="x", severity="fatal", message="no such severity")


def test_ledger_records_runs_and_last_runs(tmp_path):
    db = state.open_state(tmp_path / "state" / "state.db")
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "state.db").st_mode) == 0o600
    with freeze_time("2026-11-28 02:00:00"):
        first = JobResult(job="backup").finish()
    with freeze_time("2026-11-29 02:00:00"):
        second = JobResult(job="backup")
        second.fail("disk full")
        second.finish()
    with freeze_time("2026-11-29 03:00:00"):
        skipped = JobResult(job="memory-maintain", status="skipped").finish()
    for result in (first, second, skipped):
        state.record_run(db, result)
    latest = state.last_runs(db)
    assert latest["backup"]["status"] == "failed"
    assert latest["backup"]["last_success"] == "2026-11-28T02:00:00+00:00"
    assert latest["memory-maintain"]["status"] == "skipped"
    assert latest["memory-maintain"].get("last_success") is None
    since = state.runs_since(db, datetime(2026, 11, 29, tzinfo=UTC))
    assert [row["job"] for row in since] == ["backup", "memory-maintain"]
    assert json.loads(since[0]["result_json"])["error"] == "disk full"


def test_migrations_are_idempotent(tmp_path):
    path = tmp_path / "state.db"
    version = state.migrate(state.open_state(path))
    assert state.migrate(state.open_state(path)) == version == len(state.MIGRATIONS)


def test_readonly_open_of_missing_state_creates_nothing(tmp_path):
    assert state.open_state_readonly(tmp_path / "nothing" / "state.db") is None
    assert not (tmp_path / "nothing").exists()
    assert state.open_state(tmp_path / "nothing" / "state.db", create=False) is None
    assert not (tmp_path / "nothing").exists()


def test_state_db_is_not_wal(tmp_path):
    db = state.open_state(tmp_path / "state.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    reader = state.open_state_readonly(tmp_path / "state.db")
    reader.execute("SELECT count(*) FROM runs").fetchone()
    reader.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]


def test_status_and_severity_are_checked_against_their_enums():
    from mnemo_ops.core.results import Severity, Status

    result = JobResult(job="backup")
    result.status = "failed"
    assert result.status is Status.FAILED and result.to_dict()["status"] == "failed"
    with pytest.raises(ValueError):
        result.status = "finished"
    with pytest.raises(ValueError):
        JobWarning(code="x", severity="fatal", message="no such severity")
    assert [severity.rank for severity in Severity] == [0, 1, 2, 3]


def test_a_state_table_is_created_once_with_its_key_and_indexes(tmp_path):
    table = state.StateTable(
        "example_history",
        {"id": int, "job": str, "run_at": str, "figure": float},
        pk="id",
        indexes=(("job", "run_at"),),
    )
    db = state.open_state(tmp_path / "state.db")
    table.ensure(db)
    db["example_history"].insert({"job": "backup", "run_at": "2026-11-30", "figure": 0.5})
    table.ensure(db)  # a second call keeps the table and its row
    assert db["example_history"].count == 1
    assert db["example_history"].columns_dict == {
        "id": int,
        "job": str,
        "run_at": str,
        "figure": float,
    }
    assert db["example_history"].pks == ["id"]
    # Named as sqlite-utils names an index, so a table created before the declaration matches.
    assert [index.name for index in db["example_history"].indexes] == [
        "idx_example_history_job_run_at"
    ]
    assert state.RUNS.name in db.table_names()
