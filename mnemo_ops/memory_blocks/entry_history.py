"""What happened to each block entry, in state.db (``memory_block_entries``): the files keep no dates.

One row per (block, entry key): when the entry was first and last seen in the file (recorded by
nightly-selfcare's block audit and by memory-block-migrate), and what the migration did with it:

- ``in-file``: in the block (the state of every entry first seen there),
- ``stored``: stored in Mnemosyne, not yet taken out of the file,
- ``moved``: stored, recalled, and taken out of the file (``moved_at``, ``memory_id``),
- ``not-recalled``: stored but not recalled by its own text; left in the file, its row closed,
  and not tried again (``note`` says why).

An entry the agent writes again after it was moved starts over as ``in-file`` with a new first-seen
date: the agent found it worth keeping at hand again.
"""

from __future__ import annotations

from typing import Any

from mnemo_ops.core.state import StateTable
from mnemo_ops.memory_blocks.blocks import entry_key, preview

TABLE = "memory_block_entries"
IN_FILE, STORED, MOVED, NOT_RECALLED = "in-file", "stored", "moved", "not-recalled"


ENTRIES = StateTable(
    TABLE,
    {
        "block": str,
        "entry_key": str,
        "chars": int,
        "preview": str,
        "first_seen": str,
        "last_seen": str,
        "status": str,
        "memory_id": str,
        "stored_at": str,
        "moved_at": str,
        "note": str,
    },
    pk=("block", "entry_key"),
    indexes=(("status", "moved_at"),),
)
"""``memory_block_entries``: one row per (block, entry key) (created only in a real run)."""


def rows(state_db, block: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Every row (of one block), by (block, entry key); empty when state.db or the table is missing."""
    if state_db is None or TABLE not in state_db.table_names():
        return {}
    where, parameters = ("WHERE block = ?", [block]) if block else ("", [])
    return {
        (row["block"], row["entry_key"]): dict(row)
        for row in state_db.query(f"SELECT * FROM {TABLE} {where}", parameters)
    }


def unseen(state_db, block: str, entries: list[str]) -> list[str]:
    """The entries with no row yet, or moved and written again (what `record_seen` would add)."""
    known = rows(state_db, block)
    fresh = []
    for entry in entries:
        row = known.get((block, entry_key(block, entry)))
        if row is None or row["status"] == MOVED:
            fresh.append(entry)
    return fresh


def record_seen(state_db, block: str, entries: list[str], now: str) -> int:
    """Record that `entries` are in `block` now; return how many were new. Writes state.db."""
    ENTRIES.ensure(state_db)
    fresh = {entry_key(block, entry) for entry in unseen(state_db, block, entries)}
    with state_db.conn:
        for entry in entries:
            key = entry_key(block, entry)
            if key in fresh:
                state_db.execute(
                    f"INSERT OR REPLACE INTO {TABLE} (block, entry_key, chars, preview, first_seen, "
                    "last_seen, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [block, key, len(entry), preview(entry), now, now, IN_FILE],
                )
            else:
                state_db.execute(
                    f"UPDATE {TABLE} SET last_seen = ? WHERE block = ? AND entry_key = ?",
                    [now, block, key],
                )
    return len(fresh)


def update(state_db, block: str, entry: str, now: str, **fields: Any) -> None:
    """Set `fields` on the row of `entry` (creating it, first seen `now`, when it has none)."""
    ENTRIES.ensure(state_db)
    key = entry_key(block, entry)
    with state_db.conn:
        state_db.execute(
            f"INSERT OR IGNORE INTO {TABLE} (block, entry_key, chars, preview, first_seen, "
            "last_seen, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [block, key, len(entry), preview(entry), now, now, IN_FILE],
        )
        assignments = ", ".join(f"{name} = ?" for name in fields)
        state_db.execute(
            f"UPDATE {TABLE} SET {assignments} WHERE block = ? AND entry_key = ?",
            [*fields.values(), block, key],
        )


def moved_since(state_db, since: str) -> list[dict[str, Any]]:
    """Entries moved into Mnemosyne at or after `since` (ISO UTC), oldest move first."""
    if state_db is None or TABLE not in state_db.table_names():
        return []
    return [
        dict(row)
        for row in state_db.query(
            f"SELECT * FROM {TABLE} WHERE status = ? AND moved_at >= ? ORDER BY moved_at, block",
            [MOVED, since],
        )
    ]
