"""Reinforcement: the user restating a fact confirms it; a proven contradiction closes the older one.

**Confirmations** come from the user restating something, never from retrieval (recall counts are
never read). A working memory not yet checked is compared with the older memories its rarest shared
terms find in ``fts_working`` (bm25 order, a few candidates): one that is live, written earlier, has
the same subject (its first content word: "Dana's sister ..." and "Dana's sister ..." agree, "Dana
prefers ..." and "Anna prefers ..." do not), the same numbers ("at 5" never restates "at 6") and a
rapidfuzz ratio of at least
``sleep.confirmation_similarity`` (93) is the original it restates. The restatement is recorded as a
confirmation of that original (of the original's own original, when it restates one in turn), and
with ``sleep.confirmation_edges`` linked to it by a ``mnemo:confirms`` edge (off by default:
Mnemosyne's recall scans every edge once per candidate for its edge bonus, which the Hermes plugin's
recall pays each turn while never following one); it is not a new fact: it collects no confirmations of its
own. Nothing is closed: both rows stay.

**Contradictions** are closed only when a deterministic check proves them, in the stores that keep
one current value per slot: a triple whose (subject, predicate) has one current object and an older,
closed object that differs (Mnemosyne's TripleStore closed it), or a canonical slot whose current
body differs from an older, closed body, where both values name the working memories they came from
(the triple's or fact's ``source`` is a working id, or ``auto:<id>``). Then the older memory gets
``superseded_by`` = the newer and ``valid_until`` = now, a ``mnemo:contradicts`` edge links the
newer to it, and the values before are recorded in ``sleep_archive`` first (``mnemo-ops forgotten
restore`` puts them back). Free text is never parsed into a contradiction: two memories that merely
look different both stay. A pinned memory is never closed; one the user restored is never closed
again for the same contradiction.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import apsw
from rapidfuzz import fuzz, utils

from mnemo_ops import database
from mnemo_ops.database import facts, transactions
from mnemo_ops.database.fts_query import Vocabulary, match_expression, salient_terms, tokens
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now
from mnemo_ops.jobs.evening_batch.sleep import edges, store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.jobs.evening_batch.sleep.observe import original_of, refresh_confirmations
from mnemo_ops.jobs.evening_batch.sleep.planned import apply_planned

NEAR_DUPLICATE = "near-duplicate"
QUERY_TERMS = 4
CANDIDATES = 8
MAX_TERM_DOCUMENTS = 2000
"""A term held by more memories than this is left out of the query (bm25 scores every memory a
query matches, so this bounds the work per memory); a memory made only of such words is chatter,
and its look-alikes are not worth confirming."""
BATCH = 200
_SUBJECT_STOPWORDS_TEXT = (
    "a an the this that these those my our your his her their its i we you he she they it me us "
    "him them mine ours yours also so then and or but if when while there here one some just "
    "really maybe well oh ok okay yes no not to of in on at for with by from as about"
)
SUBJECT_STOPWORDS = frozenset(_SUBJECT_STOPWORDS_TEXT.split())


@dataclasses.dataclass
class Confirmation:
    """A restatement and the original it confirms."""

    restatement_id: str
    original_key: str
    similarity: float
    confirmed_at: str


@dataclasses.dataclass(frozen=True)
class Contradiction:
    """A proven contradiction: the newer memory closes the older one."""

    newer_id: str
    older_id: str
    evidence: str  # "triple" or "canonical"
    slot: str
    older_value: str
    newer_value: str


def subject_of(text: str) -> str | None:
    """The first content word of `text` (lower case, as the FTS index holds it), or None."""
    for token in tokens(text, limit=16):
        if token not in SUBJECT_STOPWORDS and not token.isdigit():
            return token
    return None


_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


def numbers_of(text: str) -> frozenset[str]:
    """The numbers written in `text`: "at 5" and "at 6" are two facts, however alike."""
    return frozenset(_NUMBER.findall(text or ""))


def similarity(first: str, second: str) -> float:
    """rapidfuzz's ratio of the two texts, case and punctuation ignored (0..100)."""
    return fuzz.ratio(first, second, processor=utils.default_process)


def _candidates(
    connection: apsw.Connection, vocabulary: Vocabulary, memory_id: str, content: str
) -> list[str]:
    """Ids of the memories that share this one's rarest terms, best bm25 first."""
    # The rarest terms it shares with another memory: a restatement holds nearly all of its words,
    # so it holds these, whatever their frequency (no share cap, as a fact restated often is common).
    terms = salient_terms(
        content, vocabulary, limit=QUERY_TERMS, max_document_share=1.0, min_documents=2
    )
    frequency = vocabulary.document_frequency(terms)
    terms = [term for term in terms if frequency[term] <= MAX_TERM_DOCUMENTS]
    expression = match_expression(terms, max_terms=QUERY_TERMS)
    if expression is None:
        return []
    return [
        row[0]
        for row in connection.execute(
            "SELECT id FROM fts_working WHERE fts_working MATCH ? ORDER BY rank LIMIT ?",
            (expression, CANDIDATES + 1),
        )
        if row[0] != memory_id
    ]


def _rows(connection: apsw.Connection, ids: list[str], now: str) -> dict[str, dict[str, Any]]:
    """Live working rows by id: content and timestamp."""
    found: dict[str, dict[str, Any]] = {}
    for chunk in store.chunks(ids):
        for row in database.fetch_dicts(
            connection,
            f"SELECT id, content, timestamp FROM working_memory WHERE id IN "
            f"({','.join('?' * len(chunk))}) AND {database.live_condition()}",
            (*chunk, now),
        ):
            found[row["id"]] = row
    return found


def find_original(
    connection: apsw.Connection,
    vocabulary: Vocabulary,
    row: dict[str, Any],
    threshold: float,
    now: str,
) -> tuple[str, float] | None:
    """The older memory `row` restates and the similarity, or None (module docstring)."""
    if facts.is_chatter(row["content"]):
        # A greeting said again confirms nothing: counted, it would keep chatter from decaying.
        return None
    subject = subject_of(row["content"])
    if subject is None:
        return None
    numbers = numbers_of(row["content"])
    ids = _candidates(connection, vocabulary, row["id"], row["content"])
    if not ids:
        return None
    matches = []  # (similarity, timestamp, id)
    for candidate in _rows(connection, ids, now).values():
        if not candidate["timestamp"] or not row["timestamp"]:
            continue
        if candidate["timestamp"] >= row["timestamp"]:
            continue  # only a later turn restates an earlier one
        if subject_of(candidate["content"]) != subject:
            continue
        if numbers_of(candidate["content"]) != numbers:
            continue
        score = similarity(row["content"], candidate["content"])
        if score >= threshold:
            matches.append((score, candidate["timestamp"], candidate["id"]))
    if not matches:
        return None
    # The most similar; among equals the oldest (the original rather than another restatement).
    score, _, original_id = min(matches, key=lambda match: (-match[0], match[1], match[2]))
    return original_id, score


def confirm_restatements(run: SleepRun) -> dict[str, int]:
    """Check up to ``reinforcement_rows_per_night`` unchecked working memories for restatements.

    The quota is the night's, not the run's: a second run in the same night (the guard's trial and
    the live run see the same state; a rerun after a kill) checks only what the night's quota has
    left, so with nothing new it checks nothing. A backlog (the first nights on a large database)
    is worked off a quota a night, oldest first.
    """
    totals = {"checked": 0, "confirmations": 0, "edges_created": 0}
    state_db = run.open_state()
    connection = run.open_memory()
    try:
        with state_db.conn:  # a memory that is no longer live needs no check
            state_db.conn.execute(
                f"UPDATE {store.MEMORIES} SET reinforced = 1 WHERE reinforced = 0 AND live = 0"
            )
        checked_tonight = state_db.conn.execute(
            f"SELECT count(*) FROM {store.MEMORIES} WHERE checked_night = ?", (run.night.key,)
        ).fetchone()[0]
        quota = max(0, run.options.reinforcement_rows_per_night - checked_tonight)
        totals["backlog"] = state_db.conn.execute(
            f"SELECT count(*) FROM {store.MEMORIES} WHERE reinforced = 0 "
            "AND memory_key >= 'w:' AND memory_key < 'w;'"
        ).fetchone()[0]
        pending = [
            row[0]
            for row in state_db.conn.execute(
                f"SELECT memory_key FROM {store.MEMORIES} WHERE reinforced = 0 "
                "AND memory_key >= 'w:' AND memory_key < 'w;' ORDER BY anchor, memory_key LIMIT ?",
                (quota,),
            )
        ]
        vocabulary = Vocabulary(connection) if pending else None
        now = local_timestamp()
        for batch in store.chunks(pending, BATCH):
            ids = [store.split_key(key)[1] for key in batch]
            rows = _rows(connection, ids, now)
            found: list[Confirmation] = []
            decided: dict[str, str] = {}  # this batch's restatements, for chains inside it
            for memory_id in ids:  # in the pending (oldest first) order
                row = rows.get(memory_id)
                if row is None:
                    continue
                match = find_original(
                    connection, vocabulary, row, run.options.confirmation_similarity, now
                )
                if match is None:
                    continue
                # A restatement of a restatement confirms the first memory of the chain. `decided`
                # holds this batch's restatements (not in state.db yet), already resolved.
                matched = store.key_of(store.WORKING, match[0])
                original_key = decided.get(matched) or original_of(state_db, matched)
                original_key = decided.get(original_key, original_key)
                decided[store.key_of(store.WORKING, memory_id)] = original_key
                found.append(Confirmation(memory_id, original_key, match[1], row["timestamp"]))
            totals["checked"] += len(batch)
            if found and run.options.confirmation_edges:
                run.before_write()
                totals["edges_created"] += transactions.write_batch(
                    connection,
                    lambda conn, found=found: _link(conn, found),
                    label="sleep-confirmations",
                )
            _record(run, state_db, batch, found)
            totals["confirmations"] += len(found)
    finally:
        connection.close()
        state_db.close()
    run.count("confirmations", totals["confirmations"])
    run.count("confirmation_edges_created", totals["edges_created"])
    return totals


def _link(connection: apsw.Connection, found: list[Confirmation]) -> int:
    """The ``mnemo:confirms`` edges (restatement -> original) not already there."""
    stamp = local_timestamp()
    return sum(
        edges.insert_once(
            connection,
            item.restatement_id,
            store.split_key(item.original_key)[1],
            edges.CONFIRMS,
            round(item.similarity / 100.0, 4),
            stamp,
        )
        for item in found
    )


def _record(run: SleepRun, state_db, batch: list[str], found: list[Confirmation]) -> None:
    """Record the batch's confirmations and mark its memories checked (one state transaction)."""
    if found or batch:
        run.before_write()
    recorded_at = isoformat(utc_now())
    with state_db.conn:
        state_db.conn.executemany(
            f"INSERT OR IGNORE INTO {store.CONFIRMATIONS} (restatement_key, original_key, method, "
            "similarity, confirmed_at, night, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    store.key_of(store.WORKING, item.restatement_id),
                    item.original_key,
                    NEAR_DUPLICATE,
                    round(item.similarity, 2),
                    item.confirmed_at,
                    run.night.key,
                    recorded_at,
                )
                for item in found
            ],
        )
        state_db.conn.executemany(
            f"UPDATE {store.MEMORIES} SET reinforced = 1, checked_night = ? WHERE memory_key = ?",
            [(run.night.key, key) for key in batch],
        )
        refresh_confirmations(state_db, sorted({item.original_key for item in found}))


# --- contradictions --------------------------------------------------------------------------------


def _working_id(source: str | None, known: set[str]) -> str | None:
    """The working memory a triple's or canonical fact's source names, if it names one."""
    if not source:
        return None
    text = str(source)
    if text.startswith("auto:"):
        text = text[len("auto:") :]
    return text if text in known else None


def _triple_pairs(connection: apsw.Connection, multi_valued: tuple[str, ...]) -> list[tuple]:
    if "triples" not in database.table_names(connection):
        return []
    pairs = connection.execute(
        "SELECT old.source, new.source, old.subject || ' ' || old.predicate, old.object, new.object, "
        "old.predicate FROM triples AS new JOIN triples AS old "
        "ON old.subject = new.subject AND old.predicate = new.predicate AND old.id <> new.id "
        "WHERE new.valid_until IS NULL AND old.valid_until IS NOT NULL "
        "AND old.object IS NOT new.object "
        "AND (SELECT count(*) FROM triples AS other WHERE other.subject = new.subject "
        "AND other.predicate = new.predicate AND other.valid_until IS NULL) = 1"
    ).fetchall()
    return [("triple", *pair[:5]) for pair in pairs if pair[5] not in multi_valued]


def _canonical_pairs(connection: apsw.Connection) -> list[tuple]:
    if "canonical_facts" not in database.table_names(connection):
        return []
    return [
        ("canonical", *row)
        for row in connection.execute(
            "SELECT old.source, new.source, new.owner_id || '/' || new.category || '/' || new.name, "
            "old.body, new.body FROM canonical_facts AS new JOIN canonical_facts AS old "
            "ON old.owner_id = new.owner_id AND old.category = new.category AND old.name = new.name "
            "AND old.id <> new.id WHERE new.valid_until IS NULL AND old.valid_until IS NOT NULL "
            "AND old.body IS NOT new.body AND old.source IS NOT new.source"
        )
    ]


def find_contradictions(
    connection: apsw.Connection, state_db, multi_valued: tuple[str, ...] = ()
) -> list[Contradiction]:
    """Proven contradictions still to close (module docstring), oldest memory first, each once.

    `state_db` may be None (nothing recorded yet); a pair the user restored is not proposed again.
    """
    raw = _triple_pairs(connection, multi_valued) + _canonical_pairs(connection)
    if not raw:
        return []
    named = {value for pair in raw for value in (pair[1], pair[2]) if value}
    named |= {value[len("auto:") :] for value in named if str(value).startswith("auto:")}
    now = local_timestamp()
    rows: dict[str, dict[str, Any]] = {}
    pinned_column = "pinned" in database.column_names(connection, "working_memory")
    for chunk in store.chunks(sorted(named)):
        for row in database.fetch_dicts(
            connection,
            "SELECT id, timestamp, "
            + ("coalesce(pinned, 0) AS pinned, " if pinned_column else "0 AS pinned, ")
            + f"CASE WHEN {database.live_condition()} THEN 1 ELSE 0 END AS live "
            f"FROM working_memory WHERE id IN ({','.join('?' * len(chunk))})",
            (now, *chunk),
        ):
            rows[row["id"]] = row
    restored = _restored_contradictions(state_db)
    chosen: dict[str, Contradiction] = {}
    for evidence, old_source, new_source, slot, old_value, new_value in raw:
        older_id = _working_id(old_source, set(rows))
        newer_id = _working_id(new_source, set(rows))
        if older_id is None or newer_id is None or older_id == newer_id:
            continue
        older, newer = rows[older_id], rows[newer_id]
        if not (older["live"] and newer["live"]) or older["pinned"]:
            continue
        if not older["timestamp"] or not newer["timestamp"]:
            continue
        if older["timestamp"] >= newer["timestamp"]:
            continue  # only a newer memory closes an older one
        if store.key_of(store.WORKING, older_id) in restored:
            continue
        candidate = Contradiction(
            newer_id, older_id, evidence, str(slot), str(old_value), str(new_value)
        )
        kept = chosen.get(older_id)
        if kept is None or (candidate.newer_id, candidate.evidence) < (
            kept.newer_id,
            kept.evidence,
        ):
            chosen[older_id] = candidate
    return [chosen[key] for key in sorted(chosen, key=lambda key: (rows[key]["timestamp"], key))]


def _restored_contradictions(state_db) -> set[str]:
    if not store.has_tables(state_db):
        return set()
    return {
        row[0]
        for row in state_db.conn.execute(
            f"SELECT memory_key FROM {store.ARCHIVE} WHERE reason = ? AND restored_at IS NOT NULL",
            (store.CONTRADICTED,),
        )
    }


def close_contradictions(run: SleepRun) -> dict[str, int]:
    """Close every proven contradiction: recorded in state.db first, then one short write each batch."""
    totals = {"found": 0, "closed": 0, "edges_created": 0, "abandoned": 0}
    state_db = run.open_state()
    connection = run.open_memory()
    try:
        _plan_contradictions(run, state_db, connection, totals)
        _apply_planned(run, state_db, connection, totals)
    finally:
        connection.close()
        state_db.close()
    run.count("memories_superseded", totals["closed"])
    run.count("contradiction_edges_created", totals["edges_created"])
    return totals


def _plan_contradictions(run: SleepRun, state_db, connection, totals: dict[str, int]) -> None:
    found = find_contradictions(connection, state_db, run.multi_valued_predicates)
    totals["found"] = len(found)
    if not found:
        return
    current = {
        row["id"]: row
        for chunk in store.chunks([item.older_id for item in found])
        for row in database.fetch_dicts(
            connection,
            "SELECT id, valid_until, superseded_by FROM working_memory WHERE id IN "
            f"({','.join('?' * len(chunk))})",
            chunk,
        )
    }
    stamp = local_timestamp()
    recorded_at = isoformat(utc_now())
    run.before_write()
    with state_db.conn:
        state_db.conn.executemany(
            f"INSERT OR IGNORE INTO {store.ARCHIVE} (memory_key, reason, night, valid_until_before, "
            "valid_until_after, superseded_by_before, superseded_by_after, detail, recorded_at, "
            "applied) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
            [
                (
                    store.key_of(store.WORKING, item.older_id),
                    store.CONTRADICTED,
                    run.night.key,
                    current[item.older_id]["valid_until"],
                    stamp,
                    current[item.older_id]["superseded_by"],
                    item.newer_id,
                    json.dumps(dataclasses.asdict(item), sort_keys=True),
                    recorded_at,
                )
                for item in found
                if item.older_id in current
            ],
        )


def _apply_planned(run: SleepRun, state_db, connection, totals: dict[str, int]) -> None:
    """Write every planned closing (this run's, or one a killed run recorded and never wrote)."""
    written, abandoned = apply_planned(
        run, state_db, connection, store.CONTRADICTED, _close, "sleep-contradictions"
    )
    totals["closed"] += sum(closed for closed, _ in written)
    totals["edges_created"] += sum(edges_created for _, edges_created in written)
    totals["abandoned"] += abandoned


def _close(connection: apsw.Connection, batch: list[dict[str, Any]]) -> dict[int, tuple | None]:
    """Inside one transaction: stamp each older memory that still holds the recorded values.

    Returns, per archive entry, (rows closed, edges created) or None when the row changed meanwhile.
    """
    outcome: dict[int, tuple | None] = {}
    for entry in batch:
        memory_id = store.split_key(entry["memory_key"])[1]
        row = connection.execute(
            "SELECT valid_until, superseded_by FROM working_memory WHERE id = ?", (memory_id,)
        ).fetchone()
        if row is None:
            outcome[entry["id"]] = None
            continue
        closed = 0
        if tuple(row) == (entry["valid_until_before"], entry["superseded_by_before"]):
            connection.execute(
                "UPDATE working_memory SET valid_until = ?, superseded_by = ? WHERE id = ? "
                "AND valid_until IS ? AND superseded_by IS ?",
                (
                    entry["valid_until_after"],
                    entry["superseded_by_after"],
                    memory_id,
                    entry["valid_until_before"],
                    entry["superseded_by_before"],
                ),
            )
            closed = connection.changes()
        elif tuple(row) != (entry["valid_until_after"], entry["superseded_by_after"]):
            outcome[entry["id"]] = None  # someone else changed it: leave it as they left it
            continue
        created = edges.insert_once(
            connection,
            entry["superseded_by_after"],
            memory_id,
            edges.CONTRADICTS,
            1.0,
            entry["valid_until_after"],
        )
        outcome[entry["id"]] = (closed, created)
    return outcome
