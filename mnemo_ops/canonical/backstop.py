"""The canonical promotion backstop: the trigger's rules (sql/canonical_promotion.sql) applied to
rows the trigger never saw.

- a live qualifying working row without a current lineage row (it predates the trigger, or was
  written while it was uninstalled) is promoted: version = the lineage's highest + 1;
- a current lineage row whose working row is gone, closed (valid_until passed: time alone closes a
  row, which no trigger can see), or superseded is closed;
- a current lineage row whose body no longer matches the row's content is closed and, when the row
  still qualifies, replaced by version + 1.

The plan is read first (read-only, so a dry run reports the same counts); each batch is then written
in one BEGIN IMMEDIATE transaction whose statements re-check their conditions, so a concurrent
Mnemosyne write or a rerun after kill -9 never closes or promotes twice.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import apsw

from mnemo_ops.canonical.trigger import (
    PROMOTION_MIN_IMPORTANCE,
    PROMOTION_SOURCES,
    PROMOTION_VERACITY,
)
from mnemo_ops.core.clock import local_now
from mnemo_ops.database import transactions

_QUALIFIES = (
    "w.id IS NOT NULL AND w.source IN ({sources}) AND w.veracity = '{veracity}' "
    "AND w.importance >= {importance} AND trim(w.content) <> ''"
).format(
    sources=", ".join(f"'{source}'" for source in PROMOTION_SOURCES),
    veracity=PROMOTION_VERACITY,
    importance=PROMOTION_MIN_IMPORTANCE,
)
_LIVE = "w.superseded_by IS NULL AND (w.valid_until IS NULL OR w.valid_until > :now)"


@dataclasses.dataclass
class BackstopPlan:
    """Lineage rows to close (canonical ids) and working rows to promote, in a stable order."""

    close: list[int] = dataclasses.field(default_factory=list)
    promote: list[str] = dataclasses.field(default_factory=list)
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    slot_taken: list[str] = dataclasses.field(default_factory=list)

    def to_stats(self) -> dict[str, Any]:
        """Counts by reason, for the job's stats."""
        return {
            "to_close": len(self.close),
            "to_promote": len(self.promote),
            "close_reasons": dict(self.reasons),
            "slot_taken": len(self.slot_taken),
        }


def plan(connection: apsw.Connection, owner: str, now: str) -> BackstopPlan:
    """Read what the backstop would change for `owner` (read-only)."""
    result = BackstopPlan()
    lineages = connection.execute(
        "SELECT c.id, substr(c.source, 6), c.body, w.id IS NOT NULL, "
        f"  coalesce({_LIVE}, 0), coalesce({_QUALIFIES}, 0), w.content "
        "FROM canonical_facts c LEFT JOIN working_memory w ON w.id = substr(c.source, 6) "
        "WHERE c.owner_id = :owner AND c.valid_until IS NULL AND c.source LIKE 'auto:%' "
        "ORDER BY c.id",
        {"owner": owner, "now": now},
    ).fetchall()
    has_current = set()
    for canonical_id, working_id, body, present, live, qualifies, content in lineages:
        reason = (
            "deleted"
            if not present
            else "closed"
            if not live
            else "content-changed"
            if body != content
            else None
        )
        if reason is None:
            has_current.add(working_id)
            continue
        result.close.append(canonical_id)
        result.reasons[reason] = result.reasons.get(reason, 0) + 1
        if reason == "content-changed" and qualifies:
            result.promote.append(working_id)
    candidates = connection.execute(
        "SELECT w.id, EXISTS (SELECT 1 FROM canonical_facts o WHERE o.owner_id = :owner "
        "  AND o.category = 'auto:' || coalesce(nullif(w.memory_type, ''), 'unknown') AND o.name = w.id "
        "  AND o.valid_until IS NULL AND o.source IS NOT 'auto:' || w.id) "
        f"FROM working_memory w WHERE {_QUALIFIES} AND {_LIVE} ORDER BY w.id",
        {"owner": owner, "now": now},
    ).fetchall()
    for working_id, slot_taken in candidates:
        if working_id in has_current or working_id in result.promote:
            continue
        if slot_taken:
            # Someone else's current row holds the slot; the trigger skips such rows too.
            result.slot_taken.append(working_id)
            continue
        result.promote.append(working_id)
    result.promote.sort()
    return result


def _close(connection: apsw.Connection, canonical_ids: list[int], stamp: str) -> int:
    changed = 0
    for canonical_id in canonical_ids:
        connection.execute(
            "UPDATE canonical_facts SET valid_until = ? WHERE id = ? AND valid_until IS NULL",
            (stamp, canonical_id),
        )
        changed += connection.changes()
    return changed


def _promote(
    connection: apsw.Connection, owner: str, working_ids: list[str], now: str, stamp: str
) -> int:
    changed = 0
    for working_id in working_ids:
        # The same guarded INSERT as the trigger: only when still live and qualifying, with no current
        # lineage row and a free slot (the partial unique index is never left to fail).
        connection.execute(
            "INSERT INTO canonical_facts (owner_id, category, name, body, source, confidence, version, "
            "  valid_from, valid_until) "
            "SELECT :owner, 'auto:' || coalesce(nullif(w.memory_type, ''), 'unknown'), w.id, w.content, "
            "  'auto:' || w.id, w.importance, "
            "  coalesce((SELECT max(version) FROM canonical_facts WHERE source = 'auto:' || w.id "
            "            AND owner_id = :owner), 0) + 1, :stamp, NULL "
            f"FROM working_memory w WHERE w.id = :id AND {_QUALIFIES} AND {_LIVE} "
            "AND NOT EXISTS (SELECT 1 FROM canonical_facts WHERE source = 'auto:' || w.id "
            "                AND owner_id = :owner AND valid_until IS NULL) "
            "AND NOT EXISTS (SELECT 1 FROM canonical_facts WHERE owner_id = :owner "
            "                AND category = 'auto:' || coalesce(nullif(w.memory_type, ''), 'unknown') "
            "                AND name = w.id AND valid_until IS NULL)",
            {"owner": owner, "id": working_id, "now": now, "stamp": stamp},
        )
        changed += connection.changes()
    return changed


def apply(
    connection: apsw.Connection, owner: str, backstop: BackstopPlan, now: str, batch_size: int = 500
) -> tuple[int, int]:
    """Write the plan in short transactions (closes first, so a changed body gets its next version).

    Returns (closed, promoted) as actually changed.
    """
    stamp = local_now().isoformat(timespec="seconds")  # CanonicalStore's own format
    closed = promoted = 0
    for batch in transactions.batched(backstop.close, batch_size):
        closed += transactions.write_batch(
            connection, lambda conn, batch=batch: _close(conn, batch, stamp)
        )
    for batch in transactions.batched(backstop.promote, batch_size):
        promoted += transactions.write_batch(
            connection, lambda conn, batch=batch: _promote(conn, owner, batch, now, stamp)
        )
    return closed, promoted
