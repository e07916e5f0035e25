"""kill -9 in the middle of monthly-maintenance's repairs: the file stays consistent, the next run finishes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing

import apsw
import pytest

ROWS = 30_000


def count(db, sql: str) -> int:
    with closing(sqlite3.connect(db, timeout=30)) as connection:
        return connection.execute(sql).fetchone()[0]


@pytest.mark.slow
def test_killed_repair_leaves_a_consistent_file_and_the_next_run_finishes(sample):
    db = sample.db_path
    with closing(sqlite3.connect(db)) as connection:
        connection.executemany(
            "INSERT INTO working_memory(id, content, source, timestamp) VALUES (?, ?, 'import', '2026-01-01T00:00:00')",
            (
                (f"{index:016x}", f"imported note {index} about tomatoes and frost")
                for index in range(ROWS)
            ),
        )
        connection.execute("DELETE FROM fts_working")  # the whole working index lost
        connection.commit()
    total = count(db, "SELECT count(*) FROM working_memory")

    job = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "--json", "run", "monthly-maintenance"],
        env=sample.environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    killed = False
    deadline = time.monotonic() + 120
    while job.poll() is None and time.monotonic() < deadline:
        if (
            count(db, "SELECT count(*) FROM fts_working") >= 1000
        ):  # some batches committed, most not
            os.kill(job.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.01)
    job.wait(timeout=60)
    job.stdout.close()
    job.stderr.close()
    if not killed:
        pytest.skip("the repair finished before it could be interrupted on this machine")
    indexed = count(db, "SELECT count(*) FROM fts_working")
    assert 0 < indexed < total

    with closing(sqlite3.connect(db)) as connection:  # Mnemosyne's SQLite still reads a sound file
        assert connection.execute("PRAGMA quick_check").fetchone() == ("ok",)
    checker = apsw.Connection(str(db))
    checker.execute("INSERT INTO fts_working(fts_working, rank) VALUES ('integrity-check', 1)")
    checker.close()

    rerun = subprocess.run(
        [sys.executable, "-m", "mnemo_ops", "--json", "run", "monthly-maintenance"],
        env=sample.environ(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stderr
    result = json.loads(rerun.stdout)
    assert (
        result["changes"]["fts_entries_added"] == total - indexed
    )  # exactly the rest, nothing twice
    with closing(sqlite3.connect(db)) as connection:
        assert dict(connection.execute("SELECT id, content FROM fts_working")) == dict(
            connection.execute("SELECT id, content FROM working_memory")
        )
        assert connection.execute("SELECT count(*) FROM fts_working").fetchone()[0] == total
