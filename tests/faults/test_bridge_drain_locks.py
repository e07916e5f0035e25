"""bridge-drain beside a live agent: it changes no schema, keeps to one SQLite library on the database, and
retries an item whose write hits the lock, safely."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mnemo_ops.mnemosyne import versions

HELPER = Path(__file__).with_name("drain_under_lock.py")


def _schema_version(sample) -> int:
    connection = sqlite3.connect(sample.db_path)
    try:
        return connection.execute("PRAGMA schema_version").fetchone()[0]
    finally:
        connection.close()


def _bridge_rows(sample) -> list[tuple[str, str, int]]:
    """(key, id, has a legacy memories row) for every row the drain wrote."""
    connection = sqlite3.connect(sample.db_path)
    try:
        return connection.execute(
            "SELECT json_extract(w.metadata_json, '$._bridge.key'), w.id, "
            "EXISTS (SELECT 1 FROM memories AS m WHERE m.id = w.id) FROM working_memory AS w "
            "WHERE json_valid(w.metadata_json) AND json_extract(w.metadata_json, '$._bridge.key') IS NOT NULL"
        ).fetchall()
    finally:
        connection.close()


def test_a_drain_leaves_the_schema_untouched(sample, cli):
    # Mnemosyne's own initialisation drops and re-creates the wm_au trigger on every open: a schema
    # change that, beside the live agent, leaves the agent's connection failing with "database is locked".
    before = _schema_version(sample)
    result = json.loads(cli("--json", "run", "bridge-drain").stdout)
    assert result["changes"]["items_ingested"] == 3
    assert _schema_version(sample) == before


def test_an_older_schema_is_migrated_by_mnemosyne_and_said_so(sample, cli):
    connection = sqlite3.connect(sample.db_path)
    connection.executescript(
        "DROP TRIGGER wm_au; CREATE TRIGGER wm_au AFTER UPDATE ON working_memory BEGIN "
        "DELETE FROM fts_working WHERE id = old.id; "
        "INSERT INTO fts_working(id, content) VALUES (new.id, new.content); END;"
    )
    connection.close()
    result = json.loads(cli("--json", "run", "bridge-drain").stdout)
    assert result["status"] == "ok"
    assert [warning["code"] for warning in result["warnings"]] == ["bridge-schema-migration"]
    assert "trigger wm_au differs" in result["warnings"][0]["message"]
    connection = sqlite3.connect(sample.db_path)
    sql = connection.execute("SELECT sql FROM sqlite_master WHERE name = 'wm_au'").fetchone()[0]
    connection.close()
    assert "UPDATE OF content" in sql  # Mnemosyne's own migration ran


@pytest.mark.parametrize("lock_at", ["working_memory", "memories"])
def test_an_item_that_hits_the_lock_is_retried_exactly_once(sample, lock_at):
    helper_moment = lock_at
    if versions.installed_line() != "3.15":
        # 4.0's remember takes the write lock first (BEGIN IMMEDIATE) and writes the working_memory
        # row, its legacy row and the rest in that one transaction.
        if lock_at == "memories":
            pytest.skip(
                f"Mnemosyne {versions.installed_line()} writes an item in one transaction: "
                "no moment between its working_memory and memories rows"
            )
        helper_moment = "transaction"
    environ = sample.environ()
    environ.update(
        {
            "LOCK_AT": helper_moment,
            "MNEMO_OPS_TEST_DB": str(sample.db_path),
            "MNEMOSYNE_BUSY_TIMEOUT_MS": "200",
        }
    )
    completed = subprocess.run(
        [sys.executable, str(HELPER), "--json", "run", "bridge-drain"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(completed.stdout)
    assert result["status"] == "ok", (result.get("error"), completed.stderr)
    assert result["changes"]["items_ingested"] == 3
    assert result["stats"]["lock_retries"] == 1
    # Locked after the working_memory row was committed: the recheck finds the row, no second remember.
    assert result["stats"].get("lock_retries_found_stored", 0) == (
        1 if lock_at == "memories" else 0
    )
    rows = _bridge_rows(sample)
    keys = [key for key, _, _ in rows]
    assert len(keys) == 3 and len(set(keys)) == 3
    assert all(has_legacy for _, _, has_legacy in rows)


def test_apsw_is_closed_before_mnemosyne_opens_the_database(sample, tmp_path):
    # apsw bundles its own SQLite and Mnemosyne uses Python's: in one process they cannot see each
    # other's locks, so closing one deletes the WAL under the other (whose later writes are lost).
    log = tmp_path / "connections.json"
    environ = sample.environ()
    environ.update({"MNEMO_OPS_TEST_DB": str(sample.db_path), "CONNECTION_LOG": str(log)})
    completed = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("drain_connection_log.py")),
            "--json",
            "run",
            "bridge-drain",
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(completed.stdout)["changes"]["items_ingested"] == 3
    events = json.loads(log.read_text())
    first_sqlite3 = events.index(["sqlite3", "open"])  # Mnemosyne did open the database
    apsw_open = 0
    for library, event in events[:first_sqlite3]:
        if library == "apsw":
            apsw_open += 1 if event == "open" else -1
    assert apsw_open == 0
    assert ["apsw", "open"] not in events[first_sqlite3:]
