"""The safe repairs monthly-maintenance applies, each in short ``BEGIN IMMEDIATE`` batches.

Every repair re-checks its condition inside its own transaction (the live agent may have changed the
row since the audit), so running it twice, or after a kill, does nothing new. Nothing here deletes a
memory row: closures stamp ``valid_until``; the only DELETEs touch FTS index entries, which are index
data re-derived from the rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import apsw

from mnemo_ops.database import transactions
from mnemo_ops.jobs.monthly_maintenance.checks import Closure, FtsWorkingPlan, reconcile_fts_entries

BATCH_SIZE = 500
EMBEDDING_BATCH_SIZE = 64


def rebuild_fts(connection: apsw.Connection, table: str) -> None:
    """FTS5 ``rebuild``: re-derive the index from its content (external table, or its own copy)."""
    transactions.write_batch(
        connection,
        lambda conn: conn.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'rebuild\')'),
        label=f"{table} rebuild",
    )


def _reconcile_batch(connection: apsw.Connection, ids: list[str]) -> dict[str, int]:
    counts = {"added": 0, "removed": 0, "reindexed": 0}
    marks = ",".join("?" * len(ids))
    entries: dict[str, list[tuple[int, Any]]] = {memory_id: [] for memory_id in ids}
    # One scan of fts_working per batch: its id column is UNINDEXED, so a lookup per id would be a scan each.
    for memory_id, rowid, text in connection.execute(
        f"SELECT CAST(id AS TEXT), rowid, content FROM fts_working WHERE CAST(id AS TEXT) IN ({marks})",
        tuple(ids),
    ):
        entries[memory_id].append((rowid, text))
    # working_memory.id has TEXT affinity, so a plain comparison uses its primary-key index.
    contents = dict(
        connection.execute(
            f"SELECT id, content FROM working_memory WHERE id IN ({marks})", tuple(ids)
        )
    )
    for memory_id in ids:
        deletions, insert, kind = reconcile_fts_entries(
            sorted(entries[memory_id]), contents.get(memory_id)
        )
        for rowid in deletions:
            connection.execute("DELETE FROM fts_working WHERE rowid = ?", (rowid,))
        if insert:
            connection.execute(
                "INSERT INTO fts_working(id, content) SELECT id, content FROM working_memory "
                "WHERE id = ?",
                (memory_id,),
            )
        if kind is not None:
            counts[kind] += len(deletions) if kind == "removed" else 1
    return counts


def reconcile_fts_working(
    connection: apsw.Connection,
    plan: FtsWorkingPlan,
    advance: Callable[[int], None] = lambda n: None,
) -> dict[str, int]:
    """Bring fts_working in line with working_memory for the planned ids; return what was done."""
    totals = {"added": 0, "removed": 0, "reindexed": 0}
    if plan.null_id_rowids:

        def remove_null_ids(conn: apsw.Connection) -> int:
            removed = 0
            for rowid in plan.null_id_rowids:
                conn.execute("DELETE FROM fts_working WHERE rowid = ? AND id IS NULL", (rowid,))
                removed += conn.changes()
            return removed

        totals["removed"] += transactions.write_batch(
            connection, remove_null_ids, label="fts_working null ids"
        )
    for batch in transactions.batched(plan.ids, BATCH_SIZE):
        counts = transactions.write_batch(
            connection,
            lambda conn, batch=batch: _reconcile_batch(conn, batch),
            label="fts_working reconcile",
        )
        for name, value in counts.items():
            totals[name] += value
        advance(len(batch))
    return totals


def apply_closures(connection: apsw.Connection, closures: list[Closure]) -> int:
    """Stamp valid_until on rows that are still open; return how many were closed."""

    def close(conn: apsw.Connection, closure: Closure) -> int:
        conn.execute(
            f'UPDATE "{closure.table}" SET valid_until = ? WHERE id = ? AND valid_until IS NULL',
            (closure.valid_until, closure.row_id),
        )
        return conn.changes()

    # Transactions sized by time (database.transactions), each closure re-checked inside its own.
    return sum(transactions.write_items(connection, closures, close, label="closures"))


def reembed_working_rows(
    connection: apsw.Connection,
    memory_ids: list[str],
    embedder,
    advance: Callable[[int], None] = lambda n: None,
    batch_size: int = EMBEDDING_BATCH_SIZE,
) -> tuple[int, str | None]:
    """Embed rows that still lack a vector and store them in memory_embeddings.

    Returns (rows stored, None) or, when the model fails part-way, (rows stored before, the error):
    the batches already written stay, the rest waits for the next run.

    The model runs outside any transaction (it can be slow); each batch's write is short and skips
    rows that gained a vector meanwhile. Mnemosyne mirrors memory_embeddings into vec_working itself
    (``_backfill_vec_working_from_memory_embeddings`` at start-up), so the fallback store is the one
    to fill.
    """
    stored = 0
    for batch in transactions.batched(memory_ids, batch_size):
        marks = ",".join("?" * len(batch))
        rows = list(
            connection.execute(
                f"SELECT w.id, w.content FROM working_memory w WHERE w.id IN ({marks}) "
                "AND NOT EXISTS (SELECT 1 FROM memory_embeddings m WHERE m.memory_id = w.id)",
                tuple(batch),
            )
        )
        if rows:
            try:
                vectors = embedder.embed([content for _, content in rows])
            except (RuntimeError, ValueError, OSError) as error:
                return stored, str(error)

            def store(conn: apsw.Connection, rows=rows, vectors=vectors) -> int:
                written = 0
                for (memory_id, _), vector_json in zip(rows, vectors):
                    conn.execute(
                        "INSERT INTO memory_embeddings (memory_id, embedding_json, model) SELECT ?, ?, ? "
                        "WHERE EXISTS (SELECT 1 FROM working_memory WHERE id = ?) "
                        "AND NOT EXISTS (SELECT 1 FROM memory_embeddings WHERE memory_id = ?)",
                        (memory_id, vector_json, embedder.model, memory_id, memory_id),
                    )
                    written += conn.changes()
                return written

            stored += transactions.write_batch(connection, store, label="embeddings")
        advance(len(batch))
    return stored, None


ANALYSIS_LIMIT = 1000
"""Rows ANALYZE reads per index (``PRAGMA analysis_limit``): approximate statistics in bounded time."""

SKIPPED_WITHOUT_STATISTICS = (
    "skipped: the database has no sqlite_stat1 yet, and creating it changes the schema, which the "
    "live agent's next write does not survive"
)


def has_statistics(connection: apsw.Connection) -> bool:
    """True when the database already holds ``sqlite_stat1`` (so ANALYZE only updates rows in it)."""
    return (
        connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'"
        ).fetchone()
        is not None
    )


def refresh_statistics(connection: apsw.Connection) -> bool | str:
    """``PRAGMA optimize`` in one short, metered write transaction; True, or why it was skipped.

    The first ANALYZE of a database creates ``sqlite_stat1`` (and ``sqlite_stat4``): a schema
    change, and the live agent's next write after a schema change may fail at once (docs/live-agent.md,
    "No schema changes"). So statistics are only refreshed where they already exist. ANALYZE reads
    every row of every index it refreshes and holds the write lock meanwhile, so it reads at most
    ANALYSIS_LIMIT rows per index, and runs through `transactions.write_batch` (BEGIN IMMEDIATE,
    timed against the bound, retried on busy).
    """
    if not has_statistics(connection):
        return SKIPPED_WITHOUT_STATISTICS
    connection.execute(f"PRAGMA analysis_limit = {ANALYSIS_LIMIT}").fetchall()
    try:
        transactions.write_batch(
            connection, lambda conn: conn.execute("PRAGMA optimize").fetchall(), label="optimize"
        )
    except apsw.BusyError:  # the live agent kept the write lock past the busy timeout: next month
        return "skipped: database busy"
    return True


@dataclasses.dataclass
class Upkeep:
    """The upkeep after the repairs (``stats.maintenance``).

    - `optimize`: ``refresh_statistics``'s answer (True, or why it was skipped);
    - `fts_merge_steps`: per FTS5 table, the 'merge' steps run (or why merging stopped);
    - `wal_checkpoint`: ``PRAGMA wal_checkpoint(PASSIVE)``'s ``busy``, ``log_frames`` and
      ``checkpointed_frames``;
    - `vacuum`: VACUUM ran (only with ``--vacuum``).
    """

    optimize: bool | str
    fts_merge_steps: dict[str, int | str]
    wal_checkpoint: dict[str, int]
    vacuum: bool = False

    def to_stats(self) -> dict[str, Any]:
        """``stats.maintenance`` (``vacuum`` only when it ran)."""
        stats: dict[str, Any] = {
            "optimize": self.optimize,
            "fts_merge_steps": self.fts_merge_steps,
            "wal_checkpoint": self.wal_checkpoint,
        }
        if self.vacuum:
            stats["vacuum"] = True
        return stats


def optimize(
    connection: apsw.Connection, fts_tables: list[str], merge_pages: int, max_steps: int
) -> Upkeep:
    """PRAGMA optimize, FTS5 'merge' in bounded steps (each its own short transaction), WAL checkpoint.

    A 'merge' step that changes fewer than 2 rows found nothing left to merge (FTS5 documentation).
    """
    optimized = refresh_statistics(connection)
    merges: dict[str, int | str] = {}
    for table in fts_tables:

        def merge(conn: apsw.Connection, table: str = table) -> int:
            before = conn.total_changes()
            conn.execute(
                f'INSERT INTO "{table}"("{table}", rank) VALUES (\'merge\', ?)', (merge_pages,)
            )
            return conn.total_changes() - before

        steps = 0
        try:
            while steps < max_steps:
                steps += 1
                if transactions.write_batch(connection, merge, label=f"{table} merge") < 2:
                    break
            merges[table] = steps
        except apsw.BusyError:  # merging is an optimisation; a busy agent wins
            merges[table] = f"stopped after {steps - 1} steps: database busy"
    busy, log_frames, checkpointed = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return Upkeep(
        optimize=optimized,
        fts_merge_steps=merges,
        wal_checkpoint={
            "busy": busy,
            "log_frames": log_frames,
            "checkpointed_frames": checkpointed,
        },
    )


def vacuum(connection: apsw.Connection) -> None:
    """VACUUM (only with --vacuum: it rewrites the whole file and blocks writers while it runs)."""
    connection.execute("VACUUM")
