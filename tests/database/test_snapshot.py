"""The snapshot copy: a file copy inside one read transaction is a consistent database, also while
a live writer commits and checkpoints beside it; other journal modes go through the backup API."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import apsw

from mnemo_ops.database.snapshot import copy_file, copy_snapshot, fold_wal

WRITER = r"""
import random, sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
connection.execute("PRAGMA journal_mode=WAL")
connection.execute("PRAGMA wal_autocheckpoint=8")  # checkpoints all the time, during the copies
for table in ("pair_a", "pair_b"):
    connection.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v INTEGER, payload BLOB)")
    connection.execute(
        f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) "
        f"INSERT INTO {table} SELECT i, 0, randomblob(3000) FROM n"
    )
for table in ("pair_a", "pair_b"):  # one commit before the first copy: it holds something to count
    connection.execute(f"UPDATE {table} SET v = 1 WHERE id = 1")
print("ready", flush=True)
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    row = random.randint(1, 400)
    connection.execute("BEGIN IMMEDIATE")
    for table in ("pair_a", "pair_b"):  # pages rewritten in place, in both tables, per commit
        connection.execute(
            f"UPDATE {table} SET v = v + 1, payload = randomblob(3000) WHERE id = ?", (row,)
        )
    connection.execute("COMMIT")
"""


def _check(copy) -> int:
    connection = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        a = connection.execute("SELECT group_concat(v) FROM (SELECT v FROM pair_a ORDER BY id)")
        b = connection.execute("SELECT group_concat(v) FROM (SELECT v FROM pair_b ORDER BY id)")
        first, second = a.fetchone()[0], b.fetchone()[0]
        assert first == second, "the copy holds half of a transaction"
        return sum(int(value) for value in first.split(","))
    finally:
        connection.close()


def test_copy_beside_a_live_writer_is_consistent(sample, tmp_path):
    """Copies taken while a real writer process commits and checkpoints are whole transactions."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(sample.db_path), "60"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        counts = []
        for attempt in range(12):
            copy = tmp_path / f"copy-{attempt}.db"
            assert copy_snapshot(sample.db_path, copy) in ("reflink", "kernel", "stream")
            assert not (tmp_path / f"copy-{attempt}.db-wal").exists()  # the WAL was folded in
            counts.append(_check(copy))
            copy.unlink()
            time.sleep(0.05)
        assert writer.poll() is None, "the writer was blocked or failed"
        assert counts[-1] > counts[0] > 0, "the copies did not follow the writer"
    finally:
        writer.kill()
        writer.wait()


def test_rollback_journal_database_is_copied_by_the_backup_api(sample, tmp_path):
    """Only WAL databases are copied as files; a rollback-journal one goes through SQLite."""
    connection = apsw.Connection(str(sample.db_path))
    connection.execute("PRAGMA journal_mode=DELETE").fetchall()
    connection.close()
    copy = tmp_path / "copy.db"
    assert copy_snapshot(sample.db_path, copy) == "backup"
    reader = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert reader.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        reader.close()


def test_copy_file_is_byte_exact(tmp_path):
    """The plain byte copy (reflink, kernel or stream, whichever the filesystem offers)."""
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 5000)
    assert copy_file(source, tmp_path / "target.bin") in ("reflink", "kernel", "stream")
    assert (tmp_path / "target.bin").read_bytes() == source.read_bytes()


def test_fold_wal_moves_a_copied_wal_into_the_file(tmp_path):
    """A database copied with its WAL (as a hard link's folder holds them) keeps the WAL's rows once
    folded: the file alone then holds them, and no WAL is left beside it."""
    source = tmp_path / "live.db"
    writer = apsw.Connection(str(source))
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE memories(text TEXT)")
    writer.execute("INSERT INTO memories VALUES ('only in the WAL')")
    copy = tmp_path / "copy" / "live.db"
    copy.parent.mkdir()
    for suffix in ("", "-wal"):  # copied while the writer is open: the rows are in the WAL only
        copy_file(Path(f"{source}{suffix}"), Path(f"{copy}{suffix}"))
    writer.close()

    fold_wal(copy)

    assert not Path(f"{copy}-wal").exists() or Path(f"{copy}-wal").stat().st_size == 0
    alone = tmp_path / "alone.db"  # the file by itself, without any WAL beside it
    copy_file(copy, alone)
    reader = apsw.Connection(str(alone))
    try:
        assert reader.execute("SELECT text FROM memories").fetchall() == [("only in the WAL",)]
    finally:
        reader.close()
    fold_wal(alone)  # no WAL: nothing to do, and no WAL is made
    assert not Path(f"{alone}-wal").exists()
