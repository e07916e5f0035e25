"""Graduation: what the owner told the agent in one conversation reaches every later one.

The Hermes plugin's prefetch is session-scoped: a ``[USER] ...`` row reaches only the session it was
written in; ``scope='global'`` rows and the owner's canonical facts are all that cross to a new
conversation. This stage reads the owner's own statements across every session and writes, for each
that states a specific fact, one global row through Mnemosyne's own API (``mnemosyne.graduation``,
in a child process):

- **what is read**: live working memories that are the user's own words: ``[USER] ...`` rows of
  source ``conversation`` (the plugin's turns), and rows of source ``user`` or ``fact`` with
  veracity ``stated``; not already global; authored by nobody or by the owner. A row is judged
  once (``sleep_graduation_sources``).
- **what graduates**: a statement of fact or taste (``importance.states_a_fact``: a number, a date
  word, a name, a first-person taste), never chatter (``facts.is_chatter``), most specific first.
- **what is written** (extractive): the statement itself without the role prefix, its relative
  dates resolved against the day it was said ("yesterday (2026-03-04)"), ending with the day it was
  said; source ``fact``, scope ``global``, veracity ``inferred`` (so the canonical trigger does not
  make it a canonical fact the plugin tokenises every turn), the owner as ``author_id``, importance
  graded as the importance stage grades, metadata ``{"derived_from": [source ids], "graduation":
  {"key", "owner", "night", "said_on", "confirmations"}}``: the lineage.
- **restatements merge**: a statement whose facts a graduated row already holds, or that holds
  every fact of one (``facts.survivor``), reinforces that row (its id added to ``derived_from``,
  ``confirmations`` + 1) instead of writing another.
- **bounded**: at most ``sleep.graduate_per_night`` new rows a night and ``sleep.graduate_max_rows``
  live ones per owner: every global row is a candidate in every session's recall.
- **boundaries**: a home with a row authored by someone other than the owner is a home several
  people talk to, where a global row would reach all of them: nothing graduates there unless
  ``sleep.graduate_shared_home`` is on, and then only rows stamped with the owner as author.

Each write is recorded in state.db (``sleep_graduation``) before it is made; a run killed between
the two leaves planned entries that the next run writes first (the child finds a row it stored
before by its key). A source of a graduated row is never archived by forgetting. `restore` closes
graduated rows (``valid_until``), where they are still ours.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import date, datetime, timedelta
from typing import Any

import apsw

from mnemo_ops.database import facts, transactions
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.jobs.evening_batch.sleep import importance, store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.mnemosyne import graduation as writer
from mnemo_ops.mnemosyne import versions

STORE, REINFORCE = "store", "reinforce"
GRADUATED, MERGED, PASSED = "graduated", "merged", "passed"
SHARED_HOME = "shared-home"

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_RELATIVE = re.compile(
    r"\b(?:(yesterday|today|tonight|tomorrow)"
    r"|(last|next|this) (week|month|year|weekend|" + "|".join(_WEEKDAYS) + r")"
    r"|(\d+|a|an|one|two|three|four|five|six) (day|week|month)s? ago)\b",
    re.IGNORECASE,
)


def _said_on(stamp: str | None) -> date | None:
    """The local day a row was written, from its timestamp (the line's time base)."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(versions.local_time(str(stamp))).date()
    except ValueError:
        return None


def _resolved(match: re.Match, day: date) -> str | None:
    """The date a relative phrase names, said on `day` (a day, or a week's / month's start)."""
    single, which, unit, count, count_unit = match.groups()
    if single:
        offset = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}[single.lower()]
        return (day + timedelta(days=offset)).isoformat()
    if which:
        which, unit = which.lower(), unit.lower()
        step = {"last": -1, "next": 1, "this": 0}[which]
        if unit in _WEEKDAYS:
            target = _WEEKDAYS.index(unit)
            delta = (target - day.weekday()) % 7
            if step < 0:
                delta = delta - 7 if delta > 0 else -7
            elif step > 0:
                delta = delta or 7
            return (day + timedelta(days=delta)).isoformat()
        if unit in ("week", "weekend"):
            start = day - timedelta(days=day.weekday()) + timedelta(weeks=step)
            if unit == "weekend":
                start += timedelta(days=5)
            return f"week of {start.isoformat()}" if unit == "week" else start.isoformat()
        if unit == "month":
            month = day.month + step
            year = day.year + (month - 1) // 12
            return f"{year:04d}-{(month - 1) % 12 + 1:02d}"
        return f"{day.year + step:04d}"
    amount = int(count) if count.isdigit() else _NUMBERS[count.lower()]
    days = {"day": 1, "week": 7, "month": 30}[count_unit.lower()] * amount
    moment = day - timedelta(days=days)
    return moment.isoformat() if count_unit.lower() != "month" else moment.strftime("%Y-%m")


def distilled(content: str, day: date | None) -> str:
    """The statement as it graduates: no role prefix, relative dates resolved, the day it was said."""
    text = " ".join(facts.body(content).split())
    if day is None:
        return text
    text = _RELATIVE.sub(lambda match: f"{match.group(0)} ({_resolved(match, day)})", text)
    return f"{text.rstrip()} (said on {day.isoformat()})"


def graduation_key(owner: str, text: str) -> str:
    """The record's key: the owner and the statement's words."""
    words = " ".join(facts.words(text))
    return hashlib.sha256(f"{owner}\n{words}".encode()).hexdigest()[:24]


def _is_users_statement(content: str | None, source: str | None, veracity: str | None) -> bool:
    if not isinstance(content, str):
        return False
    if source == importance.SOURCE:
        return content.startswith(importance.USER_PREFIX)
    return source in ("user", "fact") and veracity == "stated"


def _other_authors(connection: apsw.Connection, owner: str) -> int:
    """How many user rows are authored by someone other than the owner."""
    return connection.execute(
        "SELECT count(*) FROM working_memory WHERE author_id IS NOT NULL AND author_id != '' "
        "AND author_id != ? AND ((source = 'conversation' AND content LIKE '[USER] %') "
        "OR source IN ('user', 'fact'))",
        (owner,),
    ).fetchone()[0]


def candidates(run: SleepRun, state_db, connection: apsw.Connection) -> tuple[list[dict], int]:
    """The owner's statements not judged yet, most specific first, then oldest (a restatement merges into what was said first): (rows, rows read)."""
    judged = {
        row[0]
        for row in state_db.conn.execute(f"SELECT memory_key FROM {store.GRADUATION_SOURCES}")
    }
    shared = run.options.graduate_shared_home
    found, read = [], 0
    for memory_id, content, source, veracity, stamp, author in connection.execute(
        "SELECT id, content, source, veracity, timestamp, author_id FROM working_memory "
        "WHERE (valid_until IS NULL OR valid_until = '') "
        "AND (superseded_by IS NULL OR superseded_by = '') AND coalesce(scope, 'session') != 'global' "
        "AND (source = 'conversation' OR source IN ('user', 'fact')) ORDER BY rowid"
    ):
        read += 1
        key = store.key_of(store.WORKING, memory_id)
        if key in judged or not _is_users_statement(content, source, veracity):
            continue
        if (author or "") != run.owner and (shared or author):
            continue  # another's row; in a shared home only the owner's own stamped rows
        found.append(
            {
                "memory_id": memory_id,
                "key": key,
                "content": content,
                "states_a_fact": importance.states_a_fact(content),
                "said_on": _said_on(stamp),
                "stamp": stamp or "",
            }
        )
    found.sort(key=lambda row: (-facts.specificity(row["content"]), row["stamp"]), reverse=False)
    return found, read


def _live_graduated(
    state_db, connection: apsw.Connection, owner: str
) -> list[tuple[int, str, str]]:
    """(record id, memory id, content) of the owner's graduated rows still live."""
    records = list(
        store.rows(
            state_db,
            f"SELECT id, memory_id FROM {store.GRADUATION} WHERE op = ? AND owner = ? "
            "AND applied = ? AND restored_at IS NULL AND memory_id IS NOT NULL ORDER BY id",
            (STORE, owner, store.APPLIED),
        )
    )
    live = []
    for record in records:
        row = connection.execute(
            "SELECT content FROM working_memory WHERE id = ? AND (valid_until IS NULL OR valid_until = '')",
            (record["memory_id"],),
        ).fetchone()
        if row is not None:
            live.append((record["id"], record["memory_id"], row[0]))
    return live


def _merge_target(text: str, graduated: list[tuple[Any, str]]) -> Any:
    """The graduated entry (its handle) `text` restates: one holds its facts, or it holds theirs."""
    for handle, other in graduated:
        if facts.survivor(text, [(handle, other)]) is not None:
            return handle
        if facts.survivor(other, [(handle, text)]) is not None:
            return handle
    return None


def plan(run: SleepRun, state_db, connection: apsw.Connection) -> dict[str, Any]:
    """Record tonight's graduations and merges (state.db) before anything is written."""
    options, owner = run.options, run.owner
    if not options.graduate_shared_home and _other_authors(connection, owner):
        return {"planned": 0, "merged": 0, "skipped": SHARED_HOME, "rows_read": 0}
    rows, read = candidates(run, state_db, connection)
    live = _live_graduated(state_db, connection, owner)
    room = max(0, min(options.graduate_per_night, options.graduate_max_rows - len(live)))
    # Merge targets: the live graduated rows (by memory id) and tonight's new ones (by position).
    targets: list[tuple[Any, str]] = [
        (("row", memory_id), content) for _, memory_id, content in live
    ]
    new: list[dict[str, Any]] = []
    merges: dict[Any, list[str]] = {}
    judged: list[tuple[str, str, Any]] = []
    for row in rows:
        if not row["states_a_fact"] or facts.is_chatter(row["content"]):
            judged.append((row["key"], PASSED, None))
            continue
        text = distilled(row["content"], row["said_on"])
        target = _merge_target(facts.body(row["content"]), targets)
        if target is not None:
            merges.setdefault(target, []).append(row["memory_id"])
            judged.append((row["key"], MERGED, target))
            continue
        if len(new) >= room:
            continue  # not judged: a later night, with room, takes it
        handle = ("new", len(new))
        new.append(
            {
                "op": STORE,
                "key": graduation_key(owner, text),
                "content": text,
                "derived_from": [row["memory_id"]],
                "said_on": row["said_on"].isoformat() if row["said_on"] else None,
                "importance": importance.graded(options.importance_raise_to, row["content"], 0),
            }
        )
        targets.append((handle, facts.body(row["content"])))
        judged.append((row["key"], GRADUATED, handle))
    now = isoformat(utc_now())
    ids: dict[Any, int] = {}
    with state_db.conn:
        for position, entry in enumerate(new):
            entry["derived_from"] += merges.pop(("new", position), [])
            cursor = state_db.conn.execute(
                f"INSERT INTO {store.GRADUATION} (op, graduation_key, owner, night, content, "
                "derived_from, said_on, importance, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    STORE,
                    entry["key"],
                    owner,
                    run.night.key,
                    entry["content"],
                    json.dumps(entry["derived_from"]),
                    entry["said_on"],
                    entry["importance"],
                    now,
                ),
            )
            ids[("new", position)] = cursor.lastrowid
        for target, sources in merges.items():
            _, memory_id = target
            cursor = state_db.conn.execute(
                f"INSERT INTO {store.GRADUATION} (op, graduation_key, owner, night, derived_from, "
                "memory_id, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (REINFORCE, memory_id, owner, run.night.key, json.dumps(sources), memory_id, now),
            )
            ids[target] = next(rid for rid, mid, _ in live if mid == memory_id)
        state_db.conn.executemany(
            f"INSERT OR IGNORE INTO {store.GRADUATION_SOURCES} (memory_key, graduation_id, night, "
            "outcome) VALUES (?, ?, ?, ?)",
            [(key, ids.get(target), run.night.key, outcome) for key, outcome, target in judged],
        )
    return {
        "planned": len(new),
        "merged": sum(len(sources) for sources in merges.values()),
        "rows_read": read,
        "live_before": len(live),
    }


def write_planned(run: SleepRun, state_db) -> dict[str, int]:
    """Write every planned entry (tonight's or a killed run's) through Mnemosyne, in a child."""
    planned = list(
        store.rows(
            state_db,
            f"SELECT * FROM {store.GRADUATION} WHERE applied = ? ORDER BY id",
            (store.PLANNED,),
        )
    )
    if not planned:
        return {"stored": 0, "reinforced": 0, "given_up": 0}
    actions = []
    for entry in planned:
        action = {"op": entry["op"], "derived_from": json.loads(entry["derived_from"])}
        if entry["op"] == STORE:
            action.update(
                key=entry["graduation_key"],
                content=entry["content"],
                night=entry["night"],
                said_on=entry["said_on"],
                importance=entry["importance"],
            )
        else:
            action["memory_id"] = entry["memory_id"]
        actions.append(action)
    run.before_write()
    outcomes = writer.write_graduated(
        run.db_path,
        run.hermes_home or run.db_path.parent,
        run.owner,
        actions,
        home=run.private_home,
    )
    stored = reinforced = given_up = 0
    with state_db.conn:
        for entry, outcome in zip(planned, outcomes):
            memory_id = outcome.get("memory_id")
            applied = store.APPLIED if memory_id else store.ABANDONED
            if entry["op"] == STORE:
                stored += bool(memory_id) and not outcome.get("existed")
            else:
                reinforced += int(outcome.get("added") or 0)
            given_up += not memory_id
            state_db.conn.execute(
                f"UPDATE {store.GRADUATION} SET applied = ?, memory_id = ? WHERE id = ?",
                (applied, memory_id, entry["id"]),
            )
    return {"stored": stored, "reinforced": reinforced, "given_up": given_up}


def graduate(run: SleepRun) -> dict[str, Any]:
    """Plan and write tonight's graduations (module docstring); the stage's stats."""
    state_db = run.open_state()
    try:
        leftover = write_planned(run, state_db)
        connection = run.open_memory(readonly=True)
        try:
            planned = plan(run, state_db, connection)
        finally:
            connection.close()
        written = write_planned(run, state_db)
    finally:
        state_db.close()
    stored = leftover["stored"] + written["stored"]
    run.count("statements_graduated", stored)
    return {
        **planned,
        "stored": stored,
        "reinforced": leftover["reinforced"] + written["reinforced"],
        "given_up": leftover["given_up"] + written["given_up"],
        "owner": run.owner,
    }


def recorded(state_db, night: str | None = None) -> list[dict[str, Any]]:
    """The graduated rows stored (not restored), newest night first; optionally one night's."""
    return [
        entry
        for entry in store.written_records(state_db, store.GRADUATION, night)
        if entry["op"] == STORE
    ]


def restore(
    connection: apsw.Connection, state_db, entries: list[dict[str, Any]], dry_run: bool
) -> dict[str, int]:
    """Close each graduated row (``valid_until`` now) where it is still live and ours; record it."""
    now = versions.memory_time(datetime.now())
    closed = changed = 0
    for entry in entries:
        row = connection.execute(
            "SELECT valid_until, source, scope FROM working_memory WHERE id = ?",
            (entry["memory_id"],),
        ).fetchone()
        ours = row is not None and not row[0] and row[1] == writer.SOURCE and row[2] == writer.SCOPE
        closed += ours
        changed += not ours
        if dry_run:
            continue
        if ours:
            transactions.write_statement(
                connection,
                "UPDATE working_memory SET valid_until = ? WHERE id = ? "
                "AND (valid_until IS NULL OR valid_until = '')",
                (now, entry["memory_id"]),
                label="graduation-restore",
            )
        with state_db.conn:
            state_db.conn.execute(
                f"UPDATE {store.GRADUATION} SET restored_at = ?, restore_note = ? WHERE id = ?",
                (isoformat(utc_now()), "closed" if ours else "changed-since", entry["id"]),
            )
    return {"closed": closed, "changed_since": changed}
