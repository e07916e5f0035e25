"""Adaptive triggers: whether ``run evening-batch --if-needed`` sleeps now, and which trigger fired.

It sleeps when at least one holds:

- **entropy**: the new memories (live working rows written since the last sleep and not consolidated)
  number at least ``entropy_min_memories`` (20) and the entropy of their normalised importance,
  ``-sum(p log p) / log n`` with ``p = importance / sum(importance)``, exceeds ``entropy_threshold``
  (0.9): many memories, none of which stands out, wait to be consolidated;
- **contradictions**: pending proven contradictions (``reinforcement.find_contradictions``: each
  becomes one of our ``mnemo:contradicts`` edges when tonight's sleep settles it) make up more than
  ``contradiction_density`` (0.3) of the edges the graph would then hold;
- **time**: at least ``hours_between_sleeps`` (20) since the last sleep (from the ledger) and the local
  time inside ``quiet_hours`` (02:00-05:00);
- **forced**: ``--force``.

Without ``--if-needed`` every run sleeps (a plain ``run evening-batch`` by hand, and the schedule
unless ``evening_batch.scheduled_if_needed`` is set). The decision is made before the recall guard's
trial, so a run that does not sleep costs one read of the database and no copy.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.foundation.clock import local_timestamp
from mnemo_ops.jobs.evening_batch.sleep.night import last_sleep_record, to_local
from mnemo_ops.jobs.evening_batch.sleep.reinforcement import find_contradictions
from mnemo_ops.settings.sections import SleepOptions

ENTROPY = "entropy"
CONTRADICTIONS = "contradictions"
TIME = "time"
FORCED = "forced"
UNCONDITIONAL = "unconditional"


@dataclasses.dataclass
class TriggerDecision:
    """Whether to sleep, why, and the figures behind it."""

    checked: bool
    sleep: bool
    fired: list[str]
    figures: dict[str, Any]

    def to_stats(self) -> dict[str, Any]:
        """The result's ``stats.sleep_triggers`` (the ledger keeps it: the last sleep is read there)."""
        return {
            "checked": self.checked,
            "sleep": self.sleep,
            "fired": self.fired,
            **self.figures,
        }

    def summary(self) -> str:
        """One line for the result's warnings."""
        figures = self.figures
        parts = []
        if "entropy" in figures:
            parts.append(
                f"entropy {figures['entropy']:.3f} of {figures['new_memories']} new memories "
                f"(threshold {figures['entropy_threshold']})"
            )
        if "contradiction_density" in figures:
            parts.append(
                f"contradiction density {figures['contradiction_density']:.3f} "
                f"(threshold {figures['contradiction_threshold']})"
            )
        if "hours_since_last_sleep" in figures:
            hours = figures["hours_since_last_sleep"]
            parts.append(
                (
                    "no sleep recorded yet"
                    if hours is None
                    else f"{hours:.1f} h since the last sleep"
                )
                + f", {'inside' if figures['quiet_hours_now'] else 'outside'} quiet hours "
                f"{figures['quiet_hours']}"
            )
        verdict = (
            f"sleeping ({', '.join(self.fired)} fired)"
            if self.sleep
            else "not sleeping: no trigger fired"
        )
        return verdict + (": " + "; ".join(parts) if parts else "")


def normalised_entropy(weights: list[float]) -> float:
    """``-sum(p ln p) / ln n`` of the weights normalised to sum 1 (0 for fewer than two, or none)."""
    values = [max(0.0, float(weight)) for weight in weights]
    total = sum(values)
    if len(values) < 2 or total <= 0:
        return 0.0
    # A share may underflow to 0 (a subnormal weight): it adds nothing, as p ln p -> 0.
    shares = [value / total for value in values]
    entropy = -sum(share * math.log(share) for share in shares if share > 0)
    return min(1.0, max(0.0, entropy / math.log(len(values))))


def in_quiet_hours(local_moment: datetime, quiet_hours: tuple[int, int]) -> bool:
    """True when the local time of day lies in [start, end) (a range may run over midnight)."""
    start, end = quiet_hours
    minute = local_moment.hour * 60 + local_moment.minute
    if start == end:
        return False
    if start < end:
        return start <= minute < end
    return minute >= start or minute < end


def new_memory_importance(connection: apsw.Connection, after: str) -> list[float]:
    """Importance of the live working memories not consolidated and stamped after `after`."""
    columns = set(database.column_names(connection, "working_memory"))
    consolidated = "consolidated_at IS NULL AND " if "consolidated_at" in columns else ""
    return [
        row[0] if row[0] is not None else 0.0
        for row in connection.execute(
            f"SELECT importance FROM working_memory WHERE {consolidated}timestamp > ? "
            f"AND {database.live_condition()}",
            (after, local_timestamp()),
        )
    ]


def decide(
    connection: apsw.Connection,
    ledger,
    options: SleepOptions,
    multi_valued_predicates: tuple[str, ...],
    if_needed: bool,
    force: bool,
    now_local: datetime,
    now_utc: datetime,
) -> TriggerDecision:
    """The decision for one run (module docstring); `ledger` is state.db, read-only, maybe None."""
    if not if_needed:
        return TriggerDecision(checked=False, sleep=True, fired=[UNCONDITIONAL], figures={})
    record = last_sleep_record(ledger)
    previous = record.started_at if record is not None else None
    # New: written after the newest memory the last sleep saw (else after it started).
    if record is None:
        since = ""
    else:
        since = record.newest_seen or to_local(record.started_at).isoformat()
    weights = new_memory_importance(connection, since)
    entropy = normalised_entropy(weights)
    pending = len(find_contradictions(connection, ledger, multi_valued_predicates))
    edges = connection.execute("SELECT count(*) FROM graph_edges").fetchone()[0]
    density = pending / (edges + pending) if pending else 0.0
    hours = None if previous is None else (now_utc - previous) / timedelta(hours=1)
    quiet = in_quiet_hours(now_local, options.quiet_hours_minutes)
    start, end = options.quiet_hours_minutes
    figures = {
        "entropy": round(entropy, 4),
        "new_memories": len(weights),
        "entropy_threshold": options.entropy_threshold,
        "pending_contradictions": pending,
        "contradiction_density": round(density, 4),
        "contradiction_threshold": options.contradiction_density,
        "last_sleep": previous.isoformat(timespec="seconds") if previous else None,
        "hours_since_last_sleep": None if hours is None else round(hours, 2),
        "quiet_hours": f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}",
        "quiet_hours_now": quiet,
    }
    fired = []
    if len(weights) >= options.entropy_min_memories and entropy > options.entropy_threshold:
        fired.append(ENTROPY)
    if density > options.contradiction_density:
        fired.append(CONTRADICTIONS)
    if quiet and (hours is None or hours >= options.hours_between_sleeps):
        fired.append(TIME)
    if force:
        fired.append(FORCED)
    return TriggerDecision(checked=True, sleep=bool(fired), fired=fired, figures=figures)
