"""The first thing a sleep does: see what changed in the memory database since the last one.

Working and episodic memories are read in id order and merged with ``sleep_memories`` in key order
(one pass each, constant memory), so only what differs is written: a memory seen for the first time
gets its row; one whose prominence inputs changed (importance, kind, confidence, timestamp,
exemption, liveness) is updated and marked dirty for the prominence stage; one that disappeared is
marked not live. Nothing is written for a memory that did not change, so a night with nothing new
writes nothing here.

An exact restatement counts as a confirmation: Mnemosyne folds a memory stored again word for word
into the existing row and moves its timestamp forward, so a working row whose timestamp moved
forward was restated (it confirms itself, or the original it restates).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.database import facts
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now
from mnemo_ops.jobs.evening_batch.sleep import kinds, store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.jobs.evening_batch.sleep.prominence import parse_moment

PAGE = 10000
"""State rows read per query (a page is fully read before anything is written)."""
EXACT = "exact"
INPUTS = ("kind", "importance", "confidence", "anchor", "exempt", "live")

_COLUMNS = (
    "id",
    "importance",
    "veracity",
    "memory_type",
    "source",
    "timestamp",
    "pinned",
    "valid_until",
    "superseded_by",
    "metadata_json",
    "content",
)
CHATTER_LENGTH = 200
"""Only texts up to this many characters are read to see whether they are chatter: a greeting or an
acknowledgement is short, and reading every long turn each night would make the pass cost grow with
the text instead of the rows."""


@dataclasses.dataclass
class ObserveTotals:
    """What the pass saw and wrote."""

    seen: int = 0
    new: int = 0
    changed: int = 0
    gone: int = 0
    exact_restatements: int = 0
    newest_timestamp: str | None = None
    """The newest working-memory timestamp seen: what the next --if-needed check calls new."""

    def to_stats(self) -> dict[str, int]:
        """For the result's stats."""
        return dataclasses.asdict(self)


def current_lineage_ids(connection: apsw.Connection) -> set[str]:
    """Working ids holding a current canonical lineage (``source = 'auto:<id>'``, not closed)."""
    if "canonical_facts" not in database.table_names(connection):
        return set()
    return {
        row[0]
        for row in connection.execute(
            "SELECT substr(source, 6) FROM canonical_facts "
            "WHERE source LIKE 'auto:%' AND valid_until IS NULL"
        )
    }


def _select(connection: apsw.Connection, table: str) -> str:
    """The memory query, with NULL for a column this Mnemosyne version does not have."""
    present = set(database.column_names(connection, table))
    parts = []
    for column in _COLUMNS:
        if column not in present:
            parts.append("NULL")
        elif column == "metadata_json":
            # Parsing every row's metadata would dominate the pass; only rows that may say something.
            hints = " OR ".join(
                f"instr(metadata_json, '{hint}') > 0" for hint in kinds.METADATA_HINTS
            )
            parts.append(f"CASE WHEN {hints} THEN metadata_json END")
        elif column == "content":
            parts.append(f"CASE WHEN length(content) <= {CHATTER_LENGTH} THEN content END")
        else:
            parts.append(column)
    return f"SELECT {', '.join(parts)} FROM {table} ORDER BY id"


def short_text(row: tuple) -> str | None:
    """The text of a memory row read by the pass when it is short enough to be judged chatter."""
    text = row[10] if len(row) > 10 else None
    # The length is checked here too: a caller may read the whole text (a summary just written).
    return text if text is not None and len(text) <= CHATTER_LENGTH else None


def is_short_chatter(row: tuple) -> bool:
    """Whether a memory row read by the pass is chatter (its text, when short enough to be read)."""
    text = short_text(row)
    return text is not None and facts.is_chatter(text)


def inputs_of(
    row: tuple, table: str, lineage: set[str], now: str
) -> tuple[str, float, float, str | None, str | None, int]:
    """(kind, importance, confidence, anchor, exempt, live) of one memory row."""
    memory_id, importance, veracity, memory_type, source, timestamp, pinned = row[:7]
    valid_until, superseded_by, metadata_json = row[7:10]
    moment = parse_moment(timestamp)
    live = int(not superseded_by and (valid_until is None or str(valid_until) > now))
    holds_lineage = table == store.WORKING and memory_id in lineage
    return (
        kinds.kind_of(source, memory_type, veracity, text=short_text(row)),
        float(importance) if importance is not None else 0.0,
        kinds.confidence_of(veracity, metadata_json),
        moment.isoformat() if moment is not None else None,
        kinds.exemption(bool(pinned), source, metadata_json, holds_lineage),
        live,
    )


def _state_pages(state_db, prefix: str) -> Iterator[dict[str, Any]]:
    """The state rows of one table in key order, a page at a time (keyset pagination)."""
    after = prefix
    end = prefix[0] + chr(ord(prefix[1]) + 1)  # "w:" .. "w;" holds every "w:" key
    while True:
        page = list(
            store.rows(
                state_db,
                f"SELECT memory_key, {', '.join(INPUTS)} FROM {store.MEMORIES} "
                "WHERE memory_key > ? AND memory_key < ? ORDER BY memory_key LIMIT ?",
                (after, end, PAGE),
            )
        )
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1]["memory_key"]


class _Writer:
    """Buffers the pass's state writes and flushes them in transactions between state pages."""

    def __init__(self, run: SleepRun, state_db):
        self.run, self.state_db = run, state_db
        self.inserts: list[tuple] = []
        self.updates: list[tuple] = []
        self.gone: list[tuple] = []
        self.restatements: list[tuple] = []

    def pending(self) -> int:
        return len(self.inserts) + len(self.updates) + len(self.gone) + len(self.restatements)

    def flush(self) -> None:
        if not self.pending():
            return
        self.run.before_write()
        connection = self.state_db.conn
        with connection:
            connection.executemany(
                f"INSERT INTO {store.MEMORIES} (memory_key, kind, importance, confidence, anchor, "
                "exempt, live, reinforced, first_night, dirty) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                self.inserts,
            )
            connection.executemany(
                f"UPDATE {store.MEMORIES} SET kind = ?, importance = ?, confidence = ?, anchor = ?, "
                "exempt = ?, live = ?, dirty = 1 WHERE memory_key = ?",
                self.updates,
            )
            connection.executemany(
                f"UPDATE {store.MEMORIES} SET live = 0, dirty = 1 WHERE memory_key = ?", self.gone
            )
            connection.executemany(
                f"INSERT OR IGNORE INTO {store.CONFIRMATIONS} (restatement_key, original_key, "
                "method, similarity, confirmed_at, night, recorded_at) VALUES (?, ?, ?, 100, ?, ?, ?)",
                self.restatements,
            )
            originals = sorted({row[1] for row in self.restatements})
            refresh_confirmations(self.state_db, originals)
        self.inserts, self.updates, self.gone, self.restatements = [], [], [], []


def refresh_confirmations(state_db, original_keys: list[str]) -> None:
    """Recount the confirmations of `original_keys` from ``sleep_confirmations`` (idempotent)."""
    state_db.conn.executemany(
        f"UPDATE {store.MEMORIES} SET "
        f"confirmations = (SELECT count(*) FROM {store.CONFIRMATIONS} WHERE original_key = ?1), "
        f"last_confirmed = (SELECT max(confirmed_at) FROM {store.CONFIRMATIONS} "
        "WHERE original_key = ?1), dirty = 1 WHERE memory_key = ?1",
        [(key,) for key in original_keys],
    )


def original_of(state_db, memory_key: str, limit: int = 16) -> str:
    """The original a memory restates (itself when it restates nothing), following chains."""
    current = memory_key
    for _ in range(limit):
        row = state_db.conn.execute(
            f"SELECT original_key FROM {store.CONFIRMATIONS} WHERE restatement_key = ?", (current,)
        ).fetchone()
        if row is None or row[0] == current:
            return current
        current = row[0]
    return current


def observe(run: SleepRun) -> ObserveTotals:
    """Merge the memory database into ``sleep_memories`` (module docstring)."""
    totals = ObserveTotals()
    connection = run.open_memory(readonly=True)
    state_db = run.open_state()
    try:
        lineage = current_lineage_ids(connection)
        now = local_timestamp()
        recorded_at = isoformat(utc_now())
        writer = _Writer(run, state_db)
        for table in (store.EPISODIC, store.WORKING):
            prefix = store.PREFIX[table]
            memories = connection.execute(_select(connection, table))
            stored = _state_pages(state_db, prefix)
            saved = next(stored, None)
            for row in memories:
                totals.seen += 1
                key = prefix + str(row[0])
                while saved is not None and saved["memory_key"] < key:
                    if saved["live"]:
                        writer.gone.append((saved["memory_key"],))
                        totals.gone += 1
                    saved = next(stored, None)
                inputs = inputs_of(row, table, lineage, now)
                if (
                    table == store.WORKING
                    and row[5]
                    and (totals.newest_timestamp is None or str(row[5]) > totals.newest_timestamp)
                ):
                    totals.newest_timestamp = str(row[5])
                if saved is None or saved["memory_key"] != key:
                    reinforced = 0 if table == store.WORKING else 1
                    writer.inserts.append((key, *inputs, reinforced, run.night.key))
                    totals.new += 1
                else:
                    before = tuple(saved[name] for name in INPUTS)
                    if before != inputs:
                        writer.updates.append((*inputs, key))
                        totals.changed += 1
                        # Saying "ok thanks" again confirms nothing worth keeping.
                        if _restated(table, saved, inputs) and not is_short_chatter(row):
                            original = original_of(state_db, key)
                            writer.restatements.append(
                                (
                                    f"{key}@{inputs[3]}",
                                    original,
                                    EXACT,
                                    inputs[3],
                                    run.night.key,
                                    recorded_at,
                                )
                            )
                            totals.exact_restatements += 1
                    saved = next(stored, None)
                if writer.pending() >= PAGE:
                    # The state cursor pages are fully read, so writing now never disturbs them.
                    writer.flush()
            while saved is not None:
                if saved["live"]:
                    writer.gone.append((saved["memory_key"],))
                    totals.gone += 1
                saved = next(stored, None)
            writer.flush()
    finally:
        state_db.close()
        connection.close()
    run.count("confirmations", totals.exact_restatements)
    return totals


def _restated(table: str, saved: dict[str, Any], inputs: tuple) -> bool:
    """A live working row whose timestamp moved forward: Mnemosyne folded a restatement into it."""
    anchor_before, anchor_now = saved["anchor"], inputs[3]
    return bool(
        table == store.WORKING
        and saved["live"]
        and inputs[5]
        and anchor_before
        and anchor_now
        and anchor_now > anchor_before
    )
