"""Child process: run Mnemosyne's ``reclaim_orphans`` and ``sleep_all_sessions`` and print one JSON line.

The parent chooses the environment (MNEMOSYNE_DATA_DIR, HERMES_HOME, HOME) before this process
imports Mnemosyne, so its import-time side effects land where the parent wants them. Run through
``foundation.child_process`` (whatever Mnemosyne prints goes to stderr): the request is
``{"db_path", "dry_run", "snapshot", "sleep_batch", "max_cycles", "model",
"reclaim_stale_seconds"}``, the result the consolidation's summary.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import child_main


def consolidate(request: dict[str, Any]) -> dict[str, Any]:
    """Run the consolidation described by `request` and return a JSON-friendly summary."""
    from mnemo_ops.mnemosyne import api as mnemosyne_api
    from mnemo_ops.mnemosyne.sleep import choose_model

    db_path = Path(request["db_path"])
    # Is Mnemosyne's schema on this database current? Read with Python's sqlite3, the library
    # Mnemosyne uses in this process (docs/contracts.md: one SQLite library per process).
    probe = sqlite3.connect(f"{db_path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        gaps = mnemosyne_api.live_schema_gaps(probe)
    finally:
        probe.close()
    chosen = choose_model(request.get("model", "auto"))
    # sleep_all_sessions makes a BeamMemory per session, and each would redefine Mnemosyne's wm_au
    # trigger: a schema change that can wedge the live agent's connection with "database is locked"
    # (see mnemosyne_api). On a current schema, initialisation is skipped for the whole consolidation.
    skip = mnemosyne_api.schema_initialisation_skipped() if not gaps else contextlib.nullcontext()
    with skip:
        return _consolidate(request, db_path, chosen, gaps)


def _consolidate(
    request: dict[str, Any], db_path: Path, chosen: str, gaps: list[str]
) -> dict[str, Any]:
    from mnemo_ops.mnemosyne.sleep import sleeping_mnemosyne

    memory = sleeping_mnemosyne(db_path)
    # A killed earlier run (ours or the agent's) can leave rows claimed without a summary; Mnemosyne's
    # own helper gives them back to sleep once the claim is older than the stale window.
    # A dry run works on a throwaway snapshot, where reclaiming for real lets sleep's own dry run count
    # the reclaimed rows exactly as the real run would.
    reclaim_dry = bool(request["dry_run"] and not request.get("snapshot", False))
    reclaimed = memory.reclaim_orphans(
        dry_run=reclaim_dry, stale_after_seconds=int(request.get("reclaim_stale_seconds", 3600))
    )
    claims_reclaimed = int(reclaimed.get("candidates" if reclaim_dry else "reclaimed", 0) or 0)
    # sleep_all_sessions ends with a cross-session MEMORIA dedup that DELETEs duplicate memoria_kg rows.
    # mnemo-ops never deletes memory rows, so that part is left out (3.15.1; the consolidation itself
    # does not depend on it).
    memory.beam._deduplicate_memoria_cross_session = lambda: {"status": "skipped by mnemo-ops"}
    # Bounded consolidation: the parent set MNEMOSYNE_SLEEP_BATCH (rows one sleep takes from a
    # session, so rows one summary can cover) before Mnemosyne was imported; each session's sleep is
    # repeated until nothing is left. A dry run works on a throwaway snapshot and runs for real there,
    # so it counts exactly what the real run will do (Mnemosyne's own dry run would see the same rows
    # every cycle).
    really = not request["dry_run"] or bool(request.get("snapshot"))
    totals = _Totals()
    chosen_sessions, totals.deferred, totals.unchanged = _sessions_to_sleep(
        memory, request.get("max_sessions"), request.get("left_over") or {}
    )
    _sleep_sessions(memory, chosen_sessions, really, int(request.get("max_cycles", 1)), totals)
    return {
        "status": "consolidated" if totals.items else "no_op",
        "model": chosen,
        "methods": sorted(totals.methods),
        "cycles": totals.cycles,
        "sleep_batch": request.get("sleep_batch"),
        "sessions_scanned": len(totals.sessions),
        "sessions_deferred": totals.deferred,
        "sessions_unchanged": totals.unchanged,
        "sessions_consolidated": sum(1 for entry in totals.sessions.values() if entry["items"]),
        "items_consolidated": totals.items,
        "summaries_created": totals.summaries,
        "conflicts_resolved": totals.conflicts,
        "llm_used": totals.llm_used,
        "claims_reclaimed": claims_reclaimed,
        "episodic_degraded": totals.degraded,
        "model_refresh": totals.model_refresh,
        "errors": totals.errors,
        "sessions": [
            {"session_id": key, **value} for key, value in sorted(totals.sessions.items())
        ],
        "schema_migrated": gaps,
    }


def _sessions_to_sleep(
    memory: Any, quota: int | None, left_over: dict[str, int]
) -> tuple[list[tuple[str, int]], int, int]:
    """(session, eligible rows) for the sessions the sleep takes tonight; how many wait; how many
    are skipped as unchanged.

    The sessions with rows Mnemosyne's sleep would take (`episodic.eligible_condition`), oldest
    first as ``sleep_all_sessions`` orders them, but not those in `left_over` whose count is the
    one recorded there (an earlier sleep left those rows and nothing changed since), at most
    `quota` of them: the rest wait for the next night, still oldest first then, so a backlog is
    worked off night by night.
    """
    from mnemo_ops.jobs.evening_batch.consolidation import episodic

    rows = memory.beam.conn.execute(
        "SELECT COALESCE(session_id, 'default'), count(*) FROM working_memory "
        f"WHERE {episodic.eligible_condition()} GROUP BY session_id ORDER BY min(timestamp), 1",
        (episodic.sleep_cutoff(),),
    ).fetchall()
    memory.beam.conn.commit()  # end the read: no snapshot may stay open beside the live agent
    waiting = [(str(session), int(count)) for session, count in rows]
    chosen = [(session, count) for session, count in waiting if left_over.get(session) != count]
    unchanged = len(waiting) - len(chosen)
    if quota is not None and len(chosen) > quota:
        return chosen[:quota], len(chosen) - quota, unchanged
    return chosen, 0, unchanged


def _sleep_sessions(
    memory: Any, sessions: list[tuple[str, int]], really: bool, max_cycles: int, totals: _Totals
) -> None:
    """Mnemosyne's own per-session ``sleep`` for each session, repeated until it takes nothing,
    then its ``degrade_episodic`` once.

    What ``sleep_all_sessions`` does for every session, with two differences that keep the night
    proportional to its work: each ``sleep`` of Mnemosyne ends with a ``degrade_episodic`` over the
    whole episodic table, so sleeping 200 sessions in 6 bounded cycles each degraded the table
    1,200 times; here it is degraded once, after every session slept (as ``sleep_all_sessions``
    also does at its end). And only the chosen sessions are visited, each with one ``BeamMemory``.
    """
    from mnemo_ops.mnemosyne import sleep

    arguments = sleep.sleep_arguments()
    with sleep.episodic_degradation_deferred():
        for session_id, eligible in sessions:
            try:
                beam = sleep.session_beam(memory, session_id)
                left = eligible
                for _cycle in range(max(1, max_cycles)):
                    outcome = dict(beam.sleep(dry_run=not really, **arguments))
                    outcome["session_id"] = session_id
                    outcome["eligible"] = eligible
                    totals.add_session(outcome)
                    taken = int(outcome.get("items_consolidated", 0) or 0)
                    left -= taken
                    # Rows the agent writes now are newer than the cut-off: what was eligible
                    # when the session was chosen is all there is, so no empty last cycle.
                    if not really or not taken or left <= 0:
                        break
            except Exception as error:  # as sleep_all_sessions: one session's failure is reported
                totals.errors.append({"session_id": session_id, "error": repr(error)})
    degradation = memory.beam.degrade_episodic(dry_run=not really) or {}
    totals.degraded += int(degradation.get("tier1_to_tier2", 0) or 0)
    totals.degraded += int(degradation.get("tier2_to_tier3", 0) or 0)


class _Totals:
    """What the sleep cycles did, added up (per session too)."""

    def __init__(self) -> None:
        self.cycles = self.items = self.summaries = self.conflicts = self.llm_used = 0
        self.degraded = self.deferred = self.unchanged = 0
        self.methods: set[str] = set()
        self.sessions: dict[str, dict[str, int]] = {}
        self.errors: list[Any] = []
        self.model_refresh = {"proposals": 0, "applied": 0}

    def add_session(self, outcome: dict[str, Any]) -> None:
        """Add one session's ``sleep`` outcome."""
        self.cycles += 1
        entry = self.sessions.setdefault(
            str(outcome.get("session_id")),
            {"items": 0, "summaries": 0, "eligible": int(outcome.get("eligible", 0) or 0)},
        )
        if outcome.get("status") not in ("consolidated", "dry_run"):
            return
        items = int(outcome.get("items_consolidated", 0) or 0)
        summaries = int(outcome.get("summaries_created", 0) or 0)
        self.items += items
        self.summaries += summaries
        entry["items"] += items
        entry["summaries"] += summaries
        self.llm_used += int(outcome.get("llm_used", 0) or 0)
        self.conflicts += int(outcome.get("conflicts_resolved", 0) or 0)
        for key in self.model_refresh:
            self.model_refresh[key] += int((outcome.get("model_refresh") or {}).get(key, 0) or 0)
        if outcome.get("method"):
            self.methods.add(outcome["method"])


if __name__ == "__main__":
    child_main(consolidate)
