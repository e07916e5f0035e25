"""Importance from evidence: the user's own statements raised past the Hermes plugin's cut, reversibly.

The Hermes plugin stores every user turn as a ``[USER] ...`` working memory of source
``conversation`` at importance 0.5 (an assistant turn at 0.15), and each turn drops a recalled row
whose score is below 0.20 unless its importance is at least 0.65. A row's score falls with its age,
so after a few days a user's statement of fact is recalled (it is in the top 16) and then dropped,
whatever it says. Measured on the Hermes conversation homes, that cut is what keeps most evidence
out of the prompt (``docs/quality.md``).

This stage raises to ``sleep.importance_raise_to`` (0.7) the importance of a live ``[USER]`` row of
source ``conversation`` below it that has proved worth keeping, by one of two kinds of evidence:

- ``states-a-fact``: the turn states something about the user or their world: at least five words
  with a number, a date word ("yesterday", "Tuesday", "March") or a name (a capitalised word inside
  a sentence), or at least four words of a first-person taste ("I prefer", "I can't stand", "my
  favourite"). Chatter, greetings and short acknowledgements carry none of these.
- ``restated``: the reinforcement stage found the user restating it (a confirmation).

The value given ranks: ``importance_raise_to`` for a statement naming one specific thing, and
``GRADE_STEP`` (0.04) more for each further item it names (up to three) and for each use (a
restatement, or the agent's recall having returned it: Mnemosyne's ``recall_count``; up to two),
so a row that names a person, a place and a date and keeps being recalled ranks above a passing
mention, and importance is not one value nearly every user turn has.

Nothing is lowered: below 0.65 the plugin's cut does not look at importance, so lowering chatter
would change only a 0.05 weight of its sort key.

Each raise is recorded in state.db (``sleep_importance``: the row, why, the night, the value before
and after) before it is written; the write is a short ``BEGIN IMMEDIATE`` batch that changes a row
only while it still holds the recorded value, so a row the agent changed in between is given up,
not overwritten. A run killed between the two leaves planned entries, which the next run writes
first. ``mnemo-ops importance restore`` puts back exactly the recorded values (where the row still
holds ours), and a restored memory is never raised again. At most
``sleep.importance_rows_per_run`` rows are raised per run; new rows are read once, in rowid order
from where the last run stopped.
"""

from __future__ import annotations

from typing import Any

import apsw

from mnemo_ops.database import facts, transactions
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.jobs.evening_batch.sleep import store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun

USER_PREFIX = "[USER] "
"""How the Hermes plugin marks a user turn in a working memory's content."""
SOURCE = "conversation"
STATES_A_FACT = "states-a-fact"
RESTATED = "restated"
SCAN_BATCH = 2000
"""Rows read per query while looking for candidates (read-only, outside any write transaction)."""
WRITE_BATCH = 200
"""Raises per write transaction."""
CURSOR = "importance-scan"

FACT_WORDS = 5
TASTE_WORDS = 4
GRADE_STEP = 0.04
"""Importance added per further specific item a statement names, and per use."""
GRADE_ITEMS = 3
GRADE_USES = 2


def states_a_fact(content: str) -> bool:
    """True when a user turn's text states a fact about the user or their world (module docstring)."""
    text = facts.body(content)
    words = len(text.split())
    items = facts.fact_items(text)
    if words >= FACT_WORDS and any(not item.startswith("taste:") for item in items):
        return True
    return words >= TASTE_WORDS and any(item.startswith("taste:") for item in items)


def graded(raise_to: float, content: str, uses: int) -> float:
    """The importance a raised row gets: `raise_to`, plus `GRADE_STEP` per further specific item
    (up to `GRADE_ITEMS`) and per use (up to `GRADE_USES`), never above 1."""
    further = max(0, min(facts.specificity(content), GRADE_ITEMS) - 1)
    return round(min(1.0, raise_to + GRADE_STEP * (further + min(uses, GRADE_USES))), 4)


def raise_importance(run: SleepRun) -> dict[str, Any]:
    """Plan and write tonight's raises (module docstring); the stage's stats."""
    options = run.options
    state_db = run.open_state()
    connection = run.open_memory()
    try:
        leftover = _write_planned(run, state_db, connection)
        recorded = _recorded_keys(state_db)
        quota = options.importance_rows_per_run
        planned = _restated(run, state_db, connection, recorded, quota)
        recorded.update(key for key, _, _, _ in planned)
        cursor, found, scanned = _scan_new_rows(run, state_db, connection, recorded, quota)
        planned.extend(found[: max(0, quota - len(planned))])
        _plan(run, state_db, planned, cursor)
        written = _write_planned(run, state_db, connection)
    finally:
        connection.close()
        state_db.close()
    raised = leftover["raised"] + written["raised"]
    run.count("importance_raised", raised)
    return {
        "raised": raised,
        "given_up": leftover["given_up"] + written["given_up"],
        "planned_by_reason": {
            reason: sum(1 for _, why, _, _ in planned if why == reason)
            for reason in (STATES_A_FACT, RESTATED)
        },
        "rows_scanned": scanned,
        "raise_to": options.importance_raise_to,
        "raised_to": {
            f"{value:.2f}": sum(1 for *_, planned_value in planned if planned_value == value)
            for value in sorted({planned_value for *_, planned_value in planned})
        },
    }


def _recorded_keys(state_db) -> set[str]:
    return {row[0] for row in state_db.conn.execute(f"SELECT memory_key FROM {store.IMPORTANCE}")}


def _candidate(row, raise_to: float) -> bool:
    content, source, importance, valid_until = row
    return (
        source == SOURCE
        and isinstance(content, str)
        and content.startswith(USER_PREFIX)
        and (importance is None or float(importance) < raise_to)
        and not valid_until
    )


def _restated(run, state_db, connection, recorded: set[str], quota: int) -> list[tuple]:
    """Confirmed originals not raised yet: (memory key, reason, importance before)."""
    confirmations = {
        row[0]: row[1]
        for row in state_db.conn.execute(
            f"SELECT memory_key, confirmations FROM {store.MEMORIES} WHERE confirmations > 0 "
            "AND live = 1 AND memory_key LIKE 'w:%' ORDER BY memory_key"
        )
        if row[0] not in recorded
    }
    raise_to = run.options.importance_raise_to
    found = []
    for batch in store.chunks(sorted(confirmations)):
        ids = [store.split_key(key)[1] for key in batch]
        for memory_id, recall_count, *fields in connection.execute(
            "SELECT id, coalesce(recall_count, 0), content, source, importance, valid_until "
            f"FROM working_memory WHERE id IN ({','.join('?' * len(ids))})",
            ids,
        ):
            key = store.key_of(store.WORKING, memory_id)
            # A restated greeting is still chatter: only a row that says something is raised.
            if (
                _candidate(fields, raise_to)
                and facts.carries_fact(fields[0])
                and len(found) < quota
            ):
                uses = confirmations[key] + (recall_count > 0)
                found.append((key, RESTATED, fields[2], graded(raise_to, fields[0], uses)))
    return found


def _scan_new_rows(run, state_db, connection, recorded: set[str], quota: int):
    """Rows after the last run's cursor that state a fact: (cursor, found, rows scanned)."""
    row = state_db.conn.execute(
        f"SELECT position FROM {store.CURSORS} WHERE name = ?", (CURSOR,)
    ).fetchone()
    cursor = int(row[0]) if row else 0
    found: list[tuple] = []
    scanned = 0
    raise_to = run.options.importance_raise_to
    while len(found) < quota:
        rows = connection.execute(
            "SELECT rowid, id, coalesce(recall_count, 0), content, source, importance, valid_until "
            "FROM working_memory WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (cursor, SCAN_BATCH),
        ).fetchall()
        if not rows:
            break
        for rowid, memory_id, recall_count, *fields in rows:
            cursor = rowid
            scanned += 1
            key = store.key_of(store.WORKING, memory_id)
            if key not in recorded and _candidate(fields, raise_to) and states_a_fact(fields[0]):
                value = graded(raise_to, fields[0], int(recall_count > 0))
                found.append((key, STATES_A_FACT, fields[2], value))
                if len(found) >= quota:
                    break
    return cursor, found, scanned


def _plan(run: SleepRun, state_db, planned: list[tuple], cursor: int) -> None:
    """Record tonight's raises and the scan's cursor in one state.db transaction."""
    now = isoformat(utc_now())
    with state_db.conn:
        state_db.conn.executemany(
            f"INSERT OR IGNORE INTO {store.IMPORTANCE} (memory_key, reason, night, "
            "importance_before, importance_after, recorded_at) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (key, reason, run.night.key, before, value, now)
                for key, reason, before, value in planned
            ],
        )
        state_db.conn.execute(
            f"INSERT OR REPLACE INTO {store.CURSORS} (name, position) VALUES (?, ?)",
            (CURSOR, cursor),
        )


def _write_planned(run: SleepRun, state_db, connection: apsw.Connection) -> dict[str, int]:
    """Write every planned raise (this run's or a killed run's); mark each written or given up."""
    planned = list(
        store.rows(
            state_db,
            f"SELECT * FROM {store.IMPORTANCE} WHERE applied = ? ORDER BY id",
            (store.PLANNED,),
        )
    )
    raised = given_up = 0
    for batch in store.chunks(planned, WRITE_BATCH):
        run.before_write()
        outcome = transactions.write_batch(
            connection, lambda conn, batch=batch: _write(conn, batch), label="sleep-importance"
        )
        with state_db.conn:
            for entry in batch:
                written = outcome[entry["id"]]
                raised += written
                given_up += not written
                state_db.conn.execute(
                    f"UPDATE {store.IMPORTANCE} SET applied = ? WHERE id = ?",
                    (store.APPLIED if written else store.ABANDONED, entry["id"]),
                )
                if written:
                    state_db.conn.execute(
                        f"UPDATE {store.MEMORIES} SET dirty = 1 WHERE memory_key = ?",
                        (entry["memory_key"],),
                    )
    return {"raised": raised, "given_up": given_up}


def _write(connection: apsw.Connection, batch: list[dict[str, Any]]) -> dict[int, bool]:
    """Inside one transaction: each row raised only while it holds the recorded value."""
    outcome = {}
    for entry in batch:
        _, memory_id = store.split_key(entry["memory_key"])
        connection.execute(
            "UPDATE working_memory SET importance = ? WHERE id = ? AND importance IS ? "
            "AND (valid_until IS NULL OR valid_until = '')",
            (entry["importance_after"], memory_id, entry["importance_before"]),
        )
        outcome[entry["id"]] = connection.changes() > 0
    return outcome


def recorded(
    state_db, night: str | None = None, include_restored: bool = False
) -> list[dict[str, Any]]:
    """The raises that were written, newest night first (optionally one night's, or restored ones)."""
    return store.written_records(state_db, store.IMPORTANCE, night, include_restored)


def describe(connection: apsw.Connection, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as the command shows them: the memory's text, and whether our value is there."""
    described = []
    for entry in entries:
        _, memory_id = store.split_key(entry["memory_key"])
        row = connection.execute(
            "SELECT content, importance FROM working_memory WHERE id = ?", (memory_id,)
        ).fetchone()
        if entry.get("restored_at"):
            status = "restored"
        elif row is None:
            status = "missing"
        else:
            status = "raised" if row[1] == entry["importance_after"] else "changed-since"
        described.append(
            {
                "memory_id": memory_id,
                "reason": entry["reason"],
                "night": entry["night"],
                "status": status,
                "importance_before": entry["importance_before"],
                "importance_after": entry["importance_after"],
                "content": row[0] if row else None,
            }
        )
    return described


def restore(
    connection: apsw.Connection, state_db, entries: list[dict[str, Any]], dry_run: bool
) -> dict[str, int]:
    """Put back each recorded importance where the row still holds ours; count the rest."""
    restored = changed = 0
    for entry in entries:
        _, memory_id = store.split_key(entry["memory_key"])
        row = connection.execute(
            "SELECT importance FROM working_memory WHERE id = ?", (memory_id,)
        ).fetchone()
        ours = row is not None and row[0] == entry["importance_after"]
        restored += ours
        changed += not ours
        if dry_run:
            continue
        if ours:
            transactions.write_statement(
                connection,
                "UPDATE working_memory SET importance = ? WHERE id = ? AND importance IS ?",
                (entry["importance_before"], memory_id, entry["importance_after"]),
                label="importance-restore",
            )
        with state_db.conn:
            state_db.conn.execute(
                f"UPDATE {store.IMPORTANCE} SET restored_at = ?, restore_note = ? WHERE id = ?",
                (isoformat(utc_now()), "restored" if ours else "changed-since", entry["id"]),
            )
            if ours:
                state_db.conn.execute(
                    f"UPDATE {store.MEMORIES} SET dirty = 1 WHERE memory_key = ?",
                    (entry["memory_key"],),
                )
    return {"restored": restored, "changed_since": changed}


def select_for_restore(
    state_db, memory_ids: list[str], night: str | None, everything: bool
) -> list[dict[str, Any]]:
    """The unrestored raises named by memory id, by night, or all of them."""
    return store.named_records(recorded(state_db, night=night), memory_ids, night, everything)
