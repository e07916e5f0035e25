"""Forgetting: archive candidates nobody needs any more get ``valid_until`` stamped, never deleted.

A memory is archived tonight when all of these hold:

- it is an archive candidate (prominence < 0.1) with utility < ``archive_utility`` (0.1);
- it is older than ``archive_after_days`` (14) at the night's reference moment;
- it was first seen on an earlier night (a memory is never judged the night it appears);
- it is not exempt: not pinned, not an identity row, not holding a current canonical lineage
  (checked again inside the write), not restored by the user before, and, with
  ``protect_eval_answers``, not an answer of the user's eval suite;
- it carries no fact only it holds (with ``forget_keeps_facts``, the default; ``facts``): it is
  chatter (rule ``chatter``), or a current working memory holds every fact item and nearly every
  content word of it (rule ``duplicate``, the survivor recorded). A candidate that is the only
  place of its facts is kept, and recorded in ``sleep_fact_holders`` so later nights do not judge
  it again. Only working memories count as survivors: a consolidation row recall does not return
  keeps no fact for the agent.
- fewer than ``max_archived_per_night`` (50) were archived tonight (lowest utility first).

The archive record (the stamp, the value it replaces, prominence, utility, why) is written to
state.db before the memory is stamped; the stamp is written in short ``BEGIN IMMEDIATE`` batches that
check the row still holds the recorded value. `restore` clears exactly our stamp and nothing else.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.database import facts, transactions
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now
from mnemo_ops.jobs.evening_batch.sleep import store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.jobs.evening_batch.sleep.planned import apply_planned
from mnemo_ops.jobs.evening_batch.sleep.prominence import ARCHIVE as ARCHIVE_BAND


def _lineage_holders(connection: apsw.Connection, memory_ids: list[str]) -> set[str]:
    """Which of `memory_ids` hold a current canonical lineage (``source = 'auto:<id>'``).

    One query per batch: ``canonical_facts`` has no index on ``source``, so a check per row would
    scan the table once per row, inside the write transaction (on a big home with many promoted
    facts, long enough per batch to keep the agent waiting)."""
    if not memory_ids or "canonical_facts" not in database.table_names(connection):
        return set()
    return {
        row[0]
        for row in connection.execute(
            "SELECT substr(source, 6) FROM canonical_facts WHERE valid_until IS NULL "
            f"AND source IN ({','.join('?' * len(memory_ids))})",
            [f"auto:{memory_id}" for memory_id in memory_ids],
        )
    }


def _restored_keys(state_db) -> set[str]:
    return {
        row[0]
        for row in state_db.conn.execute(
            f"SELECT DISTINCT memory_key FROM {store.ARCHIVE} WHERE restored_at IS NOT NULL"
        )
    }


def candidates(run: SleepRun, state_db, limit: int | None = None) -> list[dict[str, Any]]:
    """Tonight's archive candidates in order (lowest utility, then oldest), at most `limit`."""
    if limit is not None and limit <= 0:
        return []
    cutoff = (run.night.reference - timedelta(days=run.options.archive_after_days)).isoformat()
    protected = _restored_keys(state_db)
    if run.options.protect_eval_answers:
        protected |= {store.key_of(store.WORKING, memory_id) for memory_id in run.eval_answers}
    kept_out = (
        f"AND memory_key NOT IN (SELECT memory_key FROM {store.FACT_HOLDERS})"
        if run.options.forget_keeps_facts
        else ""
    )
    # A source of a graduated row is never archived: the row names it as its lineage.
    protected |= {
        row[0]
        for row in state_db.conn.execute(
            f"SELECT s.memory_key FROM {store.GRADUATION_SOURCES} s JOIN {store.GRADUATION} g "
            "ON g.id = s.graduation_id WHERE g.restored_at IS NULL AND g.applied >= 0"
        )
    }
    chosen: list[dict[str, Any]] = []
    for row in store.rows(
        state_db,
        f"SELECT memory_key, kind, prominence, utility, anchor, confirmations FROM {store.MEMORIES} "
        "WHERE live = 1 AND exempt IS NULL AND band = ? AND utility < ? AND anchor IS NOT NULL "
        f"AND anchor < ? AND first_night < ? {kept_out} ORDER BY utility, anchor, memory_key",
        (ARCHIVE_BAND, run.options.archive_utility, cutoff, run.night.key),
    ):
        if row["memory_key"] in protected:
            continue
        chosen.append(row)
        if limit is not None and len(chosen) >= limit:
            break
    return chosen


def archived_tonight(state_db, night: str) -> int:
    """How many memories were archived (or planned to be) on `night`."""
    return state_db.conn.execute(
        f"SELECT count(*) FROM {store.ARCHIVE} WHERE night = ? AND reason = ? AND applied >= 0",
        (night, store.FORGOTTEN),
    ).fetchone()[0]


def forget(run: SleepRun) -> dict[str, Any]:
    """Archive tonight's candidates (module docstring); return the figures."""
    totals: dict[str, Any] = {"archived": 0, "abandoned": 0, "candidates": 0}
    state_db = run.open_state()
    connection = run.open_memory()
    try:
        _apply_planned(run, state_db, connection, totals)  # what a killed run recorded and left
        remaining = run.options.max_archived_per_night - archived_tonight(state_db, run.night.key)
        chosen = _choose(run, state_db, connection, remaining, totals)
        totals["by_rule"] = {
            rule: sum(1 for row in chosen if row["rule"] == rule)
            for rule in sorted({row["rule"] for row in chosen})
        }
        if chosen:
            _plan(run, state_db, connection, chosen)
            _apply_planned(run, state_db, connection, totals)
        totals["archived_tonight"] = archived_tonight(state_db, run.night.key)
    finally:
        connection.close()
        state_db.close()
    run.count("memories_archived", totals["archived"])
    return totals


JUDGED_PER_PASS = 200
"""Candidates whose text is read and judged at a time, until tonight's archive slots are filled."""


def _choose(run: SleepRun, state_db, connection, remaining: int, totals: dict[str, Any]):
    """Tonight's archivable candidates, at most `remaining`, each with its rule; the candidates
    kept as the only place of a fact are recorded on the way (``kept_fact_holders``)."""
    if remaining <= 0:
        return []
    if not run.options.forget_keeps_facts:
        chosen = candidates(run, state_db, remaining)
        totals["candidates"] = len(chosen)
        return [{**row, "rule": "unused", "survivor": None} for row in chosen]
    pool = candidates(run, state_db)
    chosen: list[dict[str, Any]] = []
    leaving: set[str] = set()
    judged = kept = 0
    for start in range(0, len(pool), JUDGED_PER_PASS):
        if len(chosen) >= remaining:
            break
        batch = pool[start : start + JUDGED_PER_PASS]
        judged += len(batch)
        archivable, holders = sort_out(connection, batch, leaving)
        _record_fact_holders(run, state_db, holders)
        kept += len(holders)
        chosen.extend(archivable)
    totals["candidates"] = judged
    totals["kept_fact_holders"] = kept
    return chosen[:remaining]


def sort_out(
    connection: apsw.Connection, chosen: list[dict[str, Any]], leaving: set[str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(archivable, kept): each candidate with its ``rule`` (``chatter`` or ``duplicate``, the
    ``survivor`` id) or, when it is the only place of its facts, kept with its ``items``.

    A survivor is a current working memory that is not archived tonight; two restatements never
    archive each other (the first one judged goes, the other stays as its survivor)."""
    contents = _contents(connection, [row["memory_key"] for row in chosen])
    leaving = set() if leaving is None else leaving
    archivable, kept = [], []
    for row in chosen:
        text = contents.get(row["memory_key"])
        table, memory_id = store.split_key(row["memory_key"])
        if text is None:
            continue  # gone since the night's observation: nothing to archive
        if facts.is_chatter(text):
            archivable.append({**row, "rule": "chatter", "survivor": None})
            leaving.add(memory_id)
            continue
        survivor = facts.find_survivor(connection, text, leaving | {memory_id})
        if survivor is not None:
            archivable.append({**row, "rule": "duplicate", "survivor": survivor})
            leaving.add(memory_id)
        else:
            kept.append({**row, "items": sorted(facts.fact_items(text))})
    return archivable, kept


def _contents(connection: apsw.Connection, keys: list[str]) -> dict[str, str]:
    """The text of each memory key that still exists."""
    found: dict[str, str] = {}
    by_table: dict[str, list[str]] = {}
    for key in keys:
        table, memory_id = store.split_key(key)
        by_table.setdefault(table, []).append(memory_id)
    for table, ids in by_table.items():
        for chunk in store.chunks(ids):
            for memory_id, content in connection.execute(
                f"SELECT id, content FROM {table} WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                found[store.key_of(table, memory_id)] = content or ""
    return found


def _record_fact_holders(run: SleepRun, state_db, kept: list[dict[str, Any]]) -> None:
    """Remember the candidates kept as the only place of a fact (not judged again)."""
    if not kept:
        return
    run.before_write()
    with state_db.conn:
        state_db.conn.executemany(
            f"INSERT OR IGNORE INTO {store.FACT_HOLDERS} (memory_key, night, items) VALUES (?, ?, ?)",
            [(row["memory_key"], run.night.key, json.dumps(row["items"])) for row in kept],
        )


def _plan(run: SleepRun, state_db, connection, chosen: list[dict[str, Any]]) -> None:
    """Record tonight's archive entries (the value each stamp replaces) before any stamp."""
    current: dict[str, tuple] = {}
    by_table: dict[str, list[str]] = {}
    for row in chosen:
        table, memory_id = store.split_key(row["memory_key"])
        by_table.setdefault(table, []).append(memory_id)
    for table, ids in by_table.items():
        for chunk in store.chunks(ids):
            for memory_id, valid_until, superseded_by in connection.execute(
                f"SELECT id, valid_until, superseded_by FROM {table} "
                f"WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                current[store.key_of(table, memory_id)] = (valid_until, superseded_by)
    stamp = local_timestamp()
    recorded_at = isoformat(utc_now())
    run.before_write()
    with state_db.conn:
        state_db.conn.executemany(
            f"INSERT OR IGNORE INTO {store.ARCHIVE} (memory_key, reason, night, valid_until_before, "
            "valid_until_after, superseded_by_before, superseded_by_after, prominence, utility, "
            "detail, recorded_at, applied) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
            [
                (
                    row["memory_key"],
                    store.FORGOTTEN,
                    run.night.key,
                    current[row["memory_key"]][0],
                    stamp,
                    current[row["memory_key"]][1],
                    current[row["memory_key"]][1],
                    row["prominence"],
                    row["utility"],
                    json.dumps(
                        {
                            "kind": row["kind"],
                            "timestamp": row["anchor"],
                            "confirmations": row["confirmations"],
                            "rule": row["rule"],
                            "survivor": row.get("survivor"),
                        },
                        sort_keys=True,
                    ),
                    recorded_at,
                )
                for row in chosen
                if row["memory_key"] in current
            ],
        )


def _apply_planned(run: SleepRun, state_db, connection, totals: dict[str, Any]) -> None:
    """Write every planned archiving (this run's, or one a killed run recorded and never wrote)."""
    written, abandoned = apply_planned(
        run, state_db, connection, store.FORGOTTEN, _stamp, "sleep-forgetting"
    )
    totals["archived"] += sum(written)
    totals["abandoned"] += abandoned


def _stamp(connection, batch: list[dict[str, Any]]) -> dict[int, int | None]:
    """Inside one transaction: stamp each row that still holds the recorded value and may be
    archived; per entry the rows stamped (0 when a killed run stamped it already) or None."""
    outcome: dict[int, int | None] = {}
    # Checked inside the transaction: a lineage promoted since the plan protects its row.
    lineage = _lineage_holders(
        connection,
        [
            store.split_key(entry["memory_key"])[1]
            for entry in batch
            if entry["memory_key"].startswith(store.PREFIX[store.WORKING])
        ],
    )
    for entry in batch:
        table, memory_id = store.split_key(entry["memory_key"])
        row = connection.execute(
            f"SELECT valid_until FROM {table} WHERE id = ?", (memory_id,)
        ).fetchone()
        if row is not None and row[0] == entry["valid_until_after"]:
            outcome[entry["id"]] = 0  # stamped by the run that recorded it
            continue
        if table == store.WORKING:
            if memory_id in lineage:
                outcome[entry["id"]] = None
                continue
            sql = (
                "UPDATE working_memory SET valid_until = :stamp WHERE id = :id "
                "AND valid_until IS :before AND (superseded_by IS NULL OR superseded_by = '') "
                "AND coalesce(pinned, 0) = 0"
            )
        else:
            sql = (
                "UPDATE episodic_memory SET valid_until = :stamp WHERE id = :id "
                "AND valid_until IS :before AND (superseded_by IS NULL OR superseded_by = '')"
            )
        connection.execute(
            sql,
            {
                "stamp": entry["valid_until_after"],
                "id": memory_id,
                "before": entry["valid_until_before"],
            },
        )
        outcome[entry["id"]] = connection.changes() or None
    return outcome


# --- listing and restoring -------------------------------------------------------------------------


def recorded(
    state_db, night: str | None = None, include_restored: bool = False
) -> list[dict[str, Any]]:
    """The archive records (forgotten and contradicted) that were written, newest night first."""
    return store.written_records(state_db, store.ARCHIVE, night, include_restored)


def describe(connection: apsw.Connection, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as the command shows them: with the memory's text and whether our stamp is there."""
    described = []
    for entry in entries:
        table, memory_id = store.split_key(entry["memory_key"])
        row = connection.execute(
            f"SELECT content, valid_until, superseded_by FROM {table} WHERE id = ?", (memory_id,)
        ).fetchone()
        if entry.get("restored_at"):
            status = "restored"
        elif row is None:
            status = "missing"
        elif (row[1], row[2]) == (entry["valid_until_after"], entry["superseded_by_after"]):
            status = "archived" if entry["reason"] == store.FORGOTTEN else "superseded"
        else:
            status = "changed-since"
        described.append(
            {
                "memory_id": memory_id,
                "table": table,
                "reason": entry["reason"],
                "night": entry["night"],
                "status": status,
                "stamped": entry["valid_until_after"],
                "valid_until_before": entry["valid_until_before"],
                "superseded_by": entry["superseded_by_after"]
                if entry["reason"] == store.CONTRADICTED
                else None,
                "prominence": entry["prominence"],
                "utility": entry["utility"],
                "restored_at": entry.get("restored_at"),
                "content": (row[0] if row else None),
                "rule": json.loads(entry["detail"] or "{}").get("rule"),
                "detail": json.loads(entry["detail"] or "{}"),
            }
        )
    return described


def select_for_restore(
    state_db, memory_ids: list[str], night: str | None, everything: bool
) -> list[dict[str, Any]]:
    """The unrestored records named by memory id, by night, or all of them."""
    return store.named_records(recorded(state_db, night=night), memory_ids, night, everything)


def restore(
    connection: apsw.Connection, state_db, entries: list[dict[str, Any]], dry_run: bool
) -> dict[str, int]:
    """Clear our stamps: each row gets back the values recorded before it, where it still holds ours.

    A row changed since (by the agent, or by Mnemosyne) is left as it is and counted. A restored
    memory is never archived again, nor closed again for the same contradiction.
    """
    restored = changed = 0
    for entry in entries:
        table, memory_id = store.split_key(entry["memory_key"])
        row = connection.execute(
            f"SELECT valid_until, superseded_by FROM {table} WHERE id = ?", (memory_id,)
        ).fetchone()
        if row is None or (row[0], row[1]) != (
            entry["valid_until_after"],
            entry["superseded_by_after"],
        ):
            changed += 1
            note = "changed-since"
        else:
            restored += 1
            note = "restored"
        if dry_run:
            continue
        if note == "restored":
            transactions.write_statement(
                connection,
                f"UPDATE {table} SET valid_until = ?, superseded_by = ? WHERE id = ? "
                "AND valid_until IS ? AND superseded_by IS ?",
                (
                    entry["valid_until_before"],
                    entry["superseded_by_before"],
                    memory_id,
                    entry["valid_until_after"],
                    entry["superseded_by_after"],
                ),
            )
        with state_db.conn:
            state_db.conn.execute(
                f"UPDATE {store.ARCHIVE} SET restored_at = ?, restore_note = ? WHERE id = ?",
                (isoformat(utc_now()), note, entry["id"]),
            )
            if note == "restored":
                state_db.conn.execute(
                    f"UPDATE {store.MEMORIES} SET live = 1, dirty = 1 WHERE memory_key = ?",
                    (entry["memory_key"],),
                )
    return {"restored": restored, "changed_since": changed}
