"""Why no write transaction of ours may reach the agent's busy timeout (docs/contracts.md).

Mnemosyne 3.15's ``remember`` runs a dedup SELECT, then an INSERT for which Python's sqlite3 opens
a deferred transaction. When another connection holds the write lock past the 5 s busy timeout,
the INSERT fails and that transaction is left open: Mnemosyne never rolls it back. Its next dedup
SELECT takes a read snapshot inside it, and from then on every INSERT fails at once (SQLite will
not upgrade a stale snapshot to a write) whenever anyone has committed since. This test pins the
upstream behaviour the transaction bound exists for: one long transaction, then short commits, and
the agent keeps failing immediately. If Mnemosyne fixes it, this test says so: 4.0 did (its
``remember`` ends the failed transaction), so on 4.0 the agent's writes after the long transaction
succeed, which this test asserts there instead.
"""

import json
import subprocess
import sys
import time

import apsw

from mnemo_ops.mnemosyne import versions

CASCADES = versions.installed_line() == "3.15"
"""3.15 leaves the failed transaction open; 4.0 rolls it back (measured on 4.0.0b6)."""

AGENT = r"""
import json, sys, time
from pathlib import Path
from mnemosyne.core.memory import Mnemosyne
memory = Mnemosyne(session_id="cascade", db_path=Path(sys.argv[1]))
deadline = time.time() + float(sys.argv[2])
outcomes = []
Path(sys.argv[3]).write_text("1")
number = 0
while time.time() < deadline:
    number += 1
    started = time.perf_counter()
    try:
        memory.remember(f"cascade note {number}", source="conversation", importance=0.3)
        outcome = "ok"
    except Exception as error:
        outcome = str(error)
    outcomes.append([time.time(), outcome, (time.perf_counter() - started) * 1000,
                     memory.beam.conn.in_transaction])
    time.sleep(0.02)
print(json.dumps(outcomes))
"""


def test_one_transaction_past_the_busy_timeout_leaves_mnemosyne_failing(sample, tmp_path):
    started_flag = tmp_path / "started"
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(sample.db_path), "12", str(started_flag)],
        env=sample.environ(),
        stdout=subprocess.PIPE,
        text=True,
    )
    while not started_flag.exists():
        time.sleep(0.05)
    time.sleep(0.5)
    connection = apsw.Connection(str(sample.db_path))
    connection.set_busy_timeout(5000)
    insert = (
        "INSERT INTO graph_edges (source, target, edge_type, weight, timestamp) "
        "VALUES ('cascade-a', 'cascade-b', 'test', 1, 'now')"
    )
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(insert)
    time.sleep(5.6)  # past the agent's 5 s busy timeout
    connection.execute("COMMIT")
    released = time.time()
    for _ in range(20):  # then short commits, as any well-behaved writer makes them
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(insert)
        connection.execute("COMMIT")
        time.sleep(0.1)
    connection.close()
    outcomes = json.loads(agent.communicate(timeout=60)[0])
    timed_out = [o for o in outcomes if o[1] != "ok" and o[2] >= 4900]
    after = [o for o in outcomes if o[0] > released + 0.2]
    assert timed_out, "no write waited out the busy timeout"
    if not CASCADES:  # 4.0: the agent recovers once the long transaction is over
        assert after and all(o[1] == "ok" and not o[3] for o in after), after[:3]
        return
    assert after and all("locked" in o[1] for o in after), after[:3]
    assert all(o[2] < 1000 for o in after)  # failing at once, not waiting
    assert all(o[3] for o in after)  # inside the transaction Mnemosyne never ended
