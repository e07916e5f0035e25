"""FTS5 segments: how many an index has, and merging them in bounded steps beside the live agent.

An FTS5 index is a set of b-tree segments; every lookup (a MATCH, a row of an ``fts5vocab``
table) reads each segment that may hold the term. The agent's one-row transactions each add a
small segment, and FTS5's automerge only folds them together level by level, so a busy index
keeps tens of segments. On 100k realistic rows with 25 segments, 3,000 vocabulary lookups took
0.24 CPU seconds, and 0.03 after merging them into one (1,000 single-term MATCH queries: 0.18 and
0.04); linking makes such lookups for every orphan, so its cost per orphan follows the segment
count more than the row count.

``INSERT INTO fts(fts, rank) VALUES('merge', -N)`` writes about N pages of merged segments and
returns; a negative N merges across levels too (so the index can reach one segment). Each step
runs in its own short ``BEGIN IMMEDIATE`` transaction (`transactions.write_batch`: timed against
the bound, retried on busy, followed by the agent's share), so the agent's writes go on between
steps. A merge rewrites index pages only: the rows and what every query returns stay the same.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

import apsw

from mnemo_ops.database import transactions

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass
class MergeOutcome:
    """What merging one FTS5 table did: segments before and after, steps and their lock time."""

    table: str
    segments_before: int
    segments_after: int
    steps: int = 0
    seconds: float = 0.0
    stopped: str | None = None
    """Why the merging stopped before one segment: ``"step cap"`` or ``"database busy"``."""

    def to_stats(self) -> dict[str, Any]:
        """The outcome for a result's stats."""
        return {
            "segments_before": self.segments_before,
            "segments_after": self.segments_after,
            "steps": self.steps,
            "seconds": round(self.seconds, 2),
            "stopped": self.stopped,
        }


def _checked(table: str) -> str:
    if not _PLAIN_NAME.fullmatch(table):
        raise ValueError(f"not a plain table name: {table}")
    return table


def segment_count(connection: apsw.Connection, table: str) -> int:
    """The segments of FTS5 table `table` (its ``%_idx`` table holds rows for each segment)."""
    name = _checked(table)
    return connection.execute(f'SELECT count(DISTINCT segid) FROM "{name}_idx"').fetchone()[0]


def merge_segments(
    connection: apsw.Connection, table: str, pages: int, max_steps: int
) -> MergeOutcome:
    """Merge `table`'s segments towards one, `pages` pages a step, at most `max_steps` steps.

    Stops when a step finds nothing left to merge (it changes fewer than 2 rows of the shadow
    tables, as FTS5 documents), after `max_steps` (the next run goes on), or when the agent keeps
    the write lock past the busy timeout (merging is an optimisation; the agent wins).
    """
    name = _checked(table)
    outcome = MergeOutcome(name, segment_count(connection, name), 0)

    def step(conn: apsw.Connection) -> int:
        before = conn.total_changes()
        conn.execute(f'INSERT INTO "{name}"("{name}", rank) VALUES (\'merge\', ?)', (-pages,))
        return conn.total_changes() - before

    started = time.monotonic()
    try:
        while True:
            if outcome.steps >= max_steps:
                outcome.stopped = "step cap"
                break
            outcome.steps += 1
            if transactions.write_batch(connection, step, label=f"{name} merge") < 2:
                break
    except apsw.BusyError:
        outcome.stopped = "database busy"
    outcome.seconds = time.monotonic() - started
    outcome.segments_after = segment_count(connection, name)
    return outcome
