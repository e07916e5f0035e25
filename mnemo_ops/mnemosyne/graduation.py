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

from pathlib import Path
from typing import Any

from mnemo_ops.mnemosyne.write_children import apply_in_child

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
    return apply_in_child(
        "mnemo_ops.mnemosyne.graduation_child",
        {"owner": owner, "actions": actions},
        db_path,
        hermes_home,
        "writing the graduated rows",
        home=home,
        timeout_s=timeout_s,
    )
