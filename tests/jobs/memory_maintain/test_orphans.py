"""The matcher's hits are FTS5's own bm25 ranking of the row's whole query, in each index."""

from __future__ import annotations

import sqlite3

import apsw

from devtools.samples.synthetic_memories import add_synthetic_memories
from mnemo_ops.database.fts_query import match_expression
from mnemo_ops.foundation.clock import local_timestamp
from mnemo_ops.jobs.memory_maintain.orphans import QUERY_TERMS, LinkOptions, Matcher


def _fts5_ranking(connection, table: str, id_column: str, query: str, limit: int) -> list[tuple]:
    """(id, score) of the top `limit` matches by FTS5's own ``ORDER BY rank`` (the reference)."""
    return connection.execute(
        f"SELECT {id_column}, bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT ?",
        (query, limit),
    ).fetchall()


def test_hits_are_fts5s_ranking_of_the_whole_query_with_each_index_asked_only_its_terms(sample):
    """Per-index queries (only the terms that index holds) and SQLite's top-N sort give FTS5's hits."""
    add_synthetic_memories(sample.db_path, 600, seed=3)
    connection = sqlite3.connect(sample.db_path)
    with connection:
        # Terms only an episodic summary holds, and terms only working rows hold, in one row's query.
        connection.execute(
            "INSERT INTO episodic_memory (id, content, source, importance) VALUES "
            "('epqx1', 'quixotic marmoset lantern', 'consolidation', 0.6)"
        )
        connection.execute(
            "INSERT INTO episodic_memory (id, content, source, importance) VALUES "
            "('epqx2', 'quixotic marmoset', 'consolidation', 0.6)"
        )
        for number in range(3):
            connection.execute(
                "INSERT INTO working_memory (id, content, source, importance) VALUES (?, ?, ?, ?)",
                (
                    f"wqx{number}",
                    "quixotic walrus trombone lantern " * (number + 1),
                    "conversation",
                    0.5,
                ),
            )
    connection.close()
    reader = apsw.Connection(str(sample.db_path), flags=apsw.SQLITE_OPEN_READONLY)
    matcher = Matcher(reader, LinkOptions(), local_timestamp())
    rows = reader.execute("SELECT id, content FROM working_memory ORDER BY id").fetchall()
    matcher.prime([content for _, content in rows])
    compared = restricted = ties = 0
    for _, content in rows:
        terms = matcher.terms_for(content)
        whole = match_expression(terms, max_terms=QUERY_TERMS)
        if whole is None:
            continue
        for vocabulary, table, id_column, hits in (
            (matcher.working_vocabulary, "fts_working", "id", matcher._working_ranked),
            (matcher.episode_vocabulary, "fts_episodes", "rowid", matcher._episode_hits),
        ):
            own = matcher._query_in(vocabulary, terms)
            for limit in (matcher.fetch, 40):
                expected = _fts5_ranking(reader, table, id_column, whole, limit)
                if table == "fts_episodes":  # the matcher reports episodic ids, not FTS rowids
                    expected = [
                        (
                            reader.execute(
                                "SELECT id FROM episodic_memory WHERE rowid = ?", (rowid,)
                            ).fetchone()[0],
                            score,
                        )
                        for rowid, score in expected
                    ]
                actual = [hit[:2] for hit in hits(own, limit)] if own else []
                # The matcher orders its hits by (score, id); FTS5's ties come in rowid order.
                assert sorted(actual, key=lambda hit: (hit[1], hit[0])) == sorted(
                    expected, key=lambda hit: (hit[1], hit[0])
                ), (content, table, limit)
                compared += 1
                ties += len({score for _, score in expected}) < len(expected)
            restricted += own is not None and own != whole
    reader.close()
    assert compared > 1000
    assert restricted > 0  # some rows had a term one index does not hold
    assert ties > 0  # and equal scores were among the hits, so the tie order was checked


def test_liveness_of_a_batch_of_hits_is_read_as_the_join_reads_it(sample):
    """`_live_working`: 1 for live rows, 0 for closed or superseded ones, nothing for unknown ids."""
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.executemany(
            "INSERT INTO working_memory (id, content, source, importance, superseded_by, valid_until) "
            "VALUES (?, 'x', 'conversation', 0.5, ?, ?)",
            [
                ("livea", None, None),
                ("liveb", None, "2999-01-01T00:00:00"),
                ("closed", None, "2001-01-01T00:00:00"),
                ("superseded", "livea", None),
            ],
        )
    connection.close()
    reader = apsw.Connection(str(sample.db_path), flags=apsw.SQLITE_OPEN_READONLY)
    matcher = Matcher(reader, LinkOptions(), local_timestamp())
    ids = ["livea", "liveb", "closed", "superseded", "unknown"] + [
        f"pad{number}" for number in range(1200)
    ]
    assert matcher._live_working(ids) == {"livea": 1, "liveb": 1, "closed": 0, "superseded": 0}
    reader.close()
