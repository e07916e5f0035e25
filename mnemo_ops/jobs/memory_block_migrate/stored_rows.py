"""Entries already stored in the database, found by the idempotency key kept in their row's metadata.

Each stored entry's ``metadata_json`` holds ``{"_memory_block": {"key": ..., "block": ...}}``: the key is
committed with the row in one statement by Mnemosyne's remember, so a row exists if and only if its
key does, whatever moment a run was killed at. Before each insert the key is looked up, so an entry
is stored once, however often a run is repeated.
"""

from __future__ import annotations

import dataclasses
from typing import Any

METADATA_KEY = "_memory_block"


@dataclasses.dataclass(frozen=True)
class StoredRow:
    """The working_memory row of a stored entry."""

    memory_id: str
    live: bool
    has_legacy_row: bool


def find_stored(connection: Any, now: str, only_key: str | None = None) -> dict[str, StoredRow]:
    """Key -> row for every stored entry (or only `only_key`), through apsw or Python's sqlite3.

    The LIKE prefilter keeps json_extract off rows that cannot match; all rows are fetched at once so
    no statement keeps a read snapshot open.
    """
    needle = only_key if only_key is not None else METADATA_KEY
    legacy = bool(
        connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories'"
        ).fetchall()
    )
    rows = connection.execute(
        "SELECT w.id, json_extract(w.metadata_json, '$.\"' || ?1 || '\".key'), "
        "(w.superseded_by IS NULL OR w.superseded_by = '') "
        "AND (w.valid_until IS NULL OR w.valid_until > ?3), "
        + ("EXISTS (SELECT 1 FROM memories AS m WHERE m.id = w.id) " if legacy else "1 ")
        + "FROM working_memory AS w WHERE w.metadata_json LIKE ?2 AND json_valid(w.metadata_json) "
        "ORDER BY w.rowid",
        (METADATA_KEY, f'%"{needle}"%', now),
    ).fetchall()
    found: dict[str, StoredRow] = {}
    for memory_id, key, live, has_legacy in rows:
        if not isinstance(key, str) or (only_key is not None and key != only_key):
            continue
        # Two rows with one key cannot come from us (the key is looked up before every insert);
        # the first one written is the entry's.
        found.setdefault(key, StoredRow(str(memory_id), bool(live), bool(has_legacy)))
    return found
