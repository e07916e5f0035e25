"""The topic map and the seed map in state.db.

Tables (created when state.db is opened for writing, never in a dry run):

- ``topic_map``: label (pk), terms (JSON list), aliases (JSON list), term_counts (JSON object: the most
  shared terms), size, updated_at.
- ``topic_members``: key (pk: ``w:<id>`` / ``e:<id>``), kind, memory_id, topic (NULL: unclustered; indexed),
  fingerprint, terms, updated_at: the member ids of every topic, and what the incremental update
  compares against. (Member ids live here rather than as a list in each topic row, so an update
  rewrites only the members that changed.)
- ``seed_map``: topic, rank (pk together), key, kind, memory_id, canonical, importance, recall_count,
  timestamp, preview, updated_at.
- ``map_builds``: name (pk: ``topic-map`` | ``seed-map``), built_at, full_build_at, live_memories, mode.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import sqlite_utils

from mnemo_ops.core.state import StateTable
from mnemo_ops.jobs.evening_batch.topics.clustering import MapChanges, Topic, TopicMap

TOPIC_MAP = "topic-map"
SEED_MAP = "seed-map"


TOPICS = StateTable(
    "topic_map",
    {
        "label": str,
        "terms": str,
        "aliases": str,
        "term_counts": str,
        "size": int,
        "updated_at": str,
    },
    pk="label",
)
"""The topic map: one row per topic label."""


MEMBERS = StateTable(
    "topic_members",
    {
        "key": str,
        "kind": str,
        "memory_id": str,
        "topic": str,
        "fingerprint": int,
        "terms": str,
        "updated_at": str,
    },
    pk="key",
    indexes=(("topic",),),
)
"""Which topic each memory belongs to, with its fingerprint."""


SEEDS = StateTable(
    "seed_map",
    {
        "topic": str,
        "rank": int,
        "key": str,
        "kind": str,
        "memory_id": str,
        "canonical": int,
        "importance": float,
        "recall_count": int,
        "timestamp": str,
        "preview": str,
        "updated_at": str,
    },
    pk=("topic", "rank"),
)
"""The seed map: each topic's ranked seed memories."""


BUILDS = StateTable(
    "map_builds",
    {"name": str, "built_at": str, "full_build_at": str, "live_memories": int, "mode": str},
    pk="name",
)
"""When each map was last built, and how."""


def ensure_tables(db: sqlite_utils.Database) -> None:
    """Create the map tables when missing (idempotent)."""
    for table in (TOPICS, MEMBERS, SEEDS, BUILDS):
        table.ensure(db)


def _has_tables(db: sqlite_utils.Database | None) -> bool:
    return db is not None and {"topic_map", "topic_members", "map_builds"} <= set(db.table_names())


def load_build(db: sqlite_utils.Database | None, name: str) -> dict[str, Any] | None:
    """The build record of a map, or None when it was never built."""
    if not _has_tables(db):
        return None
    rows = list(db.query("SELECT * FROM map_builds WHERE name = ?", [name]))
    return dict(rows[0]) if rows else None


def load_map(db: sqlite_utils.Database | None, with_members: bool = False) -> TopicMap | None:
    """The stored topic map, or None when none was built yet.

    By default only the topics and the unclustered memories are read (what an incremental update
    needs; other members are read on demand); `with_members` reads every membership.
    """
    if load_build(db, TOPIC_MAP) is None:
        return None
    topic_map = TopicMap()
    for label, aliases, term_counts, size in db.execute(
        "SELECT label, aliases, term_counts, size FROM topic_map"
    ):
        topic_map.topics[label] = Topic(
            label,
            aliases=json.loads(aliases or "[]"),
            term_counts=Counter(json.loads(term_counts or "{}")),
            size=size or 0,
        )
    if with_members:
        rows = db.execute("SELECT key, topic FROM topic_members").fetchall()
        topic_map.assignments = dict(rows)
        for key, topic in rows:
            if topic is not None and topic in topic_map.topics:
                topic_map.topics[topic].members.add(key)
    for key, terms in db.execute("SELECT key, terms FROM topic_members WHERE topic IS NULL"):
        topic_map.assignments[key] = None
        topic_map.terms[key] = terms or ""

    def load_members(keys: list[str]) -> dict[str, tuple[str | None, str]]:
        found: dict[str, tuple[str | None, str]] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            for key, topic, terms in db.execute(
                f"SELECT key, topic, COALESCE(terms, '') FROM topic_members WHERE key IN "
                f"({','.join('?' * len(chunk))})",
                chunk,
            ):
                found[key] = (topic, terms)
        return found

    topic_map.load_members = load_members
    return topic_map


def load_assignments(db: sqlite_utils.Database | None) -> dict[str, str | None]:
    """Every stored memory key with its topic (None: unclustered)."""
    if db is None or "topic_members" not in db.table_names():
        return {}
    return dict(db.execute("SELECT key, topic FROM topic_members").fetchall())


def _topic_row(topic: Topic, label_terms: int, now: str) -> dict[str, Any]:
    return {
        "label": topic.label,
        "terms": json.dumps(topic.top_terms(label_terms)),
        "aliases": json.dumps(sorted(topic.aliases)),
        "term_counts": json.dumps(topic.kept_term_counts(), separators=(",", ":")),
        "size": topic.size,
        "updated_at": now,
    }


def _member_row(topic_map: TopicMap, key: str, now: str) -> tuple:
    kind = "working" if key.startswith("w:") else "episodic"
    return (
        key,
        kind,
        key[2:],
        topic_map.assignments.get(key),
        topic_map.fingerprints[key],
        topic_map.terms.get(key, ""),
        now,
    )


def save_map(
    db: sqlite_utils.Database, topic_map: TopicMap, changes: MapChanges, label_terms: int, now: str
) -> None:
    """Write the map: everything after a full build, only what changed after an incremental update."""
    ensure_tables(db)
    connection = db.conn
    member_sql = (
        "INSERT OR REPLACE INTO topic_members (key, kind, memory_id, topic, fingerprint, terms, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)"
    )
    topic_sql = (
        "INSERT OR REPLACE INTO topic_map (label, terms, aliases, term_counts, size, updated_at) "
        "VALUES (:label, :terms, :aliases, :term_counts, :size, :updated_at)"
    )
    full = changes.mode == "full"
    with connection:
        if full:
            # Our own derived state, rebuilt whole: the memory rows themselves are never touched.
            connection.execute("DELETE FROM topic_members")
            connection.execute("DELETE FROM topic_map")
            keys = sorted(topic_map.assignments)
            labels = sorted(topic_map.topics)
        else:
            keys = sorted(changes.changed_keys)
            labels = sorted(label for label in changes.touched_labels if label in topic_map.topics)
            connection.executemany(
                "DELETE FROM topic_members WHERE key = ?",
                [(key,) for key in sorted(changes.removed_keys)],
            )
            connection.executemany(
                "DELETE FROM topic_map WHERE label = ?",
                [(label,) for label in sorted(changes.removed)],
            )
        connection.executemany(member_sql, [_member_row(topic_map, key, now) for key in keys])
        connection.executemany(
            topic_sql, [_topic_row(topic_map.topics[label], label_terms, now) for label in labels]
        )
        previous = load_build(db, TOPIC_MAP)
        full_build_at = now if full else (previous or {}).get("full_build_at")
        connection.execute(
            "INSERT OR REPLACE INTO map_builds (name, built_at, full_build_at, live_memories, "
            "mode) VALUES (?, ?, ?, ?, ?)",
            (TOPIC_MAP, now, full_build_at, changes.live_memories, changes.mode),
        )


def load_topics(db: sqlite_utils.Database | None) -> list[dict[str, Any]]:
    """Stored topics for display (largest first); members are in ``topic_members``."""
    if not _has_tables(db):
        return []
    rows = db.query(
        "SELECT label, terms, aliases, size, updated_at FROM topic_map ORDER BY size DESC, label"
    )
    return [
        {
            "label": row["label"],
            "terms": json.loads(row["terms"]),
            "aliases": json.loads(row["aliases"]),
            "size": row["size"],
            "updated_at": row["updated_at"],
        }
        for row in rows
    ]


def load_seeds(db: sqlite_utils.Database | None) -> dict[str, list[dict[str, Any]]]:
    """Stored seeds by topic, in rank order."""
    if db is None or "seed_map" not in db.table_names():
        return {}
    seeds: dict[str, list[dict[str, Any]]] = {}
    for row in db.query("SELECT * FROM seed_map ORDER BY topic, rank"):
        entry = dict(row)
        entry["canonical"] = bool(entry["canonical"])
        seeds.setdefault(entry.pop("topic"), []).append(entry)
    return seeds


def save_seeds(
    db: sqlite_utils.Database,
    rows_by_topic: dict[str, list[dict[str, Any]]],
    changed: set[str],
    removed: set[str],
    live_memories: int,
    now: str,
) -> None:
    """Rewrite the seeds of changed topics, drop those of removed topics, stamp the build."""
    ensure_tables(db)
    connection = db.conn
    with connection:
        for label in sorted(changed | removed):
            connection.execute("DELETE FROM seed_map WHERE topic = ?", (label,))
        for label in sorted(changed):
            for rank, seed in enumerate(rows_by_topic.get(label, []), start=1):
                connection.execute(
                    "INSERT INTO seed_map (topic, rank, key, kind, memory_id, canonical, importance, recall_count, "
                    "timestamp, preview, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        label,
                        rank,
                        seed["key"],
                        seed["kind"],
                        seed["memory_id"],
                        int(seed["canonical"]),
                        seed["importance"],
                        seed["recall_count"],
                        seed["timestamp"],
                        seed["preview"],
                        now,
                    ),
                )
        connection.execute(
            "INSERT OR REPLACE INTO map_builds (name, built_at, full_build_at, live_memories, "
            "mode) VALUES (?, ?, ?, ?, ?)",
            (SEED_MAP, now, now, live_memories, "full"),
        )
