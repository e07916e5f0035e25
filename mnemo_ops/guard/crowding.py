"""Rows a change added that push what the agent was given before out of its lines, and what they
were derived from.

The plugin gives the agent at most five lines a turn. A new row that every conversation sees (a
graduated `global` row) can take a line a chat's own evidence held before the change: the evidence
is still in the database, but the agent no longer receives it. When the recall guard refuses a
change, the rows that did this are the *crowders*: rows the change wrote (absent from the "before"
copy) found among the lines returned, after the change, for a probe or eval case that held its
answer before and not after. Their origins (metadata ``derived_from``, the lineage distilled rows
carry) are what a job that honours ``withholds_crowders`` derives nothing from on its next try.
"""

from __future__ import annotations

from pathlib import Path

from mnemo_ops import database
from mnemo_ops.database import lineage
from mnemo_ops.evaluation import asked
from mnemo_ops.guard.measure import Measurement

SHOWN = 20
"""Crowding rows listed in the guard's figures (all are counted)."""


def _lost_something(was, now) -> bool:
    """The case held its answer before and not now, or one of its evidence rows came back before
    and not now (a case with several evidence rows can lose one and still be answered)."""
    if was.holds_evidence and not now.holds_evidence:
        return True
    wanted = set(was.case.relevant)
    return bool((wanted & _ids(was.retrieved)) - _ids(now.retrieved))


def _ids(items) -> set[str]:
    return {memory_id for item in items for memory_id in asked.item_ids(item)}


def lost_lines(before: Measurement, after: Measurement) -> list[list[str]]:
    """For every probe and suite case that held its answer before and not after (in the agent's
    places, and over every session), the ids of what came back after the change."""
    lines: list[list[str]] = []
    pairs = [(before, after)]
    if before.every_session is not None and after.every_session is not None:
        pairs.append((before.every_session, after.every_session))  # type: ignore[arg-type]
    for first, second in pairs:
        for key, rank in first.ranks.items():
            if rank is not None and second.ranks.get(key) is None and key in second.returned:
                lines.append(second.returned[key])
        if first.suite is not None and second.suite is not None:
            earlier = {outcome.case.id: outcome for outcome in first.suite.outcomes}
            for outcome in second.suite.outcomes:
                was = earlier.get(outcome.case.id)
                if was is not None and _lost_something(was, outcome):
                    lines.append(sorted(_ids(outcome.retrieved)))
    return lines


def crowders(before_db: Path, after_db: Path, lines: list[list[str]]) -> dict[str, list[str]]:
    """The rows of `lines` the change wrote (current in `after_db`, absent from `before_db`), each
    with the ids it was derived from (its metadata's lineage; empty when it names none)."""
    wanted = sorted({memory_id for ids in lines for memory_id in ids})
    if not wanted:
        return {}
    connection = database.open_memory_db(after_db, readonly=True)
    found: dict[str, list[str]] = {}
    try:
        connection.execute("ATTACH DATABASE ? AS prior", (str(before_db),))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for memory_id, metadata in connection.execute(
                f"SELECT a.id, a.metadata_json FROM main.working_memory a WHERE a.id IN ({marks}) "
                "AND NOT EXISTS (SELECT 1 FROM prior.working_memory b WHERE b.id = a.id)",
                chunk,
            ):
                found[str(memory_id)] = lineage.metadata_origins(metadata)
    finally:
        connection.close()
    return found
