"""Which live memories changed since the topic map was built, worked out inside SQLite.

The map keeps a fingerprint per memory in state.db. Comparing it in Python would mean loading every
live memory and every stored fingerprint each evening; instead state.db is attached read-only to the
(read-only) memory connection and one anti-join per table returns only new or changed rows, with the
fingerprint computed by a function registered on that connection.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import apsw

from mnemo_ops.jobs.evening_batch.topics.memories import (
    FUNCTION,
    KINDS,
    LiveMemory,
    register_fingerprint,
)

SCHEMA = "mnemo_ops_state"
LIVE = "superseded_by IS NULL AND (valid_until IS NULL OR valid_until > ?)"
LIVE_T = "t.superseded_by IS NULL AND (t.valid_until IS NULL OR t.valid_until > ?)"


@dataclasses.dataclass
class MapDiff:
    """New or changed live memories, keys on the map that are no longer live, and the live count."""

    changed: dict[str, LiveMemory]
    removed: list[str]
    live_count: int

    @property
    def count(self) -> int:
        """Memories to (re)assign or drop."""
        return len(self.changed) + len(self.removed)

    @property
    def share(self) -> float:
        """Changed memories as a share of the live ones."""
        return self.count / max(1, self.live_count)


def _attach(connection: apsw.Connection, state_db_path: Path) -> bool:
    if not state_db_path.is_file():
        return False
    connection.execute(
        f"ATTACH DATABASE ? AS {SCHEMA}", (f"{state_db_path.absolute().as_uri()}?mode=ro",)
    )
    tables = {
        row[0]
        for row in connection.execute(
            f"SELECT name FROM {SCHEMA}.sqlite_master WHERE type = 'table'"
        )
    }
    if (
        not {"topic_members", "map_builds"} <= tables
        or not connection.execute(
            f"SELECT 1 FROM {SCHEMA}.map_builds WHERE name = 'topic-map'"
        ).fetchall()
    ):
        connection.execute(f"DETACH DATABASE {SCHEMA}")
        return False
    return True


def diff_since_map(
    connection: apsw.Connection, state_db_path: Path, now: datetime | None = None
) -> MapDiff | None:
    """The changes since the stored map was built; None when there is no stored map."""
    now_iso = (now or datetime.now()).isoformat()
    if not _attach(connection, state_db_path):
        return None
    register_fingerprint(connection)
    changed: dict[str, LiveMemory] = {}
    removed: list[str] = []
    live = 0
    try:
        for kind, (prefix, table, _fts) in KINDS.items():
            body = "CAST(COALESCE(t.content, '') AS BLOB)"
            rows = connection.execute(
                f"SELECT '{prefix}:' || t.id, '{kind}', t.id, COALESCE(t.content, ''), COALESCE(t.importance, 0.5), "
                f"COALESCE(t.recall_count, 0), COALESCE(t.timestamp, ''), {FUNCTION}({body}, length({body})) "
                f"FROM {table} AS t WHERE {LIVE_T} AND NOT EXISTS ("
                f"SELECT 1 FROM {SCHEMA}.topic_members AS s WHERE s.key = '{prefix}:' || t.id "
                f"AND s.fingerprint = {FUNCTION}({body}, length({body})))",
                (now_iso,),
            ).fetchall()
            changed.update({row[0]: LiveMemory(*row) for row in rows})
            removed.extend(
                row[0]
                for row in connection.execute(
                    f"SELECT s.key FROM {SCHEMA}.topic_members AS s WHERE s.key >= '{prefix}:' AND s.key < '{prefix};' "
                    f"AND NOT EXISTS (SELECT 1 FROM {table} AS t WHERE t.id = substr(s.key, 3) "
                    f"AND {LIVE_T})",
                    (now_iso,),
                )
            )
            live += connection.execute(
                f"SELECT count(*) FROM {table} WHERE {LIVE}", (now_iso,)
            ).fetchone()[0]
    finally:
        connection.execute(f"DETACH DATABASE {SCHEMA}")
    return MapDiff(changed=changed, removed=sorted(removed), live_count=live)
