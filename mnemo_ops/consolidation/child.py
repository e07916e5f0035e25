"""Child process: run Mnemosyne's ``reclaim_orphans`` and ``sleep_all_sessions`` and print one JSON line.

The parent chooses the environment (MNEMOSYNE_DATA_DIR, HERMES_HOME, HOME) before this process
imports Mnemosyne, so its import-time side effects land where the parent wants them. The request
comes as one JSON object on stdin: ``{"db_path", "dry_run", "reclaim_stale_seconds", "model"}``.
Everything Mnemosyne prints goes to stderr; stdout carries only the final JSON object.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any


def _choose_model(model: str) -> str:
    """Keep Mnemosyne's model chain when one is configured, else force its AAAK fallback.

    Without a remote endpoint or a local GGUF file already on disk, Mnemosyne would try to download a
    model from HuggingFace (creating ``~/.hermes/mnemosyne/models`` first) at every sleep; turning its
    LLM switch off makes it go straight to AAAK, which is what it would end up using anyway offline.
    """
    from mnemosyne.core import local_llm

    configured = bool(
        local_llm.LLM_ENABLED and (local_llm.LLM_BASE_URL or local_llm._model_path() is not None)
    )
    if model == "aaak" or not configured:
        local_llm.LLM_ENABLED = False
        local_llm._llm_available = False
        return "aaak"
    return "model-chain"


def consolidate(request: dict[str, Any]) -> dict[str, Any]:
    """Run the consolidation described by `request` and return a JSON-friendly summary."""
    from mnemo_ops.database import mnemosyne_api

    db_path = Path(request["db_path"])
    # Is Mnemosyne's schema on this database current? Read with Python's sqlite3, the library
    # Mnemosyne uses in this process (docs/architecture.md: one SQLite library per process).
    probe = sqlite3.connect(f"{db_path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        gaps = mnemosyne_api.live_schema_gaps(probe)
    finally:
        probe.close()
    chosen = _choose_model(request.get("model", "auto"))
    # sleep_all_sessions makes a BeamMemory per session, and each would redefine Mnemosyne's wm_au
    # trigger: a schema change that can wedge the live agent's connection with "database is locked"
    # (see mnemosyne_api). On a current schema, initialisation is skipped for the whole consolidation.
    skip = mnemosyne_api.schema_initialisation_skipped() if not gaps else contextlib.nullcontext()
    with skip:
        return _consolidate(request, db_path, chosen, gaps)


def _consolidate(
    request: dict[str, Any], db_path: Path, chosen: str, gaps: list[str]
) -> dict[str, Any]:
    from mnemosyne.core.memory import Mnemosyne

    from mnemo_ops.database.mnemosyne_api import point_environment_at

    point_environment_at(db_path)
    memory = Mnemosyne(session_id="mnemo-ops", db_path=db_path)
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
    outcome = memory.sleep_all_sessions(dry_run=request["dry_run"])
    sessions = [
        {key: value for key, value in result.items() if key != "consolidated_ids"}
        for result in outcome.get("session_results", [])
    ]
    methods = sorted({result.get("method") for result in sessions if result.get("method")})
    degradation = outcome.get("degradation") or {}
    return {
        "status": outcome.get("status"),
        "model": chosen,
        "methods": methods,
        "sessions_scanned": outcome.get("sessions_scanned", 0),
        "sessions_consolidated": outcome.get("sessions_consolidated", 0),
        "items_consolidated": outcome.get("items_consolidated", 0),
        "summaries_created": outcome.get("summaries_created", 0),
        "conflicts_resolved": sum(
            int(result.get("conflicts_resolved", 0) or 0) for result in sessions
        ),
        "llm_used": outcome.get("llm_used", 0),
        "claims_reclaimed": claims_reclaimed,
        "episodic_degraded": int(degradation.get("tier1_to_tier2", 0) or 0)
        + int(degradation.get("tier2_to_tier3", 0) or 0),
        "model_refresh": outcome.get("model_refresh") or {},
        "errors": outcome.get("error_details") or [],
        "sessions": sessions,
        "schema_migrated": gaps,
    }


def main() -> int:
    """Read the request from stdin, run it with stdout redirected to stderr, print the JSON result."""
    request = json.loads(sys.stdin.read())
    real_stdout = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            summary = consolidate(request)
    except Exception as error:  # the parent turns this into the step's one-line error
        real_stdout.write(json.dumps({"fatal": f"{type(error).__name__}: {error}"}) + "\n")
        return 1
    real_stdout.write(json.dumps(summary, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
