"""Live memories: working and episodic rows that are neither superseded nor past their valid_until."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import NamedTuple

import apsw

KINDS = {
    # kind: (key prefix, table, FTS5 table)
    "working": ("w", "working_memory", "fts_working"),
    "episodic": ("e", "episodic_memory", "fts_episodes"),
}


class LiveMemory(NamedTuple):
    """One live memory as the maps see it. `key` is ``w:<id>`` or ``e:<id>`` (ids of the two tables may collide)."""

    key: str
    kind: str
    memory_id: str
    content: str
    importance: float
    recall_count: int
    timestamp: str
    fingerprint: str


def fingerprint(content: str) -> str:
    """A short content hash: what tells a changed memory from an unchanged one."""
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def memory_key(kind: str, memory_id: str) -> str:
    """The map key of a memory (``w:abc`` for working, ``e:abc`` for episodic)."""
    return f"{KINDS[kind][0]}:{memory_id}"


def load_live_memories(connection: apsw.Connection, now: datetime | None = None) -> dict[str, LiveMemory]:
    """All live memories keyed by map key. Mnemosyne stamps valid_until as naive local ISO, so compare so."""
    now_iso = (now or datetime.now()).isoformat()
    memories: dict[str, LiveMemory] = {}
    for kind, (prefix, table, _fts) in KINDS.items():
        rows = connection.execute(
            f"SELECT id, content, COALESCE(importance, 0.5), COALESCE(recall_count, 0), COALESCE(timestamp, '') "
            f"FROM {table} WHERE superseded_by IS NULL AND (valid_until IS NULL OR valid_until > ?)",
            (now_iso,))
        for memory_id, content, importance, recall_count, timestamp in rows:
            content = content or ""
            key = f"{prefix}:{memory_id}"
            memories[key] = LiveMemory(key, kind, memory_id, content, float(importance), int(recall_count),
                                       str(timestamp), fingerprint(content))
    return memories


def canonical_backed_keys(connection: apsw.Connection, memories: dict[str, LiveMemory]) -> set[str]:
    """Memories a current canonical fact stands behind: its lineage (``auto:<working id>``) or the same text."""
    backed: set[str] = set()
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "canonical_facts" not in tables:
        return backed
    bodies: set[str] = set()
    for source, body in connection.execute("SELECT source, body FROM canonical_facts WHERE valid_until IS NULL"):
        if source and source.startswith("auto:"):
            backed.add(f"w:{source[5:]}")
        if body:
            bodies.add(_normal_text(body))
    backed &= set(memories)
    if bodies:
        backed.update(key for key, memory in memories.items() if _normal_text(memory.content) in bodies)
    return backed


def _normal_text(text: str) -> str:
    return " ".join(text.casefold().split())
