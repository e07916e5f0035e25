"""The ``builtin`` engine: FTS5 bm25 over live working and episodic rows (read-only, no snapshot).

Live means not closed (``valid_until`` unset or in the future) and not superseded. The MATCH
expression comes from ``database/fts_query.build_query`` (the query's salient terms by the working
index's own document frequencies, falling back to its first tokens when none is indexed), so no FTS5
syntax from a query reaches SQLite. Working and episodic hits are merged by bm25 score; ties go to the
smaller memory id, so the same database always yields the same ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops import __version__, database
from mnemo_ops.database import fts_query
from mnemo_ops.evaluation.engines.base import Query
from mnemo_ops.evaluation.metrics import Retrieved

QUERY_TERMS = 8


def _live_filter(connection: apsw.Connection, table: str, alias: str) -> str:
    """SQL conditions for rows that are still current, using only the columns this table has."""
    columns = set(database.column_names(connection, table))
    conditions = []
    if "valid_until" in columns:
        conditions.append(
            f"({alias}.valid_until IS NULL OR {alias}.valid_until = '' OR {alias}.valid_until > :now)"
        )
    if "superseded_by" in columns:
        conditions.append(f"({alias}.superseded_by IS NULL OR {alias}.superseded_by = '')")
    return " AND ".join(conditions) or "1"


class BuiltinEngine:
    """bm25 over ``fts_working`` and ``fts_episodes``."""

    name = "builtin"

    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)

    def version(self) -> str:
        """The mnemo-ops version (the ranking is ours)."""
        return f"mnemo-ops {__version__}"

    def describe(self) -> dict[str, Any]:
        """Name, version, options."""
        return {
            "name": self.name,
            "version": self.version(),
            "options": {"query_terms": QUERY_TERMS},
        }

    def _statements(self, connection: apsw.Connection) -> list[str]:
        tables = database.table_names(connection)
        statements = [
            "SELECT w.id, w.content, bm25(fts_working) AS score FROM fts_working "
            "JOIN working_memory AS w ON w.id = fts_working.id "
            f"WHERE fts_working MATCH :match AND {_live_filter(connection, 'working_memory', 'w')} "
            "ORDER BY score, w.id LIMIT :limit"
        ]
        if "fts_episodes" in tables and "episodic_memory" in tables:
            statements.append(
                "SELECT e.id, e.content, bm25(fts_episodes) AS score FROM fts_episodes "
                "JOIN episodic_memory AS e ON e.rowid = fts_episodes.rowid "
                f"WHERE fts_episodes MATCH :match AND {_live_filter(connection, 'episodic_memory', 'e')} "
                "ORDER BY score, e.id LIMIT :limit"
            )
        return statements

    def recall_many(self, queries: Sequence[Query], progress=None) -> list[list[Retrieved]]:
        """Run every query on one read-only connection (one consistent read per query)."""
        connection = database.open_memory_db(self.db_path, readonly=True)
        try:
            vocabulary = fts_query.Vocabulary(connection, "fts_working")
            statements = self._statements(connection)
            now = datetime.now().isoformat()
            results = []
            for query in queries:
                match = fts_query.build_query(
                    query.text, vocabulary, limit=QUERY_TERMS
                ) or fts_query.build_query(query.text, None, limit=QUERY_TERMS)
                rows: list[tuple[float, str, str]] = []
                if match:
                    bindings = {"match": match, "limit": query.k, "now": now}
                    for statement in statements:
                        rows.extend(
                            (score, memory_id, content)
                            for memory_id, content, score in connection.execute(statement, bindings)
                        )
                rows.sort(key=lambda row: (row[0], row[1]))
                results.append(
                    [
                        Retrieved(id=memory_id, content=content or "")
                        for _, memory_id, content in rows[: query.k]
                    ]
                )
                if progress:
                    progress(1)
            return results
        finally:
            connection.close()
