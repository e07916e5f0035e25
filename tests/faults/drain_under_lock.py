"""Run ``mnemo-ops ARGS`` in this process while another connection takes the real write lock at a chosen moment.

Usage: LOCK_AT=working_memory|memories|transaction python drain_under_lock.py ARGS...
The first time one of Mnemosyne's connections starts ``INSERT INTO working_memory`` (LOCK_AT=working_memory)
or ``INSERT OR REPLACE INTO memories`` (LOCK_AT=memories, i.e. after the working_memory row is committed),
or ``BEGIN IMMEDIATE`` (LOCK_AT=transaction: Mnemosyne 4.0 takes the write lock first and writes an item's
rows in that one transaction), a separate connection (Python's sqlite3, the same library as Mnemosyne's)
runs ``BEGIN IMMEDIATE``, so that statement waits out its busy timeout and fails with "database is
locked" as it would beside a live agent; the lock is released at the next statement (the drain rolling
the failed attempt back, or looking the item up again). Nothing is mocked: the trace callback only
picks the moment, the lock and the failure are SQLite's.
"""

import os
import runpy
import sqlite3
import sys

STATEMENTS = {
    "working_memory": "INSERT INTO working_memory",
    "memories": "INSERT OR REPLACE INTO memories",
    "transaction": "BEGIN IMMEDIATE",
}


def main() -> None:
    """Install the lock trigger on every sqlite3 connection Mnemosyne opens, then run the CLI."""
    target = STATEMENTS[os.environ["LOCK_AT"]]
    database = os.environ["MNEMO_OPS_TEST_DB"]
    state = {"holder": None, "fired": False}
    original_connect = sqlite3.connect

    def trace(statement: str) -> None:
        text = statement.strip()
        if not state["fired"] and text.startswith(target):
            state["fired"] = True
            holder = original_connect(database, timeout=5)
            holder.isolation_level = None
            holder.execute("BEGIN IMMEDIATE")
            state["holder"] = holder
        elif state["holder"] is not None:  # the statement that hit the lock has failed
            state["holder"].execute("ROLLBACK")
            state["holder"].close()
            state["holder"] = None

    def connect(*args, **kwargs):
        connection = original_connect(*args, **kwargs)
        if os.path.abspath(str(args[0] if args else kwargs.get("database"))) == os.path.abspath(
            database
        ):
            connection.set_trace_callback(trace)
        return connection

    sqlite3.connect = connect
    sys.argv = ["mnemo-ops", *sys.argv[1:]]
    runpy.run_module("mnemo_ops", run_name="__main__")


if __name__ == "__main__":
    main()
