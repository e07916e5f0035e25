"""Our WAL checkpoints run after a write transaction, never inside the COMMIT it is timed by."""

import apsw

from mnemo_ops import database
from mnemo_ops.database import transactions, wal


def _database(tmp_path):
    path = tmp_path / "t.db"
    setup = apsw.Connection(str(path))
    setup.execute("PRAGMA journal_mode = WAL")
    setup.execute("CREATE TABLE items (n INTEGER PRIMARY KEY, body BLOB)")
    setup.close()
    return path


def _fill(rows: int):
    def work(connection):
        connection.execute(
            "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < ?) "
            "INSERT INTO items (body) SELECT randomblob(3000) FROM k",
            (rows,),
        )

    return work


def test_a_commit_that_makes_a_checkpoint_due_is_timed_without_it(tmp_path):
    connection = database.connect(_database(tmp_path))
    seen_when_timed = []
    policy = transactions.Policy(target_s=0.05, max_s=10.0, agent_share=0.0)
    with transactions.metered(policy) as meter:
        transactions.write_batch(
            connection,
            _fill(1500),  # ~1,500 pages of 4 KiB: past SQLite's 1,000-page checkpoint threshold
            label="fill",
            on_held=lambda held: seen_when_timed.append(wal.pending_pages(connection)),
        )
    # When the hold was measured the WAL still held every page: no checkpoint ran in the COMMIT
    # (SQLite's automatic one would have, and its time would have counted as holding the lock).
    assert seen_when_timed[0] >= wal.CHECKPOINT_PAGES
    # Then it ran, once, counted apart.
    assert meter.checkpoints == 1 and wal.pending_pages(connection) == 0
    assert meter.to_stats()["wal_checkpoints"] == 1
    # Passive and complete with no reader in the way: another connection finds nothing to copy.
    other = apsw.Connection(str(tmp_path / "t.db"))
    log_frames, checkpointed = other.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
    assert log_frames == checkpointed
    assert other.execute("SELECT count(*) FROM items").fetchone()[0] == 1500
    other.close()
    connection.close()


def test_a_small_commit_runs_no_checkpoint(tmp_path):
    connection = database.connect(_database(tmp_path))
    with transactions.metered() as meter:
        transactions.write_batch(connection, _fill(20), label="small")
        with transactions.immediate_transaction(connection):
            _fill(20)(connection)
    assert meter.checkpoints == 0
    assert 0 < wal.pending_pages(connection) < wal.CHECKPOINT_PAGES
    connection.close()


def test_immediate_transaction_checkpoints_after_its_commit(tmp_path):
    connection = database.connect(_database(tmp_path))
    with transactions.metered() as meter, transactions.immediate_transaction(connection):
        _fill(1500)(connection)
    assert meter.checkpoints == 1 and wal.pending_pages(connection) == 0
    connection.close()


def test_read_only_connections_get_no_hook(tmp_path):
    path = _database(tmp_path)
    reader = database.connect(path, readonly=True)
    assert wal.pending_pages(reader) == 0 and not wal.checkpoint_due(reader)
    reader.close()


CHECKPOINTER = """
import sys, time, apsw
connection = apsw.Connection(sys.argv[1])
connection.set_busy_timeout(5000)
connection.wal_autocheckpoint(0)
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    # A large commit of its own, then its checkpoint: long enough to overlap ours (the agent's
    # automatic checkpoint after a commit is the same thing).
    connection.execute(
        "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 800) "
        "INSERT INTO items (body) SELECT randomblob(3000) FROM k"
    )
    connection.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
"""


def test_a_checkpoint_running_elsewhere_does_not_fail_the_job(tmp_path):
    """The agent's own automatic checkpoint may run at the moment ours is due: SQLite answers
    SQLITE_BUSY at once (a CI run saw memory-maintain fail with "database is locked" from it)."""
    import subprocess
    import sys

    path = _database(tmp_path)
    connection = database.connect(path)
    other = subprocess.Popen([sys.executable, "-c", CHECKPOINTER, str(path), "60"])
    try:
        policy = transactions.Policy(target_s=0.05, max_s=10.0, agent_share=0.0)
        with transactions.metered(policy) as meter:
            for _ in range(40):
                transactions.write_batch(connection, _fill(1100), label="fill")
    finally:
        other.kill()
        other.wait()
    assert meter.count == 40
    assert connection.execute("SELECT count(*) FROM items").fetchone()[0] >= 40 * 1100
    connection.close()
