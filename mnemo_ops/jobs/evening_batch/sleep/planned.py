"""Closings planned in ``sleep_archive`` written to the memory database (forgetting and contradictions).

A stage records what it will close in state.db first (``applied`` 0, with the values before), then
writes it here in short batches: each batch is one write transaction on the memory database, and
each entry is then marked written (1), or given up (-1) when its row changed since the plan. A run
killed between the two leaves planned entries, which the next run writes first, so nothing recorded
is lost and nothing is written twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from mnemo_ops.database import transactions
from mnemo_ops.jobs.evening_batch.sleep import store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun

BATCH = 200
"""Entries per write transaction."""


def apply_planned(
    run: SleepRun,
    state_db,
    connection: apsw.Connection,
    reason: str,
    write: Callable[[apsw.Connection, list[dict[str, Any]]], dict[int, Any]],
    label: str,
) -> tuple[list[Any], int]:
    """Write every planned entry of `reason` (this run's, or one a killed run recorded and never wrote).

    `write(conn, batch)` makes a batch's changes inside its transaction and returns, by entry id,
    what it wrote, or None for an entry whose row changed since the plan. Written entries leave
    ``sleep_memories`` live = 0 (dirty, for the next prominence pass). Returns (what each written
    entry wrote, how many entries were given up).
    """
    planned = list(
        store.rows(
            state_db,
            f"SELECT * FROM {store.ARCHIVE} WHERE reason = ? AND applied = ? ORDER BY id",
            (reason, store.PLANNED),
        )
    )
    written, abandoned = [], 0
    for batch in store.chunks(planned, BATCH):
        run.before_write()
        outcome = transactions.write_batch(
            connection, lambda conn, batch=batch: write(conn, batch), label=label
        )
        with state_db.conn:
            for entry in batch:
                result = outcome[entry["id"]]
                state_db.conn.execute(
                    f"UPDATE {store.ARCHIVE} SET applied = ? WHERE id = ?",
                    (store.ABANDONED if result is None else store.APPLIED, entry["id"]),
                )
                if result is None:
                    abandoned += 1
                    continue
                written.append(result)
                state_db.conn.execute(
                    f"UPDATE {store.MEMORIES} SET live = 0, dirty = 1 WHERE memory_key = ?",
                    (entry["memory_key"],),
                )
    return written, abandoned
