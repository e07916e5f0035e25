"""The prominence stage: every memory's prominence, utility and band at the night's reference moment.

Incremental: once a night, one pass over ``sleep_memories`` ages every live memory to the night's
reference moment (an UPDATE whose arithmetic is ``prominence``'s own, registered as SQL functions);
any other run that night recomputes only the rows whose inputs changed since (``dirty``: new,
changed, confirmed). Because every value of a night is computed at the same moment, the second run
of a night finds nothing to do and writes nothing. The memory database is never read or written
here; recall counts are not an input.
"""

from __future__ import annotations

from typing import Any

from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.jobs.evening_batch.sleep import store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.jobs.evening_batch.sleep.prominence import register_functions

STAGE = "prominence"

_PROMINENCE = (
    f"UPDATE {store.MEMORIES} SET "
    "prominence = mnemo_prominence(kind, anchor, confirmations, last_confirmed, importance, "
    "confidence, exempt IS NOT NULL)"
)
_DERIVED = (
    f"UPDATE {store.MEMORIES} SET utility = mnemo_utility(prominence, confirmations), "
    "band = mnemo_band(prominence), dirty = 0"
)


def recompute(run: SleepRun) -> dict[str, Any]:
    """Age every live memory once tonight, else recompute the changed ones; return the figures."""
    state_db = run.open_state()
    try:
        connection = state_db.conn
        register_functions(connection, run.retention, run.night.reference)
        aged = store.stage_done(state_db, run.night.key, STAGE)
        # Closed memories keep the prominence they had when they closed (their records say why);
        # only live ones age. The two statements see the same rows: the second clears `dirty`.
        where = "WHERE dirty = 1" if aged else "WHERE live = 1 OR dirty = 1"
        figures: dict[str, Any] = {"mode": "changed" if aged else "nightly", "recomputed": 0}
        pending = connection.execute(f"SELECT count(*) FROM {store.MEMORIES} {where}").fetchone()[0]
        if pending:
            run.before_write()
            with connection:
                connection.execute(f"{_PROMINENCE} {where}")
                connection.execute(f"{_DERIVED} {where}")
            figures["recomputed"] = pending
        if not aged and pending:
            store.mark_stage_done(state_db, run.night.key, STAGE, isoformat(utc_now()))
        figures["bands"] = bands(state_db)
        return figures
    finally:
        state_db.close()


def bands(state_db) -> dict[str, int]:
    """How many live memories are active, dormant and archive candidates."""
    counts = {"active": 0, "dormant": 0, "archive": 0}
    for band, count in state_db.conn.execute(
        f"SELECT band, count(*) FROM {store.MEMORIES} WHERE live = 1 GROUP BY band"
    ):
        if band in counts:
            counts[band] = count
    return counts
