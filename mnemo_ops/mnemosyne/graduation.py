"""Graduated rows written through Mnemosyne's own API, in a child process.

The sleep stage ``graduation`` (``jobs/evening_batch/sleep/graduation.py``) plans which statements
of the owner cross to every later conversation; this module writes them. The child
(``graduation_child``) opens Mnemosyne on the database's folder (its environment set before it
imports Mnemosyne) and, per action:

- ``store``: ``Mnemosyne.remember(content, source="fact", scope="global", veracity="inferred",
  metadata={"derived_from": [ids], "method", "graduation": {...}})`` with the owner as the row's
  ``author_id`` and a ``mnemo:derives`` edge to each source; the row is looked up by its
  graduation key first and before each retry after a lock error (``writes.write_once``), so a
  killed run never stores twice;
- ``reinforce``: adds the restating rows' ids to the graduated row's ``derived_from`` (and their
  derives edges) and counts the confirmations, only for ids not there yet;
- ``supersede``: closes a graduated row whose fact changed (``valid_until``, ``superseded_by`` the
  newer graduated row, a ``mnemo:contradicts`` edge from it), only while it is still open.

Each is a short ``BEGIN IMMEDIATE`` transaction; the slow work was done by the parent before.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mnemo_ops.database import transactions
from mnemo_ops.foundation.child_process import ChildProcessFailed, run_child
from mnemo_ops.mnemosyne.api import mnemosyne_environment

SOURCE = "fact"
"""A distilled source the Hermes plugin ranks above raw turns (and its topical cut is lower)."""
VERACITY = "inferred"
"""Not ``stated``: the canonical trigger (source user/fact, stated, importance >= 0.7) would make
every graduated row a canonical fact, which the plugin tokenises on every turn."""
SCOPE = "global"
SESSION = "mnemo-ops-graduation"
"""The session the graduated rows are stored in (they are global: every session sees them)."""
METADATA_KEY = "graduation"
LINEAGE_KEY = "derived_from"
DERIVES = "mnemo:derives"
"""The lineage edge NREM's summaries use too (``jobs/evening_batch/sleep/edges.DERIVES``)."""
CONTRADICTS = "mnemo:contradicts"
"""Newer row -> the older one it closed (``edges.CONTRADICTS``)."""


def write_graduated(
    db_path: Path,
    hermes_home: Path,
    owner: str,
    actions: list[dict[str, Any]],
    home: Path | None = None,
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Apply `actions` (``store`` / ``reinforce``) in a child; one outcome per action done, in
    order. `home`: a private HOME for the child (a dry run's copies). Raises ChildProcessFailed."""
    if not actions:
        return []
    meter = transactions.current_meter()
    request = {
        "db_path": str(db_path),
        "owner": owner,
        "actions": actions,
        "policy": dataclasses.asdict(meter.policy),
    }
    outcomes: list[dict[str, Any]] = []

    def progress(message: dict[str, Any]) -> None:
        if "done" in message:
            outcomes.append(message)
        if isinstance(message.get("transactions"), dict):
            meter.add(message["transactions"])

    try:
        result = run_child(
            "mnemo_ops.mnemosyne.graduation_child",
            request,
            timeout=timeout_s,
            environment=mnemosyne_environment(Path(db_path).parent, hermes_home, home=home),
            cwd=Path(db_path).parent,
            on_progress=progress,
        )
    except ChildProcessFailed as error:
        raise error.with_context(
            f"writing the graduated rows failed after {len(outcomes)} of {len(actions)} writes"
        ) from None
    if isinstance(result.get("transactions"), dict):
        meter.add(result["transactions"])
    return outcomes
