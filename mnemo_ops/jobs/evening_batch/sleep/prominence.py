"""Prominence and utility: how present a memory still is, from its age, confirmations and weight.

    prominence = 0.55 * r ** max(0, age_days - grace)
               + 0.20 * min(1, log2(1 + c) / log2(9))
               + 0.10 * [c > 1] * exp(-days_since_confirmed / 30)
               + 0.10 * importance
               + 0.05 * confidence

    utility = prominence * ln(2 + c)

`r` is the daily retention of the memory's kind (``kinds``), `c` its confirmations (restatements by
the user, never recalls), `age_days` the days since its own timestamp. A memory exempt from decay
(pinned, identity, holding a current canonical lineage) keeps the full age term. Prominence lies in
[0, 1] (the weights add up to 1); bands: active >= 0.5 > dormant >= 0.1 > archive candidate.

Everything here is pure arithmetic, the one implementation both the Python code and the SQL pass over
state.db (`register_functions`) call, so the two can never disagree.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime

AGE_WEIGHT = 0.55
CONFIRMATION_WEIGHT = 0.20
RECENCY_WEIGHT = 0.10
IMPORTANCE_WEIGHT = 0.10
CONFIDENCE_WEIGHT = 0.05
CONFIRMATIONS_FOR_FULL_WEIGHT = 8
"""log2(1 + c) / log2(9) reaches 1 at c = 8 confirmations."""
RECENCY_DAYS = 30.0

ACTIVE = "active"
DORMANT = "dormant"
ARCHIVE = "archive"
ACTIVE_FROM = 0.5
DORMANT_FROM = 0.1

SECONDS_PER_DAY = 86400.0


@dataclasses.dataclass(frozen=True)
class Retention:
    """Daily retention per kind and the grace before decay starts."""

    by_kind: Mapping[str, float]
    grace_days: float = 1.0

    def rate(self, kind: str) -> float:
        """The daily retention of `kind` (an unknown kind decays like an event: the fastest)."""
        return float(self.by_kind.get(kind, min(self.by_kind.values(), default=1.0)))


def retention_of(options) -> Retention:
    """The daily retention per kind and the grace of a ``sleep`` section."""
    rates = {
        "relationship": options.retention_relationship,
        "preference": options.retention_preference,
        "fact": options.retention_fact,
        "insight": options.retention_insight,
        "event": options.retention_event,
    }
    return Retention(by_kind=rates, grace_days=float(options.grace_days))


def _unit(value: float | None) -> float:
    """`value` clamped to [0, 1]; None and NaN count as 0."""
    if value is None or value != value:
        return 0.0
    return min(1.0, max(0.0, float(value)))


def decay_factor(rate: float, age_days: float, grace_days: float) -> float:
    """``rate ** max(0, age_days - grace_days)``: 1 during the grace, then falling by `rate` a day."""
    exponent = max(0.0, float(age_days) - max(0.0, float(grace_days)))
    return _unit(rate) ** exponent


def confirmation_term(confirmations: int) -> float:
    """``min(1, log2(1 + c) / log2(9))``: 0 without confirmations, 1 from eight on."""
    count = max(0, int(confirmations or 0))
    return min(1.0, math.log2(1 + count) / math.log2(1 + CONFIRMATIONS_FOR_FULL_WEIGHT))


def recency_term(confirmations: int, days_since_confirmed: float | None) -> float:
    """``[c > 1] * exp(-days / 30)``: a memory confirmed more than once, and lately, stays present."""
    if int(confirmations or 0) <= 1 or days_since_confirmed is None:
        return 0.0
    return math.exp(-max(0.0, float(days_since_confirmed)) / RECENCY_DAYS)


def prominence(
    rate: float,
    age_days: float,
    confirmations: int,
    days_since_confirmed: float | None,
    importance: float | None,
    confidence: float | None,
    grace_days: float = 1.0,
    exempt: bool = False,
) -> float:
    """The prominence of one memory (module docstring); always within [0, 1]."""
    decay = 1.0 if exempt else decay_factor(rate, age_days, grace_days)
    value = (
        AGE_WEIGHT * decay
        + CONFIRMATION_WEIGHT * confirmation_term(confirmations)
        + RECENCY_WEIGHT * recency_term(confirmations, days_since_confirmed)
        + IMPORTANCE_WEIGHT * _unit(importance)
        + CONFIDENCE_WEIGHT * _unit(confidence)
    )
    return min(1.0, max(0.0, value))


def utility(prominence_value: float, confirmations: int) -> float:
    """``prominence * ln(2 + confirmations)``: what forgetting compares with its threshold."""
    return float(prominence_value) * math.log(2 + max(0, int(confirmations or 0)))


def band(prominence_value: float) -> str:
    """active (>= 0.5), dormant (>= 0.1) or archive (an archive candidate)."""
    if prominence_value >= ACTIVE_FROM:
        return ACTIVE
    if prominence_value >= DORMANT_FROM:
        return DORMANT
    return ARCHIVE


def parse_moment(text: str | None) -> datetime | None:
    """A stored timestamp as a naive local datetime (Mnemosyne's own format), or None.

    An aware timestamp (an import that kept its zone) is converted to local time first.
    """
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone().replace(tzinfo=None)
    return moment


def days_between(earlier: str | None, reference: datetime) -> float | None:
    """Days from the timestamp `earlier` to `reference` (never negative); None when unreadable."""
    moment = parse_moment(earlier)
    if moment is None:
        return None
    return max(0.0, (reference - moment).total_seconds() / SECONDS_PER_DAY)


def of_row(
    retention: Retention,
    reference: datetime,
    kind: str,
    anchor: str | None,
    confirmations: int,
    last_confirmed: str | None,
    importance: float | None,
    confidence: float | None,
    exempt: bool,
) -> float:
    """Prominence of a stored memory at `reference` (an unreadable timestamp counts as age 0)."""
    age = days_between(anchor, reference)
    return prominence(
        retention.rate(kind),
        0.0 if age is None else age,
        confirmations,
        days_between(last_confirmed, reference),
        importance,
        confidence,
        grace_days=retention.grace_days,
        exempt=exempt,
    )


def register_functions(connection, retention: Retention, reference: datetime) -> None:
    """Give a sqlite3 connection ``mnemo_prominence(...)``, ``mnemo_utility(p, c)`` and
    ``mnemo_band(p)``, so one UPDATE can recompute every row with exactly this module's arithmetic."""

    def sql_prominence(kind, anchor, confirmations, last_confirmed, importance, confidence, exempt):
        return of_row(
            retention,
            reference,
            kind or "",
            anchor,
            confirmations or 0,
            last_confirmed,
            importance,
            confidence,
            bool(exempt),
        )

    connection.create_function("mnemo_prominence", 7, sql_prominence, deterministic=True)
    connection.create_function("mnemo_utility", 2, utility, deterministic=True)
    connection.create_function("mnemo_band", 1, band, deterministic=True)
