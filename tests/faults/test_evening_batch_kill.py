"""kill -9 in the middle of evening-batch: the DB stays consistent and the next run finishes the work."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta

from tests.conftest import copy_sample, run_cli


def _state(db_path):
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return {
            "working": connection.execute("SELECT count(*) FROM working_memory").fetchone()[0],
            "consolidated": connection.execute(
                "SELECT count(*) FROM working_memory WHERE consolidated_at IS NOT NULL"
            ).fetchone()[0],
            "claimed_open": connection.execute(
                "SELECT count(*) FROM working_memory WHERE consolidation_claimed_at IS NOT NULL "
                "AND consolidated_at IS NULL"
            ).fetchone()[0],
            "integrity": connection.execute("PRAGMA integrity_check").fetchone()[0],
            "fts": connection.execute("SELECT count(*) FROM fts_working").fetchone()[0],
        }
    finally:
        connection.close()


def _progress(db_path):
    """The two consolidation counts alone: cheap enough to poll every few milliseconds."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        consolidated, claimed_open = connection.execute(
            "SELECT count(consolidated_at), "
            "count(CASE WHEN consolidated_at IS NULL THEN consolidation_claimed_at END) "
            "FROM working_memory"
        ).fetchone()
    finally:
        connection.close()
    return {"consolidated": consolidated, "claimed_open": claimed_open}


def _add_old_turns(layout, sessions=40, per_session=60):
    """Old conversation turns (5 days back) so that consolidation takes long enough to be interrupted."""
    moment = (datetime.now() - timedelta(days=5)).isoformat()
    rows = [
        (
            f"{session:04x}{turn:012x}",
            f"turn {turn} of session {session}: we talked about the garden, "
            f"the photo server and the trip, detail number {session * per_session + turn}",
            "conversation",
            moment,
            f"old-session-{session}",
            0.4,
        )
        for session in range(sessions)
        for turn in range(per_session)
    ]
    connection = sqlite3.connect(layout.db_path)
    try:
        with connection:
            connection.executemany(
                "INSERT INTO working_memory (id, content, source, timestamp, session_id, "
                "importance) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
    finally:
        connection.close()


def _start(layout, config):
    return subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "--config", str(config), "-q", "run", "evening-batch"],
        env=layout.environ(),
        start_new_session=True,
    )


def test_kill_9_mid_evening_batch_then_rerun_completes(sample, sample_template, tmp_path):
    config = tmp_path / "config.yaml"
    # Claims of a killed sleep become reclaimable after this many seconds (default: an hour).
    config.write_text("evening_batch:\n  reclaim_stale_seconds: 1\n")
    _add_old_turns(sample)
    before = _state(sample.db_path)
    reference = copy_sample(sample_template, tmp_path / "reference")
    _add_old_turns(reference)
    started = time.monotonic()
    assert _start(reference, config).wait() == 0
    duration = time.monotonic() - started
    expected = _state(reference.db_path)["consolidated"]

    interrupted = 0
    for _attempt in range(6):
        if _state(sample.db_path)["consolidated"] == expected:
            break
        if _kill_once_it_writes(_start(sample, config), sample.db_path, expected, duration * 3):
            interrupted += 1
        middle = _state(sample.db_path)
        assert middle["integrity"] == "ok"
        assert middle["working"] == before["working"]  # nothing lost, whatever the moment
        assert middle["fts"] == middle["working"]
    time.sleep(1.2)  # let any claim left by a kill go stale
    final = run_cli(sample, "--json", "--config", str(config), "run", "evening-batch")
    assert final.returncode == 0, final.stderr
    assert json.loads(final.stdout)["status"] == "ok"
    after = _state(sample.db_path)
    assert after["integrity"] == "ok" and after["claimed_open"] == 0
    assert after["working"] == before["working"]
    # The same rows end up consolidated as in one uninterrupted run on a copy with the same rows.
    assert after["consolidated"] == expected
    assert interrupted >= 1, "no kill landed mid-consolidation: the test proved nothing"


def _kill_once_it_writes(process, db_path, expected, patience):
    """kill -9 the job the moment the live database shows consolidation under way.

    True when the kill left the work unfinished (fewer than `expected` rows consolidated).

    Watching the file rather than sleeping a fraction of a reference run: the recall guard first runs
    the batch on a trial copy, so a timed kill mostly lands in the trial, never in the live writes.
    """
    start = _progress(db_path)
    deadline = time.monotonic() + patience
    while process.poll() is None and time.monotonic() < deadline:
        now = _progress(db_path)
        if (
            now["consolidated"] != start["consolidated"]
            or now["claimed_open"] > start["claimed_open"]
        ):
            os.killpg(process.pid, signal.SIGKILL)  # the job and its Mnemosyne child together
            process.wait()
            return _progress(db_path)["consolidated"] < expected
        time.sleep(0.005)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return False
