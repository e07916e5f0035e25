"""Cron expressions translated into systemd ``OnCalendar=`` values, or refused.

The meaning we keep is croniter's (what ``mnemo-ops jobs`` and the overdue checks compute), on the
five-field syntax that cron daemons share with it: ``*``, numbers, names (JAN-DEC, SUN-SAT), lists,
ranges, steps, and the ``@hourly``..``@yearly`` macros. Every field is expanded to its set of values
and rendered back as systemd components, so nothing is approximated. Two things need care:

- Day of month and day of week. When both are restricted, cron runs on a day that matches EITHER;
  an OnCalendar value requires ALL its components, so the schedule becomes two OnCalendar lines (a
  timer elapses at the union of its lines). Cron daemons count a field that *starts* with ``*``
  (``*/2``) as unrestricted while croniter counts only a bare ``*``: where the two readings differ,
  the expression is refused instead of guessed.
- Anything outside that shared syntax (``L``, ``W``, ``#``, ``?``, seconds or years fields,
  ``@reboot``) is refused too.

A refusal is a UsageError (exit 2) naming the job and the expression.
"""

from __future__ import annotations

import dataclasses

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
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
WEEKDAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
SYSTEMD_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
"""systemd's order; cron counts 0 (and 7) = Sunday, 1 = Monday."""


class UntranslatableSchedule(UsageError):
    """A cron expression that OnCalendar cannot express with the same meaning (exit 2)."""


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_offset: int = 0


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, MONTH_NAMES, 1),
    _Field("day of week", 0, 7, WEEKDAY_NAMES, 0),
)


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


def _number(text: str, field: _Field, refuse) -> int:
    upper = text.upper()
    if field.names and upper in field.names:
        return field.names.index(upper) + field.name_offset
    if not text.isdigit():
        refuse(f"{field.name} value {text!r} is not a number or name (no L, W, #, ? or H)")
    value = int(text)
    if not field.low <= value <= field.high:
        refuse(f"{field.name} value {value} is outside {field.low}-{field.high}")
    return value


def _expand(text: str, field: _Field, refuse) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                refuse(f"{field.name} step {step_text!r} is not a positive number")
            step = int(step_text)
        if base == "*":
            start, end = field.low, field.high
        elif "-" in base:
            start_text, _, end_text = base.partition("-")
            start, end = _number(start_text, field, refuse), _number(end_text, field, refuse)
            if start > end:
                if slash:
                    refuse(f"{field.name} range {base!r} wraps around and has a step")
                # croniter reads a wrapping range (22-2) as 22..max plus min..2.
                values.update(range(start, field.high + 1))
                values.update(range(field.low, end + 1))
                continue
        else:
            start = _number(base, field, refuse)
            end = field.high if slash else start  # croniter: 5/15 means 5-max/15
        values.update(range(start, end + 1, step))
    return values


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
    sets = [_expand(part, field, refuse) for part, field in zip(parts, _FIELDS)]
    day_of_month, day_of_week = parts[2], parts[4]
    # croniter counts a field as restricted unless it is exactly "*"; cron daemons unless it starts
    # with "*". Where both are restricted in one reading only, the two disagree: refuse.
    dom_restricted, dow_restricted = day_of_month != "*", day_of_week != "*"
    if (
        dom_restricted
        and dow_restricted
        and (day_of_month.startswith("*") or day_of_week.startswith("*"))
    ):
        refuse(
            "day of month and day of week are both set and one starts with '*': cron daemons "
            "require both, croniter either"
        )
    weekdays = {0 if value == 7 else value for value in sets[4]}
    return CronFields(
        minutes=frozenset(sets[0]),
        hours=frozenset(sets[1]),
        days_of_month=frozenset(sets[2]),
        months=frozenset(sets[3]),
        days_of_week=frozenset(weekdays),
        day_of_month_restricted=dom_restricted,
        day_of_week_restricted=dow_restricted,
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
