"""Our edges in ``graph_edges``, and the nightly strengthening and downscaling of their weights.

**Which edges are ours.** Every edge type mnemo-ops writes begins with ``mnemo:``:

- ``mnemo:confirms``: restatement -> the original it confirms (weight: similarity / 100);
- ``mnemo:contradicts``: newer memory -> the older one it closed (weight 1);
- ``mnemo:derives``: NREM summary -> each source it was fused from;
- ``mnemo:extends``: REM seed -> the memory it was associated with.

Only these are strengthened and downscaled. Every other edge is Mnemosyne's or the agent's and is
never changed, ``related_to`` included: Mnemosyne's proactive linking (``MNEMOSYNE_PROACTIVE_LINKING``)
and the agent's graph tools write that type too, so an existing ``related_to`` edge cannot be told
apart from one orphan linking wrote.

**The nightly update** (once a night, SCM's Hebbian rule and synaptic downscaling): an edge whose two
ends were both active that day gains ``eta * I_a * I_b`` (I = importance, eta = ``hebbian_rate``
0.1), capped at 1; then every edge of ours is scaled by alpha = ``downscale`` (0.8) and floored at
``edge_floor`` (0.05). Weights stay in [floor, 1]; nothing is deleted; an edge already at the floor
that was not active is not written at all. A memory is active when it was written (its timestamp)
since the last sleep or confirmed tonight; two memories of one session are also co-active when that
session had a new memory since the last sleep.

Each batch's old and new weights are journaled in state.db (``sleep_edge_journal``) before the edges
are written, each write checks the weight is still the journaled one, and the night is marked done
only at the end: a run killed halfway, run again, scales every edge exactly once.
"""

from __future__ import annotations

import dataclasses

import apsw

from mnemo_ops.database import transactions
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.jobs.evening_batch.sleep import store
from mnemo_ops.jobs.evening_batch.sleep.context import EdgePass, SleepRun

OWNED_PREFIX = "mnemo:"
CONFIRMS = "mnemo:confirms"
CONTRADICTS = "mnemo:contradicts"
DERIVES = "mnemo:derives"
EXTENDS = "mnemo:extends"
STAGE = "edges"
BATCH = 500
EPSILON = 1e-12
OWNED_CONDITION = f"substr(edge_type, 1, {len(OWNED_PREFIX)}) = '{OWNED_PREFIX}'"
"""SQL for an edge of ours (case-sensitive, unlike LIKE)."""


def is_owned(edge_type: str | None) -> bool:
    """True for an edge type mnemo-ops writes (and so may reweight)."""
    return bool(edge_type) and str(edge_type).startswith(OWNED_PREFIX)


def insert_once(
    connection: apsw.Connection,
    source: str,
    target: str,
    edge_type: str,
    weight: float,
    timestamp: str,
) -> int:
    """Insert an edge of ours unless that (source, target, type) exists; return 1 when inserted."""
    if not is_owned(edge_type):
        raise ValueError(f"not an edge type of ours: {edge_type!r}")
    connection.execute(
        "INSERT INTO graph_edges (source, target, edge_type, weight, timestamp) "
        "SELECT ?1, ?2, ?3, ?4, ?5 WHERE NOT EXISTS (SELECT 1 FROM graph_edges "
        "WHERE source = ?1 AND target = ?2 AND edge_type = ?3)",
        (source, target, edge_type, weight, timestamp),
    )
    return connection.changes()


def updated_weight(
    weight: float | None,
    coactive: bool,
    importance_a: float | None,
    importance_b: float | None,
    rate: float,
    downscale: float,
    floor: float,
) -> float:
    """One night's weight: ``max(floor, min(1, w + [co-active] * rate * I_a * I_b) * downscale)``.

    Always within [floor, 1] (a floor above 1 is read as 1); a missing weight counts as 1 (Mnemosyne's
    column default).
    """
    floor = min(1.0, max(0.0, float(floor)))
    current = 1.0 if weight is None else min(1.0, max(0.0, float(weight)))
    if coactive:
        gain = max(0.0, rate) * _unit(importance_a) * _unit(importance_b)
        current = min(1.0, current + gain)
    return min(1.0, max(floor, current * min(1.0, max(0.0, downscale))))


def _unit(value: float | None) -> float:
    if value is None or value != value:
        return 0.0
    return min(1.0, max(0.0, float(value)))


@dataclasses.dataclass(frozen=True)
class EdgeUpdate:
    """One edge's planned change."""

    edge_id: int
    weight_before: float | None
    weight_after: float
    coactive: bool


def _endpoints(
    connection: apsw.Connection, ids: list[str]
) -> dict[str, tuple[float | None, str | None, str | None]]:
    """Memory id -> (importance, session, timestamp), working and episodic."""
    found: dict[str, tuple[float | None, str | None, str | None]] = {}
    for table in (store.EPISODIC, store.WORKING):
        for chunk in store.chunks(ids):
            for row in connection.execute(
                f"SELECT id, importance, session_id, timestamp FROM {table} "
                f"WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                found[row[0]] = (row[1], row[2], row[3])
    return found


def plan(run: SleepRun, connection: apsw.Connection, state_db, skip: set[int]) -> list[EdgeUpdate]:
    """Tonight's change of every edge of ours not in `skip` (read-only)."""
    owned = connection.execute(
        f"SELECT id, source, target, weight FROM graph_edges WHERE {OWNED_CONDITION} ORDER BY id"
    ).fetchall()
    owned = [edge for edge in owned if edge[0] not in skip]
    if not owned:
        return []
    since = run.since.isoformat()
    points = _endpoints(connection, sorted({end for edge in owned for end in edge[1:3]}))
    active_sessions = {
        row[0]
        for table in (store.WORKING, store.EPISODIC)
        for row in connection.execute(
            f"SELECT DISTINCT session_id FROM {table} WHERE timestamp > ?", (since,)
        )
    }
    confirmed = {
        store.split_key(key)[1]
        for row in state_db.conn.execute(
            f"SELECT restatement_key, original_key FROM {store.CONFIRMATIONS} WHERE night = ?",
            (run.night.key,),
        )
        for key in (row[0].split("@", 1)[0], row[1])
    }

    def active(memory_id: str) -> bool:
        point = points.get(memory_id)
        return memory_id in confirmed or bool(point and point[2] and point[2] > since)

    updates = []
    options = run.options
    for edge_id, source, target, weight in owned:
        first, second = points.get(source), points.get(target)
        same_session = bool(
            first and second and first[1] is not None and first[1] == second[1]
        ) and (first[1] in active_sessions)
        coactive = (active(source) and active(target)) or same_session
        after = updated_weight(
            weight,
            coactive,
            first[0] if first else None,
            second[0] if second else None,
            options.hebbian_rate,
            options.downscale,
            options.edge_floor,
        )
        if weight is None or abs(after - float(weight)) > EPSILON:
            updates.append(EdgeUpdate(edge_id, weight, after, coactive))
    return updates


def nightly_update(run: SleepRun) -> EdgePass:
    """Strengthen and downscale our edges once tonight (module docstring); counts what it wrote."""
    totals = EdgePass()
    try:
        _nightly_update(run, totals)
    finally:
        run.count("edges_strengthened", totals.strengthened)
        run.count("edges_downscaled", totals.downscaled)
    return totals


def _nightly_update(run: SleepRun, totals: EdgePass) -> None:
    state_db = run.open_state()
    connection = run.open_memory()
    try:
        if store.stage_done(state_db, run.night.key, STAGE):
            totals.done_before = True
            return
        journaled = {
            row["edge_id"]: row
            for row in store.rows(
                state_db,
                f"SELECT * FROM {store.EDGE_JOURNAL} WHERE night = ?",
                (run.night.key,),
            )
        }
        fresh = plan(run, connection, state_db, skip=set(journaled))
        totals.planned = len(fresh) + len(journaled)
        # What a killed run journaled first (it may be written already), then tonight's new plan.
        resumed = [
            EdgeUpdate(
                row["edge_id"], row["weight_before"], row["weight_after"], bool(row["coactive"])
            )
            for row in journaled.values()
        ]
        for batch in store.chunks(sorted(resumed, key=lambda item: item.edge_id), BATCH):
            _apply(run, connection, batch, totals)
        for batch in store.chunks(fresh, BATCH):
            run.before_write()
            with state_db.conn:
                state_db.conn.executemany(
                    f"INSERT OR IGNORE INTO {store.EDGE_JOURNAL} (night, edge_id, weight_before, "
                    "weight_after, coactive) VALUES (?, ?, ?, ?, ?)",
                    [
                        (
                            run.night.key,
                            item.edge_id,
                            item.weight_before,
                            item.weight_after,
                            int(item.coactive),
                        )
                        for item in batch
                    ],
                )
            _apply(run, connection, batch, totals)
        if totals.planned:
            # Marked only when there was work, so a night with none writes nothing at all.
            run.before_write()
            with state_db.conn:  # earlier nights' journals are settled: only tonight's is kept
                state_db.conn.execute(
                    f"DELETE FROM {store.EDGE_JOURNAL} WHERE night <> ?", (run.night.key,)
                )
            store.mark_stage_done(state_db, run.night.key, STAGE, isoformat(utc_now()))
    finally:
        connection.close()
        state_db.close()


def _apply(
    run: SleepRun, connection: apsw.Connection, batch: list[EdgeUpdate], totals: EdgePass
) -> None:
    """Write one batch in one short transaction; an edge whose weight moved meanwhile is left alone."""
    run.before_write()

    def work(conn: apsw.Connection) -> list[EdgeUpdate]:
        written = []
        for item in batch:
            conn.execute(
                "UPDATE graph_edges SET weight = ? WHERE id = ? AND weight IS ?",
                (item.weight_after, item.edge_id, item.weight_before),
            )
            if conn.changes():
                written.append(item)
        return written

    for item in transactions.write_batch(connection, work, label="sleep-edges"):
        totals.changed += 1
        if item.coactive:
            totals.strengthened += 1
        else:
            totals.downscaled += 1
