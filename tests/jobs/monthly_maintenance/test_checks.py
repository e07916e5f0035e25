"""The integrity checks (``integrity.checks``) on damage made by hand in a database the real Mnemosyne
wrote: what they find, what they plan, and what they leave alone."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from mnemo_ops import database
from mnemo_ops.jobs.monthly_maintenance.checks import (
    Audit,
    canonical_duplicates,
    dangling_graph_edges,
    reconcile_fts_entries,
)

GONE_ID = "0123456789abcdef"
"""A memory id in Mnemosyne's shape whose row does not exist."""


def damage(db: Path, *statements: tuple) -> None:
    """Plain SQL through Python's sqlite3 (what Mnemosyne itself uses), committed and closed."""
    with closing(sqlite3.connect(db)) as connection, connection:
        for statement in statements:
            connection.execute(*statement)


def audit_of(db: Path, check, *arguments) -> Audit:
    """Run one check on a read-only connection; the audit it filled."""
    audit = Audit()
    connection = database.open_memory_db(db, readonly=True)
    try:
        check(connection, audit, database.table_names(connection), *arguments)
    finally:
        connection.close()
    return audit


def test_a_dangling_edge_is_found_and_a_free_form_node_is_not(sample):
    with closing(sqlite3.connect(sample.db_path)) as connection:
        kept = connection.execute("SELECT id FROM working_memory LIMIT 1").fetchone()[0]
    assert audit_of(sample.db_path, dangling_graph_edges).findings == []  # the sample is clean
    damage(
        sample.db_path,
        (
            "INSERT INTO graph_edges(source, target, edge_type, weight) VALUES (?, ?, 'rel', 1)",
            (GONE_ID, kept),
        ),
        (
            "INSERT INTO graph_edges(source, target, edge_type, weight) "
            "VALUES ('topic:garden', 'topic:frost', 'rel', 1)",
        ),
    )
    with closing(sqlite3.connect(sample.db_path)) as connection:
        dangling_id = connection.execute(
            "SELECT id FROM graph_edges WHERE source = ?", (GONE_ID,)
        ).fetchone()[0]
    audit = audit_of(sample.db_path, dangling_graph_edges)
    [finding] = audit.findings
    assert finding.code == "graph-dangling-edges" and finding.severity == "warning"
    assert f"edge ids {dangling_id})" in finding.message and "never removed" in finding.message
    assert audit.stats["graph_opaque_edges"] == 1  # an agent's own node name is not a memory


def test_two_current_rows_in_one_canonical_slot_are_found_and_the_older_closure_planned(sample):
    assert audit_of(sample.db_path, canonical_duplicates, True).findings == []
    damage(
        sample.db_path,
        ("DROP INDEX idx_canonical_current",),  # Mnemosyne's unique index would refuse the second
        (
            "INSERT INTO canonical_facts(owner_id, category, name, body, source, version, valid_from) "
            "VALUES ('default', 'identity', 'name', 'Dana', 'user', 1, '2026-01-01T10:00:00')",
        ),
        (
            "INSERT INTO canonical_facts(owner_id, category, name, body, source, version, valid_from) "
            "VALUES ('default', 'identity', 'name', 'Dana R.', 'user', 2, '2026-05-01T10:00:00')",
        ),
    )
    with closing(sqlite3.connect(sample.db_path)) as connection:
        older, newer = [
            row[0]
            for row in connection.execute(
                "SELECT id FROM canonical_facts WHERE name = 'name' ORDER BY version"
            )
        ]
    dry = audit_of(sample.db_path, canonical_duplicates, True)
    [finding] = dry.findings
    assert finding.code == "canonical-duplicate-current" and finding.severity == "error"
    assert "would be closed" in finding.message
    [closure] = dry.canonical_closures
    # The older row is closed where the newer one begins; the newer stays current.
    assert (closure.table, closure.row_id, closure.valid_until) == (
        "canonical_facts",
        older,
        "2026-05-01T10:00:00",
    )
    assert newer not in {closure.row_id for closure in dry.canonical_closures}
    [real] = audit_of(sample.db_path, canonical_duplicates, False).findings
    assert "older rows closed at the newer one's valid_from" in real.message


@pytest.mark.parametrize(
    ("entries", "content", "expected"),
    [
        ([], "text", ([], True, "added")),
        ([(1, "text")], "text", ([], False, None)),
        ([(1, "old")], "text", ([1], True, "reindexed")),
        ([(1, "text"), (2, "text")], "text", ([2], False, "removed")),
        ([(1, "old"), (2, "text")], "text", ([1], False, "removed")),
        ([(1, "ghost")], None, ([1], False, "removed")),
        ([], None, ([], False, None)),
    ],
)
def test_reconcile_fts_entries(entries, content, expected):
    assert reconcile_fts_entries(entries, content) == expected
