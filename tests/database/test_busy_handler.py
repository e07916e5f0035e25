"""A writable connection of ours gets the write lock from an agent that writes back to back.

The agent here is a real process on Python's sqlite3 that holds the write lock 300 ms at a time and
frees it for a couple of milliseconds between its transactions (Mnemosyne 4.0's remember, beside
memory-maintain, took ~96 ms a write, back to back). SQLite's own busy timeout sleeps up to 100 ms
between looks and so misses most of those gaps; ``database.connect``'s handler looks every
millisecond and finds one. The long hold keeps the verdict when a loaded machine stretches the
gaps: 100 ms looks still rarely land in one.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from mnemo_ops import database

GREEDY_WRITER = """
import sqlite3, sys, time
from pathlib import Path
connection = sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None)
stop = Path(sys.argv[2])
Path(sys.argv[3]).write_text("started")
number = 0
while not stop.exists():
    connection.execute("BEGIN IMMEDIATE")
    number += 1
    connection.execute("INSERT INTO notes (text) VALUES (?)", (f"note {number}",))
    time.sleep(0.3)
    connection.execute("COMMIT")
    time.sleep(0.002)
"""

WAIT_MS = 1000


@pytest.fixture
def greedy_writer(tmp_path):
    """The database and a running writer that frees the lock ~2 ms in every ~300 ms."""
    path = tmp_path / "busy.db"
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode = WAL")
    setup.execute("CREATE TABLE notes (text TEXT)")
    setup.close()
    stop, started = tmp_path / "stop", tmp_path / "started"
    writer = subprocess.Popen(
        [sys.executable, "-c", GREEDY_WRITER, str(path), str(stop), str(started)]
    )
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    yield path
    stop.write_text("stop")
    writer.wait(timeout=30)


def _takes_the_lock(connection: apsw.Connection) -> bool:
    # The writer first takes the lock back: right after our COMMIT it is still in its own busy
    # wait, and a try then would find the lock free whatever the handler.
    time.sleep(0.4)
    try:
        connection.execute("BEGIN IMMEDIATE")
    except apsw.BusyError:
        return False
    connection.execute("INSERT INTO notes (text) VALUES ('ours')")
    connection.execute("COMMIT")
    return True


@pytest.mark.e2e
def test_the_patient_handler_finds_the_gaps_sqlites_busy_timeout_misses(greedy_writer):
    # The harm: with SQLite's own busy timeout, waiting a second fails at least once in eight tries.
    plain = apsw.Connection(str(greedy_writer))
    plain.set_busy_timeout(WAIT_MS)
    plain_results = [_takes_the_lock(plain) for _ in range(8)]
    plain.close()
    assert not all(plain_results), "the writer left gaps wide enough for SQLite's own busy timeout"

    ours = apsw.Connection(str(greedy_writer))
    ours.set_busy_handler(database.patient_busy_handler(WAIT_MS))
    assert all(_takes_the_lock(ours) for _ in range(5))
    ours.close()


def test_the_patient_handler_still_gives_up_after_its_timeout(tmp_path):
    path = tmp_path / "held.db"
    # apsw for both: two SQLite libraries in one process do not see each other's locks.
    holder = apsw.Connection(str(path))
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("CREATE TABLE notes (text TEXT)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = apsw.Connection(str(path))
    waiter.set_busy_handler(database.patient_busy_handler(200))
    started = time.monotonic()
    with pytest.raises(apsw.BusyError):
        waiter.execute("BEGIN IMMEDIATE")
    assert time.monotonic() - started >= 0.2
    holder.execute("ROLLBACK")
    # The handler starts its clock again for the next wait: a free lock is taken at once.
    assert _takes_the_lock(waiter)
    waiter.close()
    holder.close()


def test_writable_connections_get_the_patient_handler(tmp_path: Path):
    path = tmp_path / "memory.db"
    sqlite3.connect(path).execute("CREATE TABLE notes (text TEXT)").connection.close()
    connection = database.connect(path)
    # A busy handler replaces the busy timeout, which then reads 0.
    assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 0
    connection.close()
    readonly = database.connect(path, readonly=True)
    assert readonly.execute("PRAGMA busy_timeout").fetchone()[0] == database.BUSY_TIMEOUT_MS
    readonly.close()
