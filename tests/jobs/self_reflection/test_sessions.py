"""Which sessions are due: the time base of the Mnemosyne line that stamped the rows."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from devtools.samples import reflection_week
from mnemo_ops import database
from mnemo_ops.jobs.self_reflection.sessions import gather, make_window, read_hermes_messages
from mnemo_ops.mnemosyne import versions


@pytest.fixture
def india(monkeypatch):
    """Local time UTC+05:30 for the test (POSIX TZ, no zone data needed)."""
    monkeypatch.setenv("TZ", "IST-05:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def add_rows(db_path, rows):
    """Working rows stamped as a 4.0 Mnemosyne stamps them (naive UTC), by SQL into its schema."""
    connection = database.connect(db_path)
    try:
        with connection:
            for memory_id, session_id, stamp in rows:
                connection.execute(
                    "INSERT INTO working_memory (id, content, source, timestamp, session_id, "
                    "importance, metadata_json, scope) VALUES (?, ?, 'conversation', ?, ?, 0.5, "
                    "'{}', 'global')",
                    (memory_id, f"I prefer tea in the {session_id} session.", stamp, session_id),
                )
    finally:
        connection.close()


def test_utc_stamps_are_read_in_local_time(sample, india):
    utc_now = datetime.now(UTC).replace(tzinfo=None)
    add_rows(
        sample.db_path,
        [
            ("aaaaaaaaaaaaaaa1", "going-on", (utc_now - timedelta(minutes=5)).isoformat()),
            ("aaaaaaaaaaaaaaa2", "finished", (utc_now - timedelta(hours=3)).isoformat()),
        ],
    )
    window = make_window(datetime.now(), 7, 2, None)
    connection = database.connect(sample.db_path, readonly=True)
    try:
        as_utc = gather(connection, None, window, line="4.0")
        as_local = gather(connection, None, window, line="3.15")
    finally:
        connection.close()
    due = [session.session_id for session in as_utc.sessions]
    assert "going-on" in as_utc.deferred and "finished" in due
    [finished] = [session for session in as_utc.sessions if session.session_id == "finished"]
    assert finished.last_activity == versions.local_time(
        (utc_now - timedelta(hours=3)).isoformat(), "4.0"
    )
    # Read as local time (3.15's base), the session still going on looks 5.5 h idle and is taken.
    assert "going-on" in [session.session_id for session in as_local.sessions]


def test_times_between_the_bases():
    moment = datetime(2026, 12, 1, 12, 0, 0)
    assert versions.memory_time(moment, "3.15") == "2026-12-01T12:00:00"
    assert versions.local_time("2026-12-01T12:00:00", "3.15") == "2026-12-01T12:00:00"
    utc_text = versions.memory_time(moment, "4.0")
    assert versions.local_time(utc_text, "4.0") == "2026-12-01T12:00:00"
    assert versions.local_time("not a time", "4.0") == "not a time"


HERMES = """
import sqlite3, sys, time, pathlib
connection = sqlite3.connect(sys.argv[1])
connection.execute(
    "INSERT INTO messages (session_id, role, content, timestamp) VALUES "
    "('late-night', 'user', 'I prefer dark mode in every editor.', ?)",
    (time.time() - 4 * 3600,),
)
connection.commit()
pathlib.Path(sys.argv[2]).write_text("open")
while not pathlib.Path(sys.argv[3]).exists():
    time.sleep(0.02)
connection.close()
"""


def test_hermes_store_read_immutable_when_closed_and_beside_a_running_hermes(tmp_path):
    store = tmp_path / "hermes" / "state.db"
    store.parent.mkdir()
    reflection_week.write_hermes_store(store, datetime.now())
    window = make_window(datetime.now(), 7, 2, None)
    closed = sorted(store.parent.iterdir())
    turns, report, _ = read_hermes_messages(store, window)
    assert report["read"] and report["mode"] == "immutable" and turns
    assert sorted(store.parent.iterdir()) == closed  # no -wal, no -shm left beside it

    # Hermes running (its connection open, its -wal there): read beside it, its new message seen.
    opened, stop = tmp_path / "opened", tmp_path / "stop"
    hermes = subprocess.Popen([sys.executable, "-c", HERMES, str(store), str(opened), str(stop)])
    try:
        deadline = time.monotonic() + 60
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        turns, report, _ = read_hermes_messages(store, window)
    finally:
        stop.write_text("stop")
        hermes.wait(timeout=30)
    assert report["read"] and report["mode"] == "read-only"
    assert "I prefer dark mode in every editor." in [turn.text for turn in turns]
