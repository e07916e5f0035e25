"""The sleep stages' own tables in state.db (never in Mnemosyne's database).

- ``sleep_memories``: one row per memory seen (``w:<id>`` working, ``e:<id>`` episodic): the inputs
  of its prominence as last read (kind, importance, confidence, anchor timestamp, exemption, live),
  its confirmations, whether the reinforcement stage has checked it (and on which night: the
  nightly quota of checks), the night it was first seen, and its prominence, utility and band at
  the night's reference moment.
- ``sleep_confirmations``: one row per restatement: the memory that restated (or the exact
  restatement's time) and the original it confirms.
- ``sleep_archive``: what a stage closed (``forgotten`` or ``contradicted``), with the values before
  and the stamp written, recorded before the write, so ``mnemo-ops forgotten restore`` clears exactly
  our stamp. ``applied``: 0 planned, 1 written, -1 given up (the row changed before it was written).
- ``sleep_nights``: the once-a-night work done per night (the age pass, the edge pass).
- ``sleep_importance``: each importance the importance stage raised (the row, why, the night, the
  value before and after), recorded before the write, so ``mnemo-ops importance restore`` puts back
  exactly the value before; ``applied`` as in ``sleep_archive``.
- ``sleep_fact_holders``: the archive candidates forgetting kept because they are the only place
  a fact is held (the night it found so and the items), so later nights do not judge them again.
- ``sleep_graduation``: each write of the graduation stage, recorded before it is made: a row
  stored (the owner, the statement, its sources, the method, the row it became), a row reinforced
  by a restatement, a row superseded by a changed fact; ``applied`` as in ``sleep_archive``,
  ``restored_at`` when ``graduation.restore`` closed it.
- ``sleep_graduation_sources``: every user row the graduation stage judged (graduated, merged into
  a graduated row, or passed over), with the record it went into: read once, and a source of a
  graduated row is never archived by forgetting.
- ``sleep_cursors``: where a stage that reads new rows once stopped (the working memory rowid).
- ``sleep_edge_journal``: the weight each of our edges had and gets tonight, written before the edge
  is, so a run killed halfway never scales an edge twice.

Rollback-journal state.db (``core.state``), served by Python's sqlite3 through sqlite-utils.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

WORKING = "working_memory"
EPISODIC = "episodic_memory"
PREFIX = {WORKING: "w:", EPISODIC: "e:"}
TABLE_OF_PREFIX = {prefix: table for table, prefix in PREFIX.items()}

MEMORIES = "sleep_memories"
CONFIRMATIONS = "sleep_confirmations"
ARCHIVE = "sleep_archive"
NIGHTS = "sleep_nights"
EDGE_JOURNAL = "sleep_edge_journal"
IMPORTANCE = "sleep_importance"
CURSORS = "sleep_cursors"
FACT_HOLDERS = "sleep_fact_holders"
GRADUATION = "sleep_graduation"
GRADUATION_SOURCES = "sleep_graduation_sources"

FORGOTTEN = "forgotten"
CONTRADICTED = "contradicted"
PLANNED, APPLIED, ABANDONED = 0, 1, -1

_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {MEMORIES} (
        memory_key TEXT PRIMARY KEY,
        kind TEXT, importance REAL, confidence REAL, anchor TEXT, exempt TEXT,
        live INTEGER NOT NULL DEFAULT 1,
        confirmations INTEGER NOT NULL DEFAULT 0, last_confirmed TEXT,
        reinforced INTEGER NOT NULL DEFAULT 0, first_night TEXT,
        prominence REAL, utility REAL, band TEXT, dirty INTEGER NOT NULL DEFAULT 1,
        checked_night TEXT)""",
    f"CREATE INDEX IF NOT EXISTS {MEMORIES}_checked ON {MEMORIES}(checked_night) "
    "WHERE checked_night IS NOT NULL",
    f"CREATE INDEX IF NOT EXISTS {MEMORIES}_band ON {MEMORIES}(band, utility)",
    f"CREATE INDEX IF NOT EXISTS {MEMORIES}_unreinforced ON {MEMORIES}(anchor) "
    "WHERE reinforced = 0",
    f"CREATE INDEX IF NOT EXISTS {MEMORIES}_dirty ON {MEMORIES}(memory_key) WHERE dirty = 1",
    f"""CREATE TABLE IF NOT EXISTS {CONFIRMATIONS} (
        restatement_key TEXT PRIMARY KEY, original_key TEXT NOT NULL, method TEXT NOT NULL,
        similarity REAL, confirmed_at TEXT, night TEXT NOT NULL, recorded_at TEXT)""",
    f"CREATE INDEX IF NOT EXISTS {CONFIRMATIONS}_original ON {CONFIRMATIONS}(original_key)",
    f"CREATE INDEX IF NOT EXISTS {CONFIRMATIONS}_night ON {CONFIRMATIONS}(night)",
    f"""CREATE TABLE IF NOT EXISTS {ARCHIVE} (
        id INTEGER PRIMARY KEY, memory_key TEXT NOT NULL, reason TEXT NOT NULL,
        night TEXT NOT NULL, valid_until_before TEXT, valid_until_after TEXT,
        superseded_by_before TEXT, superseded_by_after TEXT, prominence REAL, utility REAL,
        detail TEXT, recorded_at TEXT, applied INTEGER NOT NULL DEFAULT 0,
        restored_at TEXT, restore_note TEXT,
        UNIQUE (memory_key, reason, night))""",
    f"CREATE INDEX IF NOT EXISTS {ARCHIVE}_night ON {ARCHIVE}(night, reason)",
    f"""CREATE TABLE IF NOT EXISTS {NIGHTS} (
        night TEXT NOT NULL, stage TEXT NOT NULL, completed_at TEXT,
        PRIMARY KEY (night, stage))""",
    f"""CREATE TABLE IF NOT EXISTS {EDGE_JOURNAL} (
        night TEXT NOT NULL, edge_id INTEGER NOT NULL, weight_before REAL, weight_after REAL,
        coactive INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (night, edge_id))""",
    f"""CREATE TABLE IF NOT EXISTS {IMPORTANCE} (
        id INTEGER PRIMARY KEY, memory_key TEXT NOT NULL UNIQUE, reason TEXT NOT NULL,
        night TEXT NOT NULL, importance_before REAL, importance_after REAL NOT NULL,
        recorded_at TEXT, applied INTEGER NOT NULL DEFAULT 0, restored_at TEXT,
        restore_note TEXT)""",
    f"CREATE INDEX IF NOT EXISTS {IMPORTANCE}_night ON {IMPORTANCE}(night, applied)",
    f"CREATE TABLE IF NOT EXISTS {CURSORS} (name TEXT PRIMARY KEY, position INTEGER NOT NULL)",
    f"""CREATE TABLE IF NOT EXISTS {GRADUATION} (
        id INTEGER PRIMARY KEY, op TEXT NOT NULL, graduation_key TEXT NOT NULL, owner TEXT NOT NULL,
        night TEXT NOT NULL, content TEXT, derived_from TEXT NOT NULL, said_on TEXT,
        importance REAL, method TEXT, memory_id TEXT, replaced_by TEXT, recorded_at TEXT,
        applied INTEGER NOT NULL DEFAULT 0,
        restored_at TEXT, restore_note TEXT)""",
    f"CREATE INDEX IF NOT EXISTS {GRADUATION}_night ON {GRADUATION}(night, applied)",
    f"""CREATE TABLE IF NOT EXISTS {GRADUATION_SOURCES} (
        memory_key TEXT PRIMARY KEY, graduation_id INTEGER, night TEXT NOT NULL, outcome TEXT)""",
    f"""CREATE TABLE IF NOT EXISTS {FACT_HOLDERS} (
        memory_key TEXT PRIMARY KEY, night TEXT NOT NULL, items TEXT)""",
)


def ensure_tables(state_db) -> None:
    """Create the sleep tables and indexes (idempotent; never in a dry run)."""
    with state_db.conn:
        for statement in _DDL:
            state_db.conn.execute(statement)


def has_tables(state_db) -> bool:
    """True when state.db holds the sleep tables (it may be None or older in a dry run)."""
    return state_db is not None and MEMORIES in state_db.table_names()


def key_of(table: str, memory_id: str) -> str:
    """``w:<id>`` or ``e:<id>``."""
    return PREFIX[table] + memory_id


def split_key(memory_key: str) -> tuple[str, str]:
    """(table, memory id) of a memory key."""
    return TABLE_OF_PREFIX[memory_key[:2]], memory_key[2:]


def rows(state_db, sql: str, parameters: Iterable[Any] = ()) -> Iterator[dict[str, Any]]:
    """Query state.db; rows as dicts."""
    cursor = state_db.conn.execute(sql, list(parameters))
    names = [column[0] for column in cursor.description]
    for row in cursor:
        yield dict(zip(names, row))


def stage_done(state_db, night: str, stage: str) -> bool:
    """True when `stage`'s once-a-night work is recorded as done for `night`."""
    return (
        state_db.conn.execute(
            f"SELECT 1 FROM {NIGHTS} WHERE night = ? AND stage = ?", (night, stage)
        ).fetchone()
        is not None
    )


def mark_stage_done(state_db, night: str, stage: str, completed_at: str) -> None:
    """Record that `stage`'s once-a-night work is done for `night` (its own transaction)."""
    with state_db.conn:
        state_db.conn.execute(
            f"INSERT OR IGNORE INTO {NIGHTS} (night, stage, completed_at) VALUES (?, ?, ?)",
            (night, stage, completed_at),
        )


def chunks(items: list, size: int = 500) -> Iterator[list]:
    """`items` in lists of at most `size` (for IN (...) lists and write batches)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def written_records(
    state_db, table: str, night: str | None = None, include_restored: bool = False
) -> list[dict[str, Any]]:
    """A stage's records in `table` that were written, newest night first (optionally one night's,
    or also the restored ones); none when state.db or the table is missing."""
    if state_db is None or table not in state_db.table_names():
        return []
    conditions, parameters = ["applied = 1"], []
    if night:
        conditions.append("night = ?")
        parameters.append(night)
    if not include_restored:
        conditions.append("restored_at IS NULL")
    return list(
        rows(
            state_db,
            f"SELECT * FROM {table} WHERE {' AND '.join(conditions)} ORDER BY night DESC, id",
            parameters,
        )
    )


def named_records(
    entries: list[dict[str, Any]], memory_ids: list[str], night: str | None, everything: bool
) -> list[dict[str, Any]]:
    """Of `entries` (already one night's when `night`), those a restore names: all, or by id."""
    if everything or night:
        return entries
    wanted = set(memory_ids)
    return [entry for entry in entries if split_key(entry["memory_key"])[1] in wanted]
