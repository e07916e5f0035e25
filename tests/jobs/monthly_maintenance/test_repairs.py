"""The repairs of ``integrity.repairs``: re-embedding rows without a vector (with deterministic test
models), and the upkeep that must not change the schema beside the live agent."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import apsw

from mnemo_ops import database
from mnemo_ops.database import transactions
from mnemo_ops.jobs.monthly_maintenance import repairs


def working_ids(db: Path) -> list[str]:
    """The ids of the working rows, in order."""
    with closing(sqlite3.connect(db)) as connection:
        return [row[0] for row in connection.execute("SELECT id FROM working_memory ORDER BY id")]


class LetterCountEmbedder:
    """A deterministic test model: the vector is the counts of a few letters (stands in for fastembed)."""

    model = "test/letter-counts"

    def __init__(self):
        self.calls = 0

    def embed(self, texts: list[str]) -> list[str]:
        self.calls += 1
        return [json.dumps([float(text.count(letter)) for letter in "aeiou"]) for text in texts]


class FailingSecondCallEmbedder(LetterCountEmbedder):
    """A test model that fails on its second batch (a model server going away mid-run)."""

    def embed(self, texts: list[str]) -> list[str]:
        if self.calls == 1:
            raise RuntimeError("model server went away")
        return super().embed(texts)


def test_reembedding_fills_only_rows_without_vectors(sample):
    ids = working_ids(sample.db_path)
    with closing(sqlite3.connect(sample.db_path)) as writer, writer:
        writer.execute(
            "INSERT INTO memory_embeddings(memory_id, embedding_json, model) VALUES (?, '[9]', 'x')",
            (ids[0],),
        )
    connection = database.connect(sample.db_path)
    try:
        embedder = LetterCountEmbedder()
        stored = repairs.reembed_working_rows(connection, ids, embedder)
        again = repairs.reembed_working_rows(connection, ids, embedder)
        vectors = dict(
            connection.execute("SELECT memory_id, embedding_json FROM memory_embeddings")
        )
        contents = dict(connection.execute("SELECT id, content FROM working_memory"))
    finally:
        connection.close()
    assert stored == (len(ids) - 1, None) and again == (0, None)
    assert vectors[ids[0]] == "[9]"  # an existing vector is never replaced
    assert vectors[ids[1]] == json.dumps(
        [float(contents[ids[1]].count(letter)) for letter in "aeiou"]
    )


def test_reembedding_keeps_finished_batches_when_the_model_fails(sample):
    ids = working_ids(sample.db_path)
    connection = database.connect(sample.db_path)
    try:
        stored, error = repairs.reembed_working_rows(
            connection, ids, FailingSecondCallEmbedder(), batch_size=10
        )
        kept = connection.execute("SELECT count(*) FROM memory_embeddings").fetchone()[0]
        rest, none = repairs.reembed_working_rows(
            connection, ids, LetterCountEmbedder(), batch_size=10
        )
    finally:
        connection.close()
    assert (stored, error) == (10, "model server went away") and kept == 10
    assert (rest, none) == (len(ids) - 10, None)  # the next run embeds exactly the rest


def schema_version(connection: apsw.Connection) -> int:
    """The schema cookie: every connection re-reads the schema when it changes."""
    return connection.execute("PRAGMA schema_version").fetchone()[0]


def test_optimize_never_creates_the_statistics_tables_beside_the_agent(sample):
    connection = database.open_memory_db(sample.db_path)
    try:
        assert not repairs.has_statistics(connection)
        before = schema_version(connection)
        report = repairs.optimize(connection, ["fts_working"], 500, 5)
        # The first ANALYZE would create sqlite_stat1 and sqlite_stat4: a schema change.
        assert report.optimize == repairs.SKIPPED_WITHOUT_STATISTICS
        assert schema_version(connection) == before
        assert not repairs.has_statistics(connection)
    finally:
        connection.close()


def test_optimize_refreshes_statistics_that_exist_in_a_metered_transaction(sample):
    connection = database.open_memory_db(sample.db_path)
    try:
        connection.execute("ANALYZE")  # as a user would, with the agent stopped
        stale = "UPDATE sqlite_stat1 SET stat = '1 1' WHERE tbl = 'working_memory'"
        connection.execute(stale)
        before = schema_version(connection)
        for _ in range(3):  # PRAGMA optimize only analyses tables this connection has used
            connection.execute(
                "SELECT count(*) FROM working_memory WHERE session_id = 'x'"
            ).fetchall()
        with transactions.metered() as meter:
            report = repairs.optimize(connection, [], 500, 5)
        assert report.optimize is True
        assert schema_version(connection) == before  # rows of sqlite_stat1 only, no schema change
        assert meter.count >= 1 and meter.longest_label == "optimize"
    finally:
        connection.close()
