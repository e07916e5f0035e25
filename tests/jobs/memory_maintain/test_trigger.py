"""The canonical promotion trigger, exercised through Mnemosyne's own API in a real subprocess.

Mnemosyne writes with Python's sqlite3 (SQLite 3.40 here), so that is the connection the trigger
must work in; install, status and uninstall go through the CLI.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import apsw
import pytest

from mnemo_ops.jobs.memory_maintain import trigger
from tests.purity import assert_unchanged, sample_snapshot

MNEMOSYNE_SCENARIO = r"""
import json, sys
from pathlib import Path
from mnemo_ops.mnemosyne.api import open_mnemosyne

memory = open_mnemosyne(Path(sys.argv[1]), session_id="trigger-test")
ids = {}
ids["fact"] = memory.remember("Dana keeps bees on the allotment every summer", source="user",
                              importance=0.9, veracity="stated")
ids["chat"] = memory.remember("We chatted about the rain over the allotment", source="conversation",
                              importance=0.9, veracity="stated")
ids["low"] = memory.remember("Dana sometimes drinks green tea in the afternoon", source="user",
                             importance=0.5, veracity="stated")
ids["inferred"] = memory.remember("Dana probably likes jazz records from the sixties", source="user",
                                  importance=0.9, veracity="inferred")
ids["again"] = memory.remember("Dana keeps bees on the allotment every summer", source="user",
                               importance=0.95, veracity="stated")
ids["after_again"] = [dict(row) for row in memory.conn.execute(
    "SELECT version, body FROM canonical_facts WHERE source = 'auto:' || ?", (ids["fact"],))]
assert memory.update(ids["fact"], content="Dana keeps two hives of bees on the allotment")
ids["superseded"] = memory.remember("Dana's allotment is plot twelve near the river", source="fact",
                                    importance=0.8, veracity="stated")
assert memory.invalidate(ids["superseded"], replacement_id=ids["fact"])
ids["forgotten"] = memory.remember("Dana's bicycle is a blue touring frame", source="user",
                                   importance=0.7, veracity="stated")
assert memory.forget(ids["forgotten"])
ids["recall"] = [row["id"] for row in memory.recall("bees allotment", top_k=5)]
print(json.dumps(ids))
"""


def _auto_rows(db_path, owner="dana"):
    connection = sqlite3.connect(db_path)
    connection.row_factory = sqlite3.Row
    rows = [
        dict(row)
        for row in connection.execute(
            "SELECT owner_id, category, name, body, source, confidence, version, valid_from, valid_until "
            "FROM canonical_facts WHERE owner_id = ? ORDER BY name, version",
            (owner,),
        )
    ]
    connection.close()
    return rows


def _run_scenario(sample) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", MNEMOSYNE_SCENARIO, str(sample.db_path)],
        env=sample.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_mnemosyne_writes_succeed_and_promote_by_the_rules(sample, cli):
    installed = cli("--json", "trigger", "install", "--owner", "dana")
    assert installed.returncode == 0, installed.stderr
    assert json.loads(installed.stdout)["action"] == "installed"

    ids = _run_scenario(sample)
    assert all(ids[name] for name in ("fact", "chat", "low", "inferred", "superseded", "forgotten"))
    assert ids["again"] == ids["fact"]
    # Repeating identical content (Mnemosyne's dedup update) neither fails nor adds a version.
    assert [row["version"] for row in ids["after_again"]] == [1]
    assert ids["fact"] in ids["recall"]

    rows = _auto_rows(sample.db_path)
    by_name: dict[str, list[dict]] = {}
    for row in rows:
        by_name.setdefault(row["name"], []).append(row)
    assert set(by_name) == {ids["fact"], ids["superseded"], ids["forgotten"]}

    first, second = by_name[ids["fact"]]
    assert (first["version"], second["version"]) == (1, 2)
    assert first["body"] == "Dana keeps bees on the allotment every summer" and first["valid_until"]
    assert (
        second["body"] == "Dana keeps two hives of bees on the allotment"
        and second["valid_until"] is None
    )
    # confidence = importance at promotion: v1 took 0.9, v2 the 0.95 the repeat raised it to.
    assert first["confidence"] == pytest.approx(0.9) and second["confidence"] == pytest.approx(0.95)
    assert second["source"] == f"auto:{ids['fact']}"
    assert second["category"].startswith("auto:") and first["category"] == second["category"]
    assert first["valid_from"] <= first["valid_until"]

    for closed in ("superseded", "forgotten"):
        (row,) = by_name[ids[closed]]
        assert row["version"] == 1 and row["valid_until"] is not None

    status = cli("--json", "trigger", "status")
    data = json.loads(status.stdout)
    assert data["installed"] and data["up_to_date"] and data["owner"] == "dana"
    assert data["current_auto_facts"] == 1 and data["closed_auto_facts"] == 3


def _look(db_path, work):
    """Run `work(connection)` on a fresh connection that is closed right after.

    No connection stays open across the purity snapshots: reading the database file with plain
    open()/close() in this process would drop the POSIX locks SQLite holds on it.
    """
    connection = apsw.Connection(str(db_path))
    try:
        return work(connection)
    finally:
        connection.close()


def _schema_objects(connection) -> set[str]:
    return {
        name
        for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('trigger','index')"
        )
    }


def _whole_schema(connection) -> str:
    return connection.execute("SELECT group_concat(sql, ';') FROM sqlite_master").fetchall()[0][0]


def test_install_is_idempotent_versioned_and_uninstall_removes_only_ours(sample, cli):
    before = sample_snapshot(sample)
    dry = cli("--json", "trigger", "install", "--dry-run")
    assert json.loads(dry.stdout)["action"] == "installed"
    assert_unchanged(before, sample_snapshot(sample))
    theirs = _look(sample.db_path, _schema_objects)

    assert json.loads(cli("--json", "trigger", "install").stdout)["owner"] == "default"
    schema_once = _look(sample.db_path, _whole_schema)
    assert json.loads(cli("--json", "trigger", "install").stdout)["action"] == "unchanged"
    assert _look(sample.db_path, _whole_schema) == schema_once
    assert (
        json.loads(cli("--json", "trigger", "install", "--owner", "o'brien").stdout)["action"]
        == "replaced"
    )
    assert _look(sample.db_path, trigger.status).owner == "o'brien"

    # An older version (as a previous mnemo-ops would have left it) is replaced in place.
    def downgrade(connection) -> None:
        for name in trigger.TRIGGER_NAMES:
            ((sql,),) = connection.execute(
                "SELECT sql FROM sqlite_master WHERE name = ?", (name,)
            ).fetchall()
            connection.execute(f"DROP TRIGGER {name}")
            connection.execute(sql.replace("version=1 ", "version=0 "))

    _look(sample.db_path, downgrade)
    old = _look(sample.db_path, trigger.status)
    assert old.complete and old.version == 0 and not old.up_to_date
    assert (
        json.loads(cli("--json", "trigger", "install", "--owner", "o'brien").stdout)["action"]
        == "replaced"
    )
    assert _look(sample.db_path, trigger.status).up_to_date

    removed = json.loads(cli("--json", "trigger", "uninstall").stdout)["removed"]
    assert sorted(removed) == sorted([*trigger.TRIGGER_NAMES, trigger.INDEX_NAME])
    assert _look(sample.db_path, _schema_objects) == theirs
    assert json.loads(cli("--json", "trigger", "uninstall").stdout)["removed"] == []
    bad = cli("trigger", "install", "--owner", "")
    assert bad.returncode == 2 and "owner" in bad.stderr


def test_trigger_never_makes_a_raw_write_fail(sample, cli):
    """Odd rows written straight through sqlite3 (as any Mnemosyne code path could) never fail."""
    assert cli("trigger", "install", "--owner", "dana").returncode == 0
    connection = sqlite3.connect(sample.db_path)
    # Someone else's current row already occupies the slot the trigger would use.
    connection.execute(
        "INSERT INTO canonical_facts (owner_id, category, name, body, source, valid_from) "
        "VALUES ('dana', 'auto:unknown', 'occupied0000000a', 'manual', 'manual', '2026-01-01')"
    )
    statements = [
        (
            "INSERT INTO working_memory (id, content, source, veracity, importance, memory_type) "
            "VALUES ('occupied0000000a', 'slot taken by a manual row', 'user', 'stated', 0.9, NULL)"
        ),
        (
            "INSERT INTO working_memory (id, content, source, veracity, importance) "
            "VALUES (NULL, 'a row with no id', 'user', 'stated', 0.9)"
        ),
        (
            "INSERT INTO working_memory (id, content, source, veracity, importance) "
            "VALUES ('blank00000000000', '   ', 'user', 'stated', 0.9)"
        ),
        (
            "INSERT INTO working_memory (id, content, source, veracity, importance, memory_type) "
            "VALUES ('nulltype00000000', 'a fact with no memory type', 'fact', 'stated', 0.7, NULL)"
        ),
        (
            "INSERT INTO working_memory (id, content, source, veracity, importance, valid_until) "
            "VALUES ('expired000000000', 'an already expired fact', 'user', 'stated', 0.9, '2000-01-01')"
        ),
        "UPDATE working_memory SET importance = NULL WHERE id = 'nulltype00000000'",
        "UPDATE working_memory SET content = 'a changed fact with no memory type' WHERE id = 'nulltype00000000'",
        "UPDATE working_memory SET id = 'renamed000000000' WHERE id = 'occupied0000000a'",
        "DELETE FROM working_memory WHERE id = 'blank00000000000'",
    ]
    for statement in statements:
        connection.execute(statement)
        connection.commit()
    rows = {
        (row[0], row[1]): row
        for row in connection.execute(
            "SELECT name, version, category, body, valid_until FROM canonical_facts WHERE owner_id = 'dana'"
        )
    }
    connection.close()
    # The manual row is untouched; the occupied slot was not promoted (and did not fail).
    assert rows[("occupied0000000a", 1)][3] == "manual" and rows[("occupied0000000a", 1)][4] is None
    # After the id change the row qualifies under its new id and gets its own lineage.
    assert rows[("renamed000000000", 1)][4] is None
    # NULL memory_type lands in auto:unknown; the content change closed v1, and with importance NULL
    # the row no longer qualifies, so there is no v2.
    assert (
        rows[("nulltype00000000", 1)][2] == "auto:unknown"
        and rows[("nulltype00000000", 1)][4] is not None
    )
    assert ("nulltype00000000", 2) not in rows
    assert not any(name in ("blank00000000000", "expired000000000") for name, _ in rows)


def test_trigger_sql_stays_within_sqlite_3_37():
    """The trigger runs in Mnemosyne's connections (SQLite 3.37+ on supported machines): no newer syntax."""
    code = "\n".join(
        line.split("--")[0] for line in trigger.render_sql("dana").splitlines()
    ).upper()
    for newer in (
        "->",
        "UNIXEPOCH(",
        "RETURNING",
        "STRICT",
        "OCTET_LENGTH(",
        "CONCAT(",
        "CONCAT_WS(",
        "UNISTR(",
        "FORMAT(",
        "TIMEDIFF(",
        "STRING_AGG(",
    ):
        assert newer not in code, newer
    # Every statement compiles in Python's sqlite3 on a Mnemosyne-shaped schema.
    connection = sqlite3.connect(":memory:")
    connection.executescript(
        "CREATE TABLE working_memory (id TEXT PRIMARY KEY, content TEXT NOT NULL, source TEXT, veracity TEXT, "
        "importance REAL, memory_type TEXT, valid_until TIMESTAMP, superseded_by TEXT);"
        "CREATE TABLE canonical_facts (id INTEGER PRIMARY KEY AUTOINCREMENT, owner_id TEXT NOT NULL, "
        "category TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, source TEXT, confidence REAL DEFAULT 1.0, "
        "version INTEGER NOT NULL DEFAULT 1, valid_from TEXT NOT NULL, valid_until TEXT, created_at TIMESTAMP);"
        "CREATE UNIQUE INDEX idx_canonical_current ON canonical_facts(owner_id, category, name) "
        "WHERE valid_until IS NULL;"
    )
    connection.executescript(trigger.render_sql("dana"))
    connection.execute(
        "INSERT INTO working_memory VALUES ('a', 'x y', 'user', 'stated', 0.9, 'fact', NULL, NULL)"
    )
    assert connection.execute("SELECT name, version FROM canonical_facts").fetchall() == [("a", 1)]
