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

from mnemo_ops.database import transactions
from mnemo_ops.foundation.clock import local_now
from mnemo_ops.jobs.memory_maintain.trigger import (
    PROMOTION_MIN_IMPORTANCE,
    PROMOTION_SOURCES,
    PROMOTION_VERACITY,
)

_QUALIFIES = (
    "w.id IS NOT NULL AND w.source IN ({sources}) AND w.veracity = '{veracity}' "
    "AND w.importance >= {importance} AND trim(w.content) <> ''"
).format(
    sources=", ".join(f"'{source}'" for source in PROMOTION_SOURCES),
    veracity=PROMOTION_VERACITY,
    importance=PROMOTION_MIN_IMPORTANCE,
)
_CATEGORY = "'auto:' || coalesce(nullif(w.memory_type, ''), 'unknown')"
_LIVE = "w.superseded_by IS NULL AND (w.valid_until IS NULL OR w.valid_until > :now)"


@dataclasses.dataclass
class BackstopPlan:
    """Lineage rows to close (canonical ids) and working rows to promote, in a stable order."""

    close: list[int] = dataclasses.field(default_factory=list)
    promote: list[str] = dataclasses.field(default_factory=list)
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    slot_taken: list[str] = dataclasses.field(default_factory=list)

    def limited(self, max_rows: int) -> BackstopPlan:
        """At most `max_rows` changes of this plan, closes first (as `apply` writes them).

        The rest is found again by the next run's plan: a promoted row then has its current
        lineage and a closed one is no longer current, so capped runs resume without a cursor.
        """
        close = self.close[:max_rows]
        promote = self.promote[: max(0, max_rows - len(close))]
        return dataclasses.replace(self, close=close, promote=promote)

    @property
    def size(self) -> int:
        """How many rows the plan changes."""
        return len(self.close) + len(self.promote)

    def to_stats(self) -> dict[str, Any]:
        """Counts by reason, for the job's stats."""
        return {
            "to_close": len(self.close),
            "to_promote": len(self.promote),
            "close_reasons": dict(self.reasons),
            "slot_taken": len(self.slot_taken),
        }


def plan(
    connection: apsw.Connection, owner: str, now: str, after_rowid: int | None = None
) -> BackstopPlan:
    """Read what the backstop would change for `owner` (read-only).

    With `after_rowid`, the incremental pass: only working rows added after that rowid are
    considered for promotion, and current lineages are not re-checked. That is for runs where the
    installed trigger has promoted and closed as Mnemosyne wrote: what it cannot see (rows added
    while it was missing, a `valid_until` that passed by time alone) the full pass finds, every
    ``full_round_days``, and monthly-maintenance closes lineages of closed rows too.
    """
    if after_rowid is not None:
        return _plan_new_rows(connection, owner, now, after_rowid)
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
    # A set: `in` on the promote list made the plan quadratic (on a big home with a long history,
    # the first run's plan alone outlasted the job's timeout).
    replaced = set(result.promote)
    for working_id, slot_taken in candidates:
        if working_id in has_current or working_id in replaced:
            continue
        if slot_taken:
            # Someone else's current row holds the slot; the trigger skips such rows too.
            result.slot_taken.append(working_id)
            continue
        result.promote.append(working_id)
    result.promote.sort()
    return result


def _plan_new_rows(
    connection: apsw.Connection, owner: str, now: str, after_rowid: int
) -> BackstopPlan:
    result = BackstopPlan()
    categories = lineage_categories(connection, owner)
    names = {f"category{index}": category for index, category in enumerate(categories)}
    in_list = ",".join(":" + name for name in names) or "NULL"
    rows = connection.execute(
        "SELECT w.id, "
        "  EXISTS (SELECT 1 FROM canonical_facts l WHERE l.owner_id = :owner AND l.name = w.id "
        f"   AND (l.category IN ({in_list}) OR l.category = {_CATEGORY}) "
        "    AND l.source = 'auto:' || w.id AND l.valid_until IS NULL), "
        "  EXISTS (SELECT 1 FROM canonical_facts o WHERE o.owner_id = :owner "
        f"   AND o.category = {_CATEGORY} AND o.name = w.id "
        "    AND o.valid_until IS NULL AND o.source IS NOT 'auto:' || w.id) "
        f"FROM working_memory w WHERE w.rowid > :after AND {_QUALIFIES} AND {_LIVE} ORDER BY w.id",
        {"owner": owner, "now": now, "after": after_rowid, **names},
    ).fetchall()
    for working_id, has_current, slot_taken in rows:
        if has_current:
            continue
        if slot_taken:
            result.slot_taken.append(working_id)
            continue
        result.promote.append(working_id)
    return result


def _close(connection: apsw.Connection, canonical_id: int, stamp: str) -> int:
    connection.execute(
        "UPDATE canonical_facts SET valid_until = ? WHERE id = ? AND valid_until IS NULL",
        (stamp, canonical_id),
    )
    return connection.changes()


def lineage_categories(connection: apsw.Connection, owner: str) -> list[str]:
    """The owner's ``auto:*`` categories (one index seek per category, however many facts there are).

    A lineage row's slot is (owner, ``auto:<memory_type>``, working id), so with this short list a
    lineage is found through Mnemosyne's own slot indexes. Looking it up by ``source`` instead has
    no index unless the trigger's lineage index is installed: a scan of canonical_facts per row,
    which made each backstop promotion slower the more facts there were.
    """
    categories: list[str] = []
    after = "auto:"
    while True:
        row = connection.execute(
            "SELECT min(category) FROM canonical_facts WHERE owner_id = ? AND category > ? "
            "AND category < 'auto;'",
            (owner, after),
        ).fetchone()
        if row is None or row[0] is None:
            return categories
        categories.append(row[0])
        after = row[0]


def _promote(connection: apsw.Connection, owner: str, working_id: str, now: str, stamp: str) -> int:
    # The same guarded INSERT as the trigger: only when still live and qualifying, with no current
    # lineage row and a free slot (the partial unique index is never left to fail). The lineage is
    # read through the slot index, one seek per auto category (`lineage_categories`, read inside
    # this transaction, so a category the agent's trigger has just added is seen).
    categories = lineage_categories(connection, owner)
    own = connection.execute(
        f"SELECT {_CATEGORY} FROM working_memory w WHERE w.id = ?", (working_id,)
    ).fetchone()
    if own is None:
        return 0
    if own[0] not in categories:
        categories.append(own[0])
    names = {f"category{index}": category for index, category in enumerate(categories)}
    lineage = (
        "FROM canonical_facts WHERE owner_id = :owner AND name = w.id "
        f"AND category IN ({','.join(':' + name for name in names)}) AND source = 'auto:' || w.id"
    )
    connection.execute(
        "INSERT INTO canonical_facts (owner_id, category, name, body, source, confidence, version, "
        "  valid_from, valid_until) "
        f"SELECT :owner, {_CATEGORY}, w.id, w.content, 'auto:' || w.id, w.importance, "
        f"  coalesce((SELECT max(version) {lineage}), 0) + 1, :stamp, NULL "
        f"FROM working_memory w WHERE w.id = :id AND {_QUALIFIES} AND {_LIVE} "
        f"AND NOT EXISTS (SELECT 1 {lineage} AND valid_until IS NULL) "
        "AND NOT EXISTS (SELECT 1 FROM canonical_facts WHERE owner_id = :owner "
        f"                AND category = {_CATEGORY} AND name = w.id AND valid_until IS NULL)",
        {"owner": owner, "id": working_id, "now": now, "stamp": stamp, **names},
    )
    return connection.changes()


def apply(
    connection: apsw.Connection, owner: str, backstop: BackstopPlan, now: str
) -> tuple[int, int]:
    """Write the plan in short transactions sized by time (closes first, so a changed body gets
    its next version); every statement re-checks its condition inside its transaction.

    Returns (closed, promoted) as actually changed.
    """
    stamp = local_now().isoformat(timespec="seconds")  # CanonicalStore's own format
    closed = sum(
        transactions.write_items(
            connection,
            backstop.close,
            lambda conn, canonical_id: _close(conn, canonical_id, stamp),
            label="canonical backstop close",
        )
    )
    promoted = sum(
        transactions.write_items(
            connection,
            backstop.promote,
            lambda conn, working_id: _promote(conn, owner, working_id, now, stamp),
            label="canonical backstop promote",
        )
    )
    return closed, promoted
