"""Live memories: working and episodic rows that are neither superseded nor past their valid_until."""

from __future__ import annotations

import zlib
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
    fingerprint: int


def fingerprint(content: str) -> int:
    """CRC-32 of the content, seeded with its byte length: what tells a changed memory from an unchanged one.

    Change detection only, not security: this runs over every live memory each evening, where a
    cryptographic hash object per row would cost more than the rest of an incremental update.
    """
    data = content.encode("utf-8", "surrogatepass")
    return zlib.crc32(data, len(data) & 0xFFFFFFFF)


FUNCTION = "mnemo_ops_fingerprint"


def register_fingerprint(connection: apsw.Connection) -> None:
    """Make ``mnemo_ops_fingerprint(CAST(content AS BLOB), length(...))`` available in SQL.

    zlib.crc32 itself is the function (no Python frame per row), so SQLite fingerprints the rows
    about as fast as it reads them; the result equals `fingerprint(content)`.
    """
    connection.create_scalar_function(FUNCTION, zlib.crc32, 2, deterministic=True)


def load_live_memories(
    connection: apsw.Connection, now: datetime | None = None
) -> dict[str, LiveMemory]:
    """All live memories keyed by map key. Mnemosyne stamps valid_until as naive local ISO, so compare so."""
    now_iso = (now or datetime.now()).isoformat()
    memories: dict[str, LiveMemory] = {}
    # The NamedTuple without its per-call argument handling: every live row is made, every night.
    make = tuple.__new__
    register_fingerprint(connection)
    body = "CAST(COALESCE(content, '') AS BLOB)"
    for kind, (prefix, table, _fts) in KINDS.items():
        rows = connection.execute(
            f"SELECT '{prefix}:' || id, '{kind}', id, COALESCE(content, ''), COALESCE(importance, 0.5), "
            f"COALESCE(recall_count, 0), COALESCE(timestamp, ''), {FUNCTION}({body}, length({body})) "
            f"FROM {table} WHERE superseded_by IS NULL AND (valid_until IS NULL OR valid_until > ?)",
            (now_iso,),
        ).fetchall()
        memories.update({row[0]: make(LiveMemory, row) for row in rows})
    return memories


def canonical_backed_keys(connection: apsw.Connection, memories: dict[str, LiveMemory]) -> set[str]:
    """Memories a current canonical fact stands behind: its lineage (``auto:<working id>``) or the same text."""
    backed: set[str] = set()
    tables = {
        row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    if "canonical_facts" not in tables:
        return backed
    bodies: set[str] = set()
    for source, body in connection.execute(
        "SELECT source, body FROM canonical_facts WHERE valid_until IS NULL"
    ):
        if source and source.startswith("auto:"):
            backed.add(f"w:{source[5:]}")
        if body:
            bodies.add(_normal_text(body))
    backed &= set(memories)
    if bodies:
        backed.update(
            key for key, memory in memories.items() if _normal_text(memory.content) in bodies
        )
    return backed


def _normal_text(text: str) -> str:
    return " ".join(text.casefold().split())
