"""Cron expressions translated into systemd ``OnCalendar=`` values, or refused.

The meaning we keep is croniter's (what ``mnemo-ops jobs`` and the overdue checks compute), on the
five-field syntax that cron daemons share with it: ``*``, numbers, names (JAN-DEC, SUN-SAT), lists,
ranges, steps, and the ``@hourly``..``@yearly`` macros. croniter itself expands every field to its
set of values (``croniter.expand``), which is rendered back as systemd components, so nothing is
approximated. Three things need care:

- Day of month and day of week. When both are restricted, cron runs on a day that matches EITHER;
  an OnCalendar value requires ALL its components, so the schedule becomes two OnCalendar lines (a
  timer elapses at the union of its lines). Cron daemons count a field that *starts* with ``*``
  (``*/2``) as unrestricted, while croniter counts a field as unrestricted when it expands to
  ``*`` (a bare ``*``, or every value with a ``*`` somewhere in the other day field): where the two
  readings differ, the expression is refused instead of guessed.
- A range that starts and ends on the same value (``5-5``, ``JAN-JAN``): croniter reads the whole
  cycle, cron daemons the one value, so it is refused too.
- Anything outside that shared syntax (``L``, ``W``, ``#``, ``?``, ``H``, seconds or years fields,
  ``@reboot``) is refused as well, although croniter reads some of it.

A refusal is a UsageError (exit 2) naming the job and the expression.
"""

from __future__ import annotations

import dataclasses
import re

from croniter import CroniterError, croniter

from mnemo_ops.foundation.errors import UsageError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELD_NAMES = ("minute", "hour", "day of month", "month", "day of week")
DAY_OF_MONTH, DAY_OF_WEEK = 2, 4
SYSTEMD_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
"""systemd's order; cron counts 0 (and 7) = Sunday, 1 = Monday."""

SHARED_SYNTAX = re.compile(
    r"^(?:\*|(?P<start>[0-9]+|[a-z]{3})(?:-(?P<end>[0-9]+|[a-z]{3}))?)(?:/[0-9]+)?$",
    re.IGNORECASE,
)
"""One item of a field's list in the syntax cron daemons share with croniter: ``*``, a number or a
three-letter name, or a range of them, each with an optional step."""


class UntranslatableSchedule(UsageError):
    """A cron expression that OnCalendar cannot express with the same meaning (exit 2)."""


@dataclasses.dataclass(frozen=True)
class CronFields:
    """An expanded cron expression: the set of values of each field, and which days are restricted."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]  # 0 = Sunday .. 6 = Saturday
    day_of_month_restricted: bool
    day_of_week_restricted: bool


def _bound(index: int, text: str) -> int | None:
    """The number a range bound names in field `index`, as cron daemons read it (``7`` stays 7,
    where croniter reads Sunday); None for a name the field does not have."""
    if text.isdigit():
        return int(text)
    value = croniter.ALPHACONV[index].get(text.lower())
    return value if isinstance(value, int) else None


def parse(expression: str, job: str) -> CronFields:
    """Expand `expression` (five fields or a macro); UntranslatableSchedule naming `job` if unsupported."""

    def refuse(reason: str):
        raise UntranslatableSchedule(
            f"{job}: cannot translate the schedule {expression!r} to systemd OnCalendar "
            f"faithfully ({reason}); use plain cron fields (numbers, names, lists, ranges, steps)"
        )

    text = " ".join(expression.split())
    if text.startswith("@"):
        if text.lower() not in MACROS:
            refuse(f"{text} has no calendar equivalent")
        text = MACROS[text.lower()]
    parts = text.split(" ")
    if len(parts) != 5:
        refuse(f"{len(parts)} fields instead of 5")
    for index, part in enumerate(parts):
        for item in part.split(","):
            match = SHARED_SYNTAX.match(item)
            if match is None:
                refuse(
                    f"{FIELD_NAMES[index]} value {item!r} is not a number, name, range or step "
                    f"(no L, W, #, ? or H)"
                )
            if match["end"]:
                start = _bound(index, match["start"])
                if start is not None and start == _bound(index, match["end"]):
                    refuse(
                        f"{FIELD_NAMES[index]} range {item!r} starts and ends on one value: cron "
                        f"daemons read that value, croniter the whole cycle"
                    )
    try:
        expanded, _ = croniter.expand(text)
    except CroniterError as error:
        refuse(str(error))
    # croniter applies the either-day rule unless a day field expanded to "*"; cron daemons unless
    # a day field starts with "*". Where the two readings differ, refuse.
    day_of_month_restricted = expanded[DAY_OF_MONTH] != ["*"]
    day_of_week_restricted = expanded[DAY_OF_WEEK] != ["*"]
    croniter_either = day_of_month_restricted and day_of_week_restricted
    daemons_either = not any(parts[index].startswith("*") for index in (DAY_OF_MONTH, DAY_OF_WEEK))
    if croniter_either and not daemons_either:
        refuse(
            "day of month and day of week are both set and one starts with '*': cron daemons "
            "require both, croniter either"
        )
    if daemons_either and not croniter_either:
        refuse(
            "a day field covers every day and the other has a '*' inside: cron daemons accept "
            "either day field, croniter requires both"
        )
    sets = [
        frozenset(range(low, high + 1)) if values == ["*"] else frozenset(values)
        for values, (low, high) in zip(expanded, croniter.RANGES)
    ]
    return CronFields(
        minutes=sets[0],
        hours=sets[1],
        days_of_month=sets[2],
        months=sets[3],
        days_of_week=sets[4],
        day_of_month_restricted=day_of_month_restricted,
        day_of_week_restricted=day_of_week_restricted,
    )


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and runs[-1][1] == value - 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _component(values: frozenset[int], low: int, high: int) -> str:
    """One numeric component: ``*``, ``start/step`` (a progression to the end), or a list with ranges."""
    ordered = sorted(values)
    if ordered == list(range(low, high + 1)):
        return "*"
    if len(ordered) >= 2:
        step = ordered[1] - ordered[0]
        progression = list(range(ordered[0], high + 1, step))
        if ordered == progression:
            return f"{ordered[0]:02d}/{step}"
    parts = []
    for start, end in _runs(ordered):
        if end - start >= 2:
            parts.append(f"{start:02d}..{end:02d}")
        else:
            parts.extend(f"{value:02d}" for value in range(start, end + 1))
    return ",".join(parts)


def _weekdays(days: frozenset[int]) -> str:
    """The weekday prefix (``Mon..Fri``, ``Sun``) in systemd's Monday-first order ("" for every day)."""
    positions = sorted((day - 1) % 7 for day in days)  # Monday = 0 .. Sunday = 6
    if len(positions) == 7:
        return ""
    parts = []
    for start, end in _runs(positions):
        if end - start >= 2:
            parts.append(f"{SYSTEMD_WEEKDAYS[start]}..{SYSTEMD_WEEKDAYS[end]}")
        else:
            parts.extend(SYSTEMD_WEEKDAYS[position] for position in range(start, end + 1))
    return ",".join(parts)


def _line(fields: CronFields, days_of_month: frozenset[int], weekdays: frozenset[int]) -> str:
    prefix = _weekdays(weekdays)
    date = f"*-{_component(fields.months, 1, 12)}-{_component(days_of_month, 1, 31)}"
    time = f"{_component(fields.hours, 0, 23)}:{_component(fields.minutes, 0, 59)}:00"
    return f"{prefix + ' ' if prefix else ''}{date} {time}"


def on_calendar(expression: str, job: str) -> list[str]:
    """The OnCalendar values (one, or two for cron's either-day rule) that elapse exactly when
    `expression` fires; UntranslatableSchedule (exit 2, naming `job`) when that cannot be said."""
    fields = parse(expression, job)
    every_day = frozenset(range(1, 32))
    every_weekday = frozenset(range(7))
    if fields.day_of_month_restricted and fields.day_of_week_restricted:
        return [
            _line(fields, fields.days_of_month, every_weekday),
            _line(fields, every_day, fields.days_of_week),
        ]
    return [_line(fields, fields.days_of_month, fields.days_of_week)]
