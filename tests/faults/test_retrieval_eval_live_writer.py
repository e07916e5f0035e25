"""The eval coexists with the live agent: a writer inserting the whole time is never blocked or refused."""

import json
import subprocess
import sys
import textwrap

from mnemo_ops.foundation.resources import resource_dir

WRITER = textwrap.dedent("""
    import sqlite3, sys, time
    connection = sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None)
    written, deadline = 0, time.time() + float(sys.argv[2])
    while time.time() < deadline:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO working_memory (id, content, source, timestamp, session_id) "
                           "VALUES (?, ?, 'conversation', datetime('now'), 'live')",
                           (f"live{written:012d}", f"live agent note number {written}"))
        connection.execute("COMMIT")
        written += 1
        time.sleep(0.002)
    print(written)
""")


def test_eval_runs_while_a_writer_inserts(cli, sample):
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(sample.db_path), "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    suite = resource_dir("fixtures") / "eval" / "sample.jsonl"
    results = [
        cli("--json", "eval", "run", "--suite", str(suite), "--engine", engine, "--dry-run")
        for engine in ("mnemosyne", "builtin", "mnemosyne")
    ]
    output, errors = writer.communicate(timeout=60)
    assert writer.returncode == 0, errors  # never "database is locked"
    assert int(output) > 0
    for result in results:
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["stats"]["cases"] == 16
