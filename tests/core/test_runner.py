"""The runner with probe jobs: lock, skip, ledger, failures, timeout, dry-run purity.

The probe jobs are handed to the runner as the job function (as ``mnemo_ops.jobs`` hands a job's
``run``), with the application's real hooks; the database, state dir, lock and holder process
are all real.
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mnemo_ops import database
from mnemo_ops.core import runner, state
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.database import transactions
from mnemo_ops.foundation.errors import DatabaseError, MnemoOpsError, UsageError
from mnemo_ops.jobs import HOOKS
from mnemo_ops.settings import load_settings
from tests.purity import assert_unchanged, sample_snapshot

HOLDER = """
import sys, time
from pathlib import Path
from mnemo_ops.core.lock import WriterLock
lock = WriterLock(Path(sys.argv[1]), "backup")
lock.acquire()
print("locked", flush=True)
time.sleep(60)
"""


def _insert_edge(ctx):
    """A probe job that writes one graph edge through a real BEGIN IMMEDIATE batch."""
    connection = ctx.open_db()
    ctx.count("edges_created")
    if ctx.dry_run:
        return ctx.result
    ctx.before_write()
    transactions.write_batch(
        connection,
        lambda conn: conn.execute(
            "INSERT INTO graph_edges (source, target, edge_type, weight, timestamp) "
            "VALUES ('probe-a', 'probe-b', 'probe', 1.0, '2026-11-30')"
        ),
    )
    connection.close()
    return ctx.result


def _edges(settings):
    connection = database.open_memory_db(settings.db_path, readonly=True)
    try:
        return connection.execute(
            "SELECT count(*) FROM graph_edges WHERE edge_type = 'probe'"
        ).fetchone()[0]
    finally:
        connection.close()


def test_real_run_writes_and_records(sample_settings):
    result = runner.run_job(
        sample_settings, "memory-maintain", _insert_edge, hooks=HOOKS, show_progress=False
    )
    assert result.status == "ok", result.error
    assert result.changes == {"edges_created": 1}
    assert _edges(sample_settings) == 1
    ledger = state.open_state(sample_settings.state_db_path)
    assert state.last_runs(ledger)["memory-maintain"]["status"] == "ok"


def test_dry_run_changes_nothing_and_records_nothing(sample, sample_settings):
    before = sample_snapshot(sample)
    result = runner.run_job(
        sample_settings,
        "memory-maintain",
        _insert_edge,
        hooks=HOOKS,
        dry_run=True,
        show_progress=False,
    )
    assert result.status == "dry-run" and result.changes == {"edges_created": 1}
    assert_unchanged(before, sample_snapshot(sample))
    assert not sample_settings.state_db_path.exists()


def test_held_lock_skips_with_exit_75_and_a_ledger_row(sample_settings):
    lock_path = lock_path_for(sample_settings.state_dir, sample_settings.db_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = runner.run_job(
            sample_settings, "memory-maintain", _insert_edge, hooks=HOOKS, show_progress=False
        )
        assert result.status == "skipped" and result.exit_code == 75
        assert result.stats["lock_holder"]["pid"] == holder.pid
        assert _edges(sample_settings) == 0
        # A dry run does not need the lock.
        assert (
            runner.run_job(
                sample_settings, "memory-maintain", _insert_edge, hooks=HOOKS, dry_run=True
            ).status
            == "dry-run"
        )
    finally:
        holder.kill()
        holder.wait()
    ledger = state.open_state(sample_settings.state_db_path)
    row = ledger.execute("SELECT status, exit_code, error FROM runs").fetchone()
    assert row[0] == "skipped" and row[1] == 75 and "holds the lock" in row[2]


@pytest.mark.heavy
def test_wait_takes_the_lock_when_the_holder_exits(sample_settings):
    lock_path = lock_path_for(sample_settings.state_dir, sample_settings.db_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER.replace("time.sleep(60)", "time.sleep(0.5)"), str(lock_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    result = runner.run_job(
        sample_settings,
        "memory-maintain",
        _insert_edge,
        hooks=HOOKS,
        wait_s=30,
        show_progress=False,
    )
    holder.wait()
    assert result.status == "ok" and _edges(sample_settings) == 1


def test_expected_failure_is_one_line_and_recorded(sample_settings):
    def failing(ctx):
        raise MnemoOpsError("the queue folder is not readable")

    result = runner.run_job(sample_settings, "bridge-drain", failing, hooks=HOOKS)
    assert result.status == "failed" and result.exit_code == 1
    assert result.error == "the queue folder is not readable"
    ledger = state.open_state(sample_settings.state_db_path)
    assert (
        json.loads(ledger.execute("SELECT result_json FROM runs").fetchone()[0])["status"]
        == "failed"
    )


def test_usage_error_inside_a_job_exits_2(sample_settings):
    def bad_option(ctx):
        raise UsageError("unknown option 'x'")

    assert runner.run_job(sample_settings, "bridge-drain", bad_option, hooks=HOOKS).exit_code == 2


def test_a_usage_check_refuses_before_the_lock_the_monitors_and_the_ledger(sample_settings):
    """A usage hook's refusal is not a run: it propagates (exit 2), the job never starts and the
    ledger holds no row; the same error raised by a job that started is a recorded failed run."""
    started = []

    def typo(ctx):
        raise UsageError("/no/such/file: suite file not found")

    def job(ctx):
        started.append(ctx.job)
        return ctx.result

    hooks = dataclasses.replace(HOOKS, usage=(typo,))
    with pytest.raises(UsageError, match="/no/such/file"):
        runner.run_job(sample_settings, "bridge-drain", job, hooks=hooks)
    assert started == []
    assert not sample_settings.state_db_path.exists() or _ledger_rows(sample_settings) == 0
    assert not lock_path_for(sample_settings.state_dir, sample_settings.db_path).exists()
    # A job that started and failed is recorded.
    runner.run_job(sample_settings, "bridge-drain", typo, hooks=HOOKS)
    assert _ledger_rows(sample_settings) == 1


def _ledger_rows(settings) -> int:
    ledger = state.open_state(settings.state_db_path)
    try:
        return ledger.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        ledger.close()


def test_crash_becomes_failed_result(sample_settings):
    def crashing(ctx):
        return {}["missing"]

    result = runner.run_job(sample_settings, "bridge-drain", crashing, hooks=HOOKS)
    assert result.status == "failed" and result.error.startswith("KeyError")


def test_timeout_from_config_stops_the_job(sample, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("jobs:\n  bridge-drain:\n    timeout: 1\n")
    settings = load_settings(
        db=sample.db_path, state_dir=sample.state_dir, config=config, environ=sample.environ()
    )

    def slow(ctx):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.05)

    result = runner.run_job(settings, "bridge-drain", slow, hooks=HOOKS)
    assert result.status == "failed" and "timed out" in result.error


def test_disabled_job_is_skipped_with_exit_0(sample, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("jobs:\n  bridge-drain:\n    enabled: false\n")
    settings = load_settings(
        db=sample.db_path, state_dir=sample.state_dir, config=config, environ=sample.environ()
    )
    result = runner.run_job(settings, "bridge-drain", _insert_edge, hooks=HOOKS)
    assert result.status == "skipped" and result.exit_code == 0
    assert (
        runner.run_job(settings, "bridge-drain", _insert_edge, hooks=HOOKS, force=True).status
        == "ok"
    )


def test_bad_database_raises_before_the_job(sample, tmp_path):
    settings = load_settings(
        db=tmp_path / "missing.db", state_dir=tmp_path / "state", environ=sample.environ()
    )
    with pytest.raises(DatabaseError):
        runner.run_job(settings, "memory-maintain", _insert_edge, hooks=HOOKS)
    assert not (tmp_path / "state").exists()


def test_prometheus_textfile(sample, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(f"monitoring:\n  prometheus_textfile_dir: {tmp_path / 'prom'}\n")
    settings = load_settings(
        db=sample.db_path, state_dir=sample.state_dir, config=config, environ=sample.environ()
    )
    runner.run_job(settings, "memory-maintain", _insert_edge, hooks=HOOKS)
    text = (tmp_path / "prom" / "mnemo_ops_memory_maintain.prom").read_text()
    assert 'mnemo_ops_last_success_timestamp_seconds{job="memory-maintain"}' in text
    assert 'mnemo_ops_last_changes{job="memory-maintain",change="edges_created"} 1' in text
    assert not [p for p in (tmp_path / "prom").iterdir() if p.name.endswith(".tmp")]


def test_unreachable_ping_never_fails_the_job(sample, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("jobs:\n  memory-maintain:\n    ping_url: http://127.0.0.1:9/ping\n")
    settings = load_settings(
        db=sample.db_path, state_dir=sample.state_dir, config=config, environ=sample.environ()
    )
    result = runner.run_job(settings, "memory-maintain", _insert_edge, hooks=HOOKS)
    assert result.status == "ok"
    assert any(w.code == "ping-failed" and w.severity == "info" for w in result.warnings)


def test_every_job_is_implemented_and_one_without_its_module_exits_2(sample, monkeypatch):
    """All nine jobs have their module now; a job whose module is missing (a partial install, or a
    job listed before it is written) is a usage error naming the job, before anything opens."""
    from mnemo_ops import jobs
    from mnemo_ops.core.manifests import JobManifest
    from mnemo_ops.settings import JOB_NAMES

    assert jobs.implemented_jobs() == list(JOB_NAMES)
    monkeypatch.setattr(
        JobManifest, "module", property(lambda manifest: "mnemo_ops.jobs.not_written_yet")
    )
    with pytest.raises(UsageError, match="'memory-block-migrate' is not implemented yet"):
        jobs.load_job("memory-block-migrate")
    assert not (sample.state_dir / "state.db").exists()


def test_a_preflight_check_refuses_the_run_before_the_job_writes(sample_settings):
    def refuse(ctx):
        if not ctx.dry_run:
            raise UsageError("refused before the first write")

    hooks = runner.RunHooks(checkpoint=HOOKS.checkpoint, preflight=(refuse,))
    result = runner.run_job(sample_settings, "memory-maintain", _insert_edge, hooks=hooks)
    assert result.exit_code == 2 and result.error == "refused before the first write"
    assert _edges(sample_settings) == 0
    dry = runner.run_job(
        sample_settings, "memory-maintain", _insert_edge, hooks=hooks, dry_run=True
    )
    assert dry.status == "dry-run"


def _write_until_stopped(ctx):
    """A probe job: one committed batch, then SIGTERM to itself, then batches until stopped."""
    connection = ctx.open_db()
    ctx.before_write()
    ctx.enter_stage("probe-batches")
    try:
        for number in range(50):
            transactions.write_batch(
                connection,
                lambda conn, number=number: conn.execute(
                    "INSERT INTO graph_edges (source, target, edge_type, weight, timestamp) "
                    "VALUES (?, 'probe-b', 'probe', 1.0, '2026-11-30')",
                    (f"probe-{number}",),
                ),
            )
            ctx.count("edges_created")
            if number == 0:
                os.kill(os.getpid(), signal.SIGTERM)  # the process goes on to the next safe point
    finally:
        connection.close()
    return ctx.result


def test_sigterm_stops_at_a_safe_point_records_the_stage_and_releases_the_lock(sample_settings):
    # bridge-drain writes the database with no guard: the probe runs on the live file at once.
    result = runner.run_job(
        sample_settings, "bridge-drain", _write_until_stopped, hooks=HOOKS, show_progress=False
    )
    assert result.status == "interrupted" and result.exit_code == 143
    assert result.stats["interrupted"] == {"signal": "SIGTERM", "stage": "probe-batches"}
    assert result.changes == {"edges_created": 1} and _edges(sample_settings) == 1
    assert [w.code for w in result.warnings if w.code == "run-interrupted"] == ["run-interrupted"]
    ledger = state.open_state(sample_settings.state_db_path)
    row = state.last_runs(ledger)["bridge-drain"]
    assert (row["status"], row["exit_code"]) == ("interrupted", 143)
    assert "during probe-batches" in row["error"]
    # The lock was released, and the process' own SIGTERM handling is back.
    lock = WriterLock(lock_path_for(sample_settings.state_dir, sample_settings.db_path), "probe")
    lock.acquire()
    lock.release()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_sigterm_in_the_recall_guards_trial_names_the_trials_stage(sample_settings):
    # memory-maintain runs under the recall guard: the probe first runs (and is stopped) on the
    # trial copy, so the live database never sees a write.
    result = runner.run_job(
        sample_settings, "memory-maintain", _write_until_stopped, hooks=HOOKS, show_progress=False
    )
    assert result.status == "interrupted" and result.exit_code == 143
    assert result.stats["interrupted"]["stage"] == "recall-guard trial, probe-batches"
    assert _edges(sample_settings) == 0
