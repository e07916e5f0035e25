"""Lineage, the one definition of "derived from": summaries, metadata, derives edges and promoted
canonical facts, on a conversation home written by the real Mnemosyne (rows of our own kinds added
the way the sleep stages and the canonical trigger add them)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from mnemo_ops import database
from mnemo_ops.database import lineage


@pytest.fixture
def home(hermes_home):
    """A private copy of the tests' Hermes conversation home (``tests/conftest.py``)."""
    return hermes_home


def _user_rows(db_path, count: int) -> list[str]:
    connection = sqlite3.connect(db_path)
    try:
        return [
            row[0]
            for row in connection.execute(
                "SELECT id FROM working_memory WHERE content LIKE '[USER]%' ORDER BY id LIMIT ?",
                (count,),
            )
        ]
    finally:
        connection.close()


def _add_derived_rows(db_path, a: str, b: str, c: str, d: str) -> None:
    """A summary of `a`, a distilled row of `b`, a summary linked to `c` by an edge only, a
    canonical fact promoted from `d` and `a`, a closed summary of `b`, and a row distilled from
    the summary of `a` (two steps from `a`)."""
    connection = sqlite3.connect(db_path)
    with connection:
        connection.executemany(
            "INSERT INTO episodic_memory (id, content, source, timestamp, summary_of, valid_until) "
            "VALUES (?, ?, 'sleep-nrem', '2026-11-01T00:00:00', ?, ?)",
            [
                ("summary-of-a", "A summary.", f"{a},elsewhere", None),
                ("summary-by-edge", "A summary linked by an edge.", "", None),
                ("closed-summary", "A closed summary.", b, "2026-11-02T00:00:00"),
            ],
        )
        connection.executemany(
            "INSERT INTO working_memory (id, content, source, timestamp, metadata_json) "
            "VALUES (?, ?, 'fact', '2026-11-01T00:00:00', ?)",
            [
                ("distilled-b", "A distilled fact.", json.dumps({"derived_from": [b]})),
                (
                    "distilled-twice",
                    "From the summary.",
                    json.dumps({"derived_from": "summary-of-a"}),
                ),
            ],
        )
        connection.execute(
            "INSERT INTO graph_edges (source, target, edge_type) VALUES ('summary-by-edge', ?, ?)",
            (c, lineage.DERIVES_EDGE),
        )
        connection.execute(
            "INSERT INTO canonical_facts (owner_id, category, name, body, source, valid_from) "
            "VALUES ('dana', 'auto:fact', 'shoes', 'The shoes cost 447 euros.', ?, '2026-11-01')",
            (f"auto:{d},{a}",),
        )
    connection.close()


def test_every_kind_of_lineage_is_read_and_followed_transitively(home):
    a, b, c, d = _user_rows(home.db_path, 4)
    _add_derived_rows(home.db_path, a, b, c, d)
    connection = database.open_memory_db(home.db_path, readonly=True)
    try:
        derived = lineage.derivations(connection)
    finally:
        connection.close()
    fact = lineage.canonical_name("dana", "auto:fact", "shoes")
    assert derived[a] == {"summary-of-a", fact}
    assert derived[b] == {"distilled-b"}  # the closed summary carries nothing
    assert derived[c] == {"summary-by-edge"}
    assert derived[d] == {fact}
    assert lineage.derived_from_any(derived, [a]) == {"summary-of-a", "distilled-twice", fact}
    assert lineage.derived_from_any(derived, ["no-such-row"]) == set()


def test_auto_sources_read_every_origin_of_a_promoted_fact():
    assert lineage.auto_sources("auto:0a1b,2c3d") == ["0a1b", "2c3d"]
    assert lineage.auto_sources("auto:0a1b") == ["0a1b"]
    assert lineage.auto_sources("manual") == []
    assert lineage.split_ids(["x", " y ", ""]) == ["x", "y"]
