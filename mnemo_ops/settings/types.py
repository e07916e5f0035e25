"""The value types options are declared with: ranges, cron expressions, time ranges, per-run marks.

Each type carries its rule once: pydantic checks it on every way in (the config file, ``--option
KEY=VALUE``, a command's own flag) and writes it into the JSON Schema (``mnemo-ops config schema``),
so an editor can check a config file against the same rules.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from croniter import croniter
from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

RUN_ONLY = "x-run-only"
"""JSON Schema mark of an option that exists only for one run (``--option``), never in the file."""
RUN_ALIAS = "x-run-alias"
"""JSON Schema mark of an older ``--option`` name still accepted for the option."""


_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
CRON_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {name: number for number, name in enumerate(_MONTHS, start=1)}),
    # 7 is Sunday as well as 0, in Vixie cron and cronie alike.
    ("day of week", 0, 7, {name: number for number, name in enumerate(_WEEKDAYS)}),
)
"""The five fields crontab reads: name, lowest and highest value, the three-letter names it takes."""
CRON_MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
"""The ``@`` shorthands Vixie cron and cronie read (``@reboot`` is no schedule: it runs at boot)."""
_CRON_ITEM = re.compile(
    r"^(?:\*|(?P<start>[0-9]+|[a-zA-Z]{3})(?:-(?P<end>[0-9]+|[a-zA-Z]{3}))?)(?:/(?P<step>[0-9]+))?$"
)
"""One item of a field's list: ``*`` or a value or a range of values, with an optional step."""


def _cron_value(text: str, names: dict[str, int]) -> int | None:
    """The number `text` names in a field (a number or, where the field has them, a name)."""
    return int(text) if text.isdigit() else names.get(text.lower())


def vixie_cron_problem(expression: str) -> str | None:
    """Why `expression` is not one crontab (Vixie cron, cronie) can run, or None when it is.

    croniter, which computes our next and last runs, also reads extensions that cron daemons refuse
    or read differently (``L``, ``W``, ``#``, ``?``, ``H``, a seconds or years field, ``5/10``):
    a schedule has to mean the same to every scheduler we render it for, so only the syntax they
    share passes: five fields of ``*``, numbers, three-letter names, lists, ranges and steps.
    """
    text = " ".join(expression.split())
    if text.startswith("@"):
        if text.lower() in CRON_MACROS:
            return None
        return (
            f"{text} is not a schedule crontab runs (use one of {', '.join(sorted(CRON_MACROS))})"
        )
    fields = text.split(" ") if text else []
    if len(fields) != len(CRON_FIELDS):
        return (
            f"{len(fields)} fields instead of 5 (minute hour day-of-month month day-of-week; no "
            "seconds or years field)"
        )
    for part, (field, low, high, names) in zip(fields, CRON_FIELDS):
        for item in part.split(","):
            match = _CRON_ITEM.match(item)
            if match is None:
                return (
                    f"{field} {item!r} is not a number, name, list, range or step "
                    "(crontab has no L, W, #, ? or H)"
                )
            if match["start"] is not None:
                start = _cron_value(match["start"], names)
                end = start if match["end"] is None else _cron_value(match["end"], names)
                if start is None or end is None:
                    return f"{field} {item!r} names no {field}"
                if not (low <= start <= high and low <= end <= high):
                    return f"{field} {item!r} is outside {low}-{high}"
                if end < start:
                    return f"{field} range {item!r} runs backwards"
                if match["step"] is not None and match["end"] is None:
                    # croniter reads 5/10 as 5-max/10, Vixie cron refuses it.
                    return f"{field} step {item!r} needs a range or '*' before the '/'"
            if match["step"] is not None and int(match["step"]) == 0:
                return f"{field} step {item!r} must be above 0"
    return None


def _cron(value: str) -> str:
    problem = vixie_cron_problem(value)
    if problem is not None:
        raise PydanticCustomError(
            "cron",
            "is not a valid cron expression as crontab reads it: {problem}: {value}",
            {"problem": problem, "value": repr(value)},
        )
    if not croniter.is_valid(value):  # a backstop: every schedule is also computed by croniter
        raise PydanticCustomError(
            "cron", "is not a valid cron expression: {value}", {"value": repr(value)}
        )
    return value


_TIME_RANGE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)")


def parse_time_range(text: str) -> tuple[int, int] | None:
    """``"02:00-05:00"`` -> (start, end) in minutes after midnight; None when not of that form.

    The end may come before the start (``"23:00-04:00"`` runs over midnight).
    """
    match = _TIME_RANGE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        return None
    hour_from, minute_from, hour_to, minute_to = (int(part) for part in match.groups())
    return hour_from * 60 + minute_from, hour_to * 60 + minute_to


def _time_range(value: str) -> str:
    if parse_time_range(value) is None:
        raise PydanticCustomError(
            "time_range",
            "must be a local time range HH:MM-HH:MM, got {value}",
            {"value": repr(value)},
        )
    return value


Number = int | float
"""A number: an integer stays an integer (so ``config show`` prints what the file says)."""
Fraction = Annotated[float, Field(ge=0, le=1)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveNumber = Annotated[Number, Field(gt=0)]
NonNegativeNumber = Annotated[Number, Field(ge=0)]
Similarity = Annotated[Number, Field(gt=0, le=100)]
"""A rapidfuzz ratio: 100 is the same text."""
CronExpression = Annotated[str, AfterValidator(_cron), Field(json_schema_extra={"format": "cron"})]
TimeRange = Annotated[
    str,
    AfterValidator(_time_range),
    Field(json_schema_extra={"pattern": _TIME_RANGE.pattern, "examples": ["02:00-05:00"]}),
]


def option(default: Any, help: str = "", **rules: Any) -> Any:
    """A config option: its default, its help (the schema's description) and any extra rule."""
    return Field(default, description=help or None, **rules)


def run_option(default: Any, help: str) -> Any:
    """An option for one run only (``--option KEY=VALUE`` or ``--KEY``), refused in the file."""
    return Field(default, description=help, json_schema_extra={RUN_ONLY: True})


def is_run_only(field) -> bool:
    """True for a field declared with `run_option`."""
    extra = field.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get(RUN_ONLY))


def run_alias(field) -> str | None:
    """The older ``--option`` name of a field, if it has one."""
    extra = field.json_schema_extra
    return extra.get(RUN_ALIAS) if isinstance(extra, dict) else None
