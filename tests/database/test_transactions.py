"""Write transactions sized by time and timed (issue 20), on a real SQLite file."""

import threading
import time

import apsw

from mnemo_ops.database import transactions


def _table(tmp_path) -> apsw.Connection:
    connection = apsw.Connection(str(tmp_path / "t.db"))
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("CREATE TABLE items (n INTEGER PRIMARY KEY)")
    return connection


def test_write_items_commits_by_time_in_order_and_records_every_transaction(tmp_path):
    connection = _table(tmp_path)
    policy = transactions.Policy(target_s=0.02, max_s=10.0, agent_share=0.0)

    def slow_insert(conn, number):
        conn.execute("INSERT INTO items VALUES (?)", (number,))
        time.sleep(0.008)  # a row that costs 8 ms: about three fit in 20 ms
        return number * 2

    with transactions.metered(policy) as meter:
        results = transactions.write_items(connection, list(range(30)), slow_insert, label="t")
    assert results == [number * 2 for number in range(30)]
    assert [row[0] for row in connection.execute("SELECT n FROM items ORDER BY n")] == list(
        range(30)
    )
    # Not one 30-row transaction: several, each stopped by the clock (at least one row each).
    assert 2 <= meter.count <= 30
    assert meter.longest_label == "t"
    stats = meter.to_stats()
    assert stats["count"] == meter.count and stats["longest_write_transaction_ms"] > 0
    assert stats["over_bound"] == 0
    connection.close()


def test_a_transaction_past_the_bound_is_counted_and_the_agent_gets_its_pause(tmp_path):
    connection = _table(tmp_path)
    policy = transactions.Policy(target_s=0.05, max_s=0.001, agent_share=0.5)

    def slow(conn):
        conn.execute("INSERT INTO items VALUES (1)")
        time.sleep(0.01)

    with transactions.metered(policy) as meter:
        started = time.monotonic()
        transactions.write_batch(connection, slow, label="slow")
        elapsed = time.monotonic() - started
    assert meter.over_bound == 1
    # share 0.5: a pause as long as the transaction held the lock.
    assert meter.paused_s >= meter.longest_s > 0.01
    assert elapsed >= 2 * 0.01
    connection.close()


def test_busy_is_retried_whole_and_counted(tmp_path):
    connection = _table(tmp_path)
    connection.set_busy_timeout(0)  # fail at once while the other writer holds the lock
    holder = apsw.Connection(str(tmp_path / "t.db"))
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.1, lambda: holder.execute("ROLLBACK"))
    release.start()
    policy = transactions.Policy(target_s=0.05, max_s=1.0, agent_share=0.0)
    with transactions.metered(policy) as meter:
        transactions.write_batch(
            connection, lambda conn: conn.execute("INSERT INTO items VALUES (1)")
        )
    release.join()
    assert meter.busy_retries >= 1
    assert meter.count == 1
    assert connection.execute("SELECT count(*) FROM items").fetchone()[0] == 1
    holder.close()
    connection.close()


def test_items_per_transaction_follow_the_commit_cost_the_clock_inside_cannot_see(tmp_path):
    """A commit that costs per dirtied row (as SQLite's does: every page the items touched is written
    at COMMIT) keeps transactions near the target: they are sized from the lock time per item of
    the previous one. Sized by the in-transaction clock alone, cheap inserts filled the 20 ms with
    every row and the commit then held the lock for 0.4 s."""
    connection = _table(tmp_path)
    policy = transactions.Policy(target_s=0.02, max_s=10.0, agent_share=0.0)
    pending = [0]
    committed: list[int] = []  # rows per commit

    def insert(conn, number):
        conn.execute("INSERT INTO items VALUES (?)", (number,))
        pending[0] += 1
        return number

    def slow_commit() -> bool:
        time.sleep(0.001 * pending[0])  # at least 1 ms per row at COMMIT
        committed.append(pending[0])
        pending[0] = 0
        return False  # let the commit go on

    connection.set_commit_hook(slow_commit)
    with transactions.metered(policy) as meter:
        results = transactions.write_items(connection, list(range(400)), insert, label="t")
    connection.set_commit_hook(None)
    assert results == list(range(400))
    assert connection.execute("SELECT count(*) FROM items").fetchone()[0] == 400
    assert sum(committed) == 400 and meter.count == len(committed)
    # The first takes FIRST_ITEMS rows; every later one at most what fits in 20 ms at >= 1 ms a
    # row, whatever the machine's load (a slower machine measures more per row, so fewer fit).
    assert committed[0] == transactions.FIRST_ITEMS
    assert max(committed) <= 20, committed
    connection.close()
