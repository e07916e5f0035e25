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


def _cron(value: str) -> str:
    if not croniter.is_valid(value):
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
