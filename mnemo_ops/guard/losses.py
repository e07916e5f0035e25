"""Lost facts: rows a change archived that were the only place of a fact, or an eval case's answer.

A change that closes a working memory (``valid_until`` stamped, no ``superseded_by``: archived, not
replaced by a newer statement) loses a fact when the row is the evidence of a case in the user's
eval suite, or when it is not chatter and no current working memory of the changed database holds
its facts (``database.facts``). Recall measured over probes can miss such a loss (an archived
answer looks "forgotten", and a probe set samples); the guard counts each one and refuses the
change. Superseded rows (a fact replaced by a newer one) are not losses: the newer row holds the
fact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mnemo_ops import database
from mnemo_ops.database import facts

SHOWN = 20
"""Lost rows listed in the guard's figures (all are counted)."""


def archived_by_change(before_db: Path, after_db: Path) -> list[tuple[str, str]]:
    """(id, content) of the working memories current in `before_db` and archived in `after_db`."""
    connection = database.open_memory_db(after_db, readonly=True)
    try:
        # The guard's own "before" copy, read only (an attached file takes the connection's flags).
        connection.execute("ATTACH DATABASE ? AS prior", (str(before_db),))
        return connection.execute(
            "SELECT a.id, a.content FROM main.working_memory a "
            "JOIN prior.working_memory b ON b.id = a.id "
            "WHERE b.valid_until IS NULL AND (b.superseded_by IS NULL OR b.superseded_by = '') "
            "AND a.valid_until IS NOT NULL AND (a.superseded_by IS NULL OR a.superseded_by = '') "
            "ORDER BY a.id"
        ).fetchall()
    finally:
        connection.close()


def lost_facts(before_db: Path, after_db: Path, evidence_ids: set[str]) -> list[dict[str, Any]]:
    """The rows the change archived that lose a fact, each with why (``evidence`` or ``only-holder``)."""
    archived = archived_by_change(before_db, after_db)
    if not archived:
        return []
    leaving = {memory_id for memory_id, _ in archived}
    lost = []
    connection = database.open_memory_db(after_db, readonly=True)
    try:
        for memory_id, content in archived:
            if memory_id in evidence_ids:
                why = "evidence"
            elif facts.is_chatter(content):
                continue
            elif facts.find_survivor(connection, content, leaving) is None:
                why = "only-holder"
            else:
                continue
            lost.append({"memory_id": memory_id, "why": why, "content": (content or "")[:120]})
    finally:
        connection.close()
    return lost


def problem(lost: list[dict[str, Any]]) -> str:
    """One line for the verdict's problems."""
    first = "; ".join(f"{row['memory_id']} ({row['why']}): {row['content']!r}" for row in lost[:3])
    return (
        f"{len(lost)} archived row(s) would lose a fact no current row holds or an eval answer "
        f"(first: {first})"
    )
