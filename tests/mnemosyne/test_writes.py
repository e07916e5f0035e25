"""write_once: one Mnemosyne write, retried while the database is locked, never made twice."""

from __future__ import annotations

import sqlite3

import pytest

from mnemo_ops.mnemosyne import writes

LOCKED = sqlite3.OperationalError("database is locked")


@pytest.fixture
def database(tmp_path):
    """A database with working_memory and legacy memories rows, and two connections to it: one
    standing for Mnemosyne's (implicit transactions, as Mnemosyne opens it), one for the caller's."""
    path = tmp_path / "memory.db"
    setup = sqlite3.connect(path)
    setup.executescript(
        "CREATE TABLE working_memory (id TEXT PRIMARY KEY, content TEXT, source TEXT, "
        "timestamp TEXT, session_id TEXT, importance REAL, metadata_json TEXT);"
        "CREATE TABLE memories (id TEXT PRIMARY KEY, content TEXT NOT NULL, source TEXT, "
        "timestamp TEXT, session_id TEXT, importance REAL, metadata_json TEXT);"
    )
    setup.close()
    mnemosyne = sqlite3.connect(path)
    own = sqlite3.connect(path, isolation_level=None)
    yield mnemosyne, own
    mnemosyne.close()
    own.close()


def _rows(connection, table: str, content: str) -> list[str]:
    return [
        row[0]
        for row in connection.execute(f"SELECT id FROM {table} WHERE content = ?", (content,))
    ]


def _remember(connection, memory_id: str, content: str, fail_after_row: bool = False):
    """A remember as Mnemosyne 3.15 writes it: the working_memory row committed, then its legacy row
    (a lock error in between when `fail_after_row`)."""
    connection.execute(
        "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance, "
        "metadata_json) VALUES (?, ?, 'test', '2026-01-01T00:00:00', 's', 0.5, '{}')",
        (memory_id, content),
    )
    connection.commit()
    connection.execute(
        "INSERT INTO memories (id, content) SELECT id, content FROM working_memory WHERE id = ?",
        (memory_id,),
    )
    if fail_after_row:
        raise LOCKED
    connection.commit()
    return memory_id


def test_a_write_committed_before_its_lock_error_is_found_not_made_again(database):
    mnemosyne, own = database
    attempts, retries = [], []

    def write():
        attempts.append(1)
        return _remember(mnemosyne, f"m{len(attempts)}", "lesson", fail_after_row=True)

    written = writes.write_once(
        write,
        lambda: [mnemosyne],
        find=lambda: (_rows(own, "working_memory", "lesson") or [None])[0],
        on_retry=lambda: retries.append(1),
        backoff_s=0,
    )
    assert written == writes.Written(value=None, found="m1")
    assert len(attempts) == 1 and len(retries) == 1
    assert _rows(own, "working_memory", "lesson") == ["m1"]
    assert _rows(own, "memories", "lesson") == []  # rolled back: the caller repairs it
    assert not mnemosyne.in_transaction
    writes.repair_legacy_row(own, "m1")
    writes.repair_legacy_row(own, "m1")  # a row already there is left as it is
    assert _rows(own, "memories", "lesson") == ["m1"]


def test_a_write_rolled_back_by_its_lock_error_is_made_again_once(database):
    mnemosyne, own = database
    failures = [LOCKED, LOCKED]

    def write():
        mnemosyne.execute("INSERT INTO working_memory (id, content) VALUES ('m', 'fact')")
        if failures:
            raise failures.pop()
        mnemosyne.commit()
        return "m"

    written = writes.write_once(
        write,
        lambda: [mnemosyne, mnemosyne],  # named twice, ended once
        find=lambda: (_rows(own, "working_memory", "fact") or [None])[0],
        backoff_s=0,
    )
    assert written == writes.Written(value="m", found=None)
    assert _rows(own, "working_memory", "fact") == ["m"]


def test_transactions_left_open_are_committed_before_and_after_the_write(database):
    mnemosyne, own = database
    mnemosyne.execute("INSERT INTO working_memory (id, content) VALUES ('before', 'x')")

    def write():
        assert not mnemosyne.in_transaction  # what was pending was committed first
        mnemosyne.execute("INSERT INTO working_memory (id, content) VALUES ('after', 'y')")
        return "after"  # and its write left pending, as Mnemosyne may leave one

    assert writes.write_once(write, lambda: [mnemosyne], find=None).value == "after"
    assert not mnemosyne.in_transaction
    assert sorted(row[0] for row in own.execute("SELECT id FROM working_memory")) == [
        "after",
        "before",
    ]


def test_another_error_is_raised_at_once_and_a_lasting_lock_after_the_last_attempt(database):
    mnemosyne, _ = database
    calls = []

    def broken():
        calls.append(1)
        raise sqlite3.OperationalError("no such table: nowhere")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        writes.write_once(broken, lambda: [mnemosyne], find=lambda: None, backoff_s=0)
    assert len(calls) == 1

    def locked():
        calls.append(1)
        mnemosyne.execute("INSERT INTO working_memory (id, content) VALUES ('z', 'z')")
        raise LOCKED

    calls.clear()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        writes.write_once(locked, lambda: [mnemosyne], find=lambda: None, attempts=3, backoff_s=0)
    assert len(calls) == 3
    assert not mnemosyne.in_transaction
    assert mnemosyne.execute("SELECT count(*) FROM working_memory").fetchone()[0] == 0
