"""The option tables of the docs pages, written from the models so they cannot drift.

Each table sits between ``<!-- options: SECTION -->`` and ``<!-- end options -->`` in a page
(docs/configuration.md has them all; each job's page has its own section's);
``python -m mnemo_ops.settings.reference docs/*.md docs/jobs/*.md`` rewrites them in place, and a
test fails when a page and the models disagree.
"""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from mnemo_ops.settings.config import Config
from mnemo_ops.settings.job_sections import JobSchedule
from mnemo_ops.settings.messages import base_types
from mnemo_ops.settings.types import is_run_only, run_alias

_BLOCK = re.compile(r"(<!-- options: ([a-z_.]+) -->\n)(.*?)(<!-- end options -->)", re.DOTALL)
_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "list",
    dict: "mapping",
}


def _type(annotation: Any) -> str:
    names = []
    for kind in base_types(annotation):
        origin = typing.get_origin(kind) or kind
        if origin is Literal:
            values = typing.get_args(kind)
            names.append("integer" if isinstance(values[0], int) else "string")
        elif origin is list:
            (item,) = typing.get_args(kind) or (Any,)
            inner = _type(item)
            names.append(f"list of {inner}s" if inner in ("string", "integer") else "list")
        elif isinstance(origin, type) and issubclass(origin, BaseModel):
            names.append("mapping")
        else:
            names.append(_TYPES.get(origin, getattr(origin, "__name__", str(origin))))
    if names == ["integer", "number"]:
        return "number"
    return " or ".join(dict.fromkeys(names))


def _rules(annotation: Any) -> tuple[list[Any], dict[str, Any]]:
    """The constraints and JSON Schema extras declared inside `annotation` (``PositiveInt | None``)."""
    found: list[Any] = []
    extra: dict[str, Any] = {}
    if typing.get_origin(annotation) is typing.Annotated:
        for item in typing.get_args(annotation)[1:]:
            if isinstance(item, FieldInfo):
                found += item.metadata
                extra.update(item.json_schema_extra or {})
            else:
                found.append(item)
    for argument in typing.get_args(annotation):
        inner, inner_extra = _rules(argument) if typing.get_origin(argument) else ([], {})
        found += inner
        extra.update(inner_extra)
    return found, extra


def _range(field) -> str:
    kinds = base_types(field.annotation)
    literal = [kind for kind in kinds if typing.get_origin(kind) is Literal]
    if literal:
        return ", ".join(f"`{value}`" for value in typing.get_args(literal[0]))
    inner, extra = _rules(field.annotation)
    extra = {**extra, **(field.json_schema_extra or {})}
    rules = {}
    for rule in [*field.metadata, *inner]:
        for name in ("gt", "ge", "le", "lt"):
            if getattr(rule, name, None) is not None:
                rules[name] = getattr(rule, name)
    if "ge" in rules and "le" in rules:
        return f"{rules['ge']:g} to {rules['le']:g}"
    parts = [
        f"{symbol} {rules[name]:g}"
        for name, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
        if name in rules
    ]
    if extra.get("format") == "cron":
        parts.append("a cron expression")
    if extra.get("pattern"):
        parts.append("`HH:MM-HH:MM`")
    return ", ".join(parts)


def _default(field) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list):
        return "`[" + ", ".join(str(item) for item in value) + "]`"
    return f"`{value}`"


def _rows(fields: dict[str, Any], prefix: str = "") -> list[str]:
    rows = []
    for name, field in fields.items():
        key = f"{prefix}{field.alias or name}"
        nested = [
            kind
            for kind in base_types(field.annotation)
            if isinstance(kind, type) and issubclass(kind, BaseModel)
        ]
        if nested:
            rows += _rows(nested[0].model_fields, f"{key}.")
            continue
        meaning = (field.description or "").replace("|", "\\|")
        if run_alias(field):
            meaning += f" (`--option {run_alias(field)}=...` too)"
        if is_run_only(field):
            meaning += " (one run only, never in the config file)"
        cells = [f"`{key}`", _type(field.annotation), _default(field), _range(field), meaning]
        rows.append("| " + " | ".join(cells).replace("|  |", "| |") + " |")
    return rows


def table(section: str) -> str:
    """The markdown table of one section: ``top`` (paths and owner), ``jobs``, or a section name."""
    if section == "top":
        lines = _rows(
            {
                name: field
                for name, field in Config.model_fields.items()
                if not (
                    isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
                )
            }
        )
    elif section == "jobs":
        lines = _rows(JobSchedule.model_fields)
    else:
        model: Any = Config
        for part in section.split("."):
            model = model.model_fields[part].annotation
        lines = _rows(model.model_fields)
    header = "| key | type | default | range | meaning |\n| --- | --- | --- | --- | --- |\n"
    return header + "\n".join(lines) + "\n"


def refresh(text: str) -> str:
    """`text` with every marked table rewritten from the models."""
    return _BLOCK.sub(lambda match: match.group(1) + table(match.group(2)) + match.group(4), text)


def main(argv: list[str]) -> int:
    """Rewrite the tables of the pages named in `argv`."""
    for name in argv:
        path = Path(name)
        path.write_text(refresh(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
