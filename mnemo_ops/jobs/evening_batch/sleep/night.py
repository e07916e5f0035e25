"""Which night a run belongs to, the time every age is measured at, and when the last sleep was.

A night runs from noon to noon, local time: a run at 21:00 on the 3rd and one at 03:00 on the 4th
both belong to the night of the 3rd. Every age, window and candidate of a night is measured at one
fixed moment, the midnight that night contains, so that a second run in the same night (the recall
guard's trial and the live run, or a run killed and started again) makes exactly the same decisions.

The last sleep is read from the run ledger (state.db ``runs``): the newest real evening-batch run that
finished ok and was not one that ``--if-needed`` found unnecessary. A restart therefore neither skips
nor repeats a night.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

NIGHT_STARTS_AT_HOUR = 12
JOB = "evening-batch"
TRIGGERS_KEY = "sleep_triggers"
"""Where evening-batch keeps its trigger decision in the result's stats (and so in the ledger)."""


@dataclasses.dataclass(frozen=True)
class Night:
    """One night: its name (the date it starts on) and its reference moment (naive local time)."""

    key: str
    reference: datetime

    @property
    def reference_text(self) -> str:
        """The reference moment in Mnemosyne's timestamp format (comparable with its columns)."""
        return self.reference.isoformat()


def night_of(local_moment: datetime) -> Night:
    """The night `local_moment` (naive local time) belongs to."""
    day = (local_moment - timedelta(hours=NIGHT_STARTS_AT_HOUR)).date()
    reference = datetime.combine(day + timedelta(days=1), datetime.min.time())
    return Night(key=day.isoformat(), reference=reference)


def was_a_sleep(result: dict) -> bool:
    """True when a ledger row's result is a run that slept (not one --if-needed found unnecessary)."""
    decision = (result.get("stats") or {}).get(TRIGGERS_KEY) or {}
    return decision.get("sleep", True) is not False


@dataclasses.dataclass(frozen=True)
class LastSleep:
    """The newest sleep in the ledger: when it started, and the newest memory timestamp it saw."""

    started_at: datetime
    newest_seen: str | None


def last_sleep_record(ledger) -> LastSleep | None:
    """The last sleep (module docstring), from the ledger; None before the first one."""
    if ledger is None or "runs" not in ledger.table_names():
        return None
    for row in ledger.query(
        "SELECT started_at, result_json FROM runs WHERE job = ? AND dry_run = 0 AND status = 'ok' "
        "ORDER BY id DESC",
        [JOB],
    ):
        try:
            result = json.loads(row["result_json"] or "{}")
        except ValueError:
            result = {}
        if was_a_sleep(result):
            moment = datetime.fromisoformat(row["started_at"])
            observed = ((result.get("stats") or {}).get("sleep") or {}).get("observed") or {}
            return LastSleep(
                started_at=moment if moment.tzinfo else moment.replace(tzinfo=UTC),
                newest_seen=observed.get("newest_timestamp"),
            )
    return None


def last_sleep(ledger) -> datetime | None:
    """When the last sleep started (aware UTC), from the ledger; None before the first one."""
    record = last_sleep_record(ledger)
    return record.started_at if record is not None else None


def to_local(moment: datetime) -> datetime:
    """An aware moment as naive local time (how Mnemosyne stamps its rows)."""
    return moment.astimezone().replace(tzinfo=None)
