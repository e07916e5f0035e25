"""Validation errors as one line each, in the wording users have seen since the first release.

``key 'backup.keep' must be an integer, got 'three'``: where the value came from (a file, or
``--option``), the dotted key, and what it must be. Shared by the config file, ``--option`` and the
job manifests, so every refusal reads the same way.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a mapping",
}


def base_types(annotation: Any) -> list[Any]:
    """The plain types an annotation admits (``int | None`` -> [int]; Literal kept whole)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return base_types(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        found = []
        for argument in typing.get_args(annotation):
            if argument is not type(None):
                found.extend(base_types(argument))
        return found
    return [annotation]


def _type_name(annotation: Any) -> str:
    names = []
    for kind in base_types(annotation):
        origin = typing.get_origin(kind) or kind
        if origin is Literal:
            return "one of " + ", ".join(str(value) for value in typing.get_args(kind))
        if isinstance(origin, type) and issubclass(origin, BaseModel):
            names.append("a mapping")
        else:
            names.append(_TYPE_NAMES.get(origin, getattr(origin, "__name__", str(origin))))
    if names == ["an integer", "a number"]:
        return "a number"
    return " or ".join(dict.fromkeys(names))


def _plural(annotation: Any) -> str:
    """What a list of `annotation` holds: "strings", or the allowed values of a Literal."""
    kinds = base_types(annotation)
    if kinds and typing.get_origin(kinds[0]) is Literal:
        return ", ".join(str(value) for value in typing.get_args(kinds[0]))
    return _type_name(annotation).removeprefix("a ").removeprefix("an ") + "s"


def _field_at(model: type[BaseModel], loc: tuple) -> tuple[Any, tuple, bool]:
    """(the field's annotation, the dotted key's parts, whether the error is inside a list item)."""
    parts: list[str] = []
    annotation: Any = model
    in_item = False
    for step in loc:
        kinds = [
            kind
            for kind in base_types(annotation)
            if isinstance(kind, type) or typing.get_origin(kind)
        ]
        models = [kind for kind in kinds if isinstance(kind, type) and issubclass(kind, BaseModel)]
        lists = [kind for kind in kinds if typing.get_origin(kind) is list]
        if isinstance(step, int) and lists:
            parts[-1] = f"{parts[-1]}[{step}]"
            annotation = typing.get_args(lists[0])[0]
            in_item = not any(
                isinstance(kind, type) and issubclass(kind, BaseModel)
                for kind in base_types(annotation)
            )
            continue
        if not models or not isinstance(step, str):
            break  # a union branch name or a mapping key: the error belongs to the field
        current = models[0]
        field_name = next(
            (name for name, field in current.model_fields.items() if field.alias == step), step
        )
        field = current.model_fields.get(field_name)
        parts.append(step)
        if field is None:
            return None, tuple(parts), False
        annotation = field.annotation
        in_item = False
    return annotation, tuple(parts), in_item


def _constraint(model: type[BaseModel], parts: tuple, name: str) -> Any:
    """The value of constraint `name` (ge, le) declared on the field at `parts`, if any."""
    current: Any = model
    field = None
    for part in parts:
        part = part.split("[")[0]
        candidates = [
            kind
            for kind in base_types(current)
            if isinstance(kind, type) and issubclass(kind, BaseModel)
        ]
        if not candidates:
            return None
        fields = candidates[0].model_fields
        field = next((f for key, f in fields.items() if (f.alias or key) == part), None)
        if field is None:
            return None
        current = field.annotation
    for rule in getattr(field, "metadata", ()):
        if hasattr(rule, name):
            return getattr(rule, name)
    return None


def _message(model: type[BaseModel], error: dict[str, Any], where: str) -> str:
    """One line for one pydantic error, in mnemo-ops' wording."""
    loc = tuple(error["loc"])
    annotation, parts, in_item = _field_at(model, loc)
    dotted = ".".join(parts)
    kind = error["type"]
    value = error.get("input")
    context = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return f"{where}: unknown key '{dotted}'" + _did_you_mean(model, loc)
    if not parts:
        return f"{where}: {error['msg']}"
    key = f"{where}: key '{dotted}'"
    if kind in ("model_type", "model_attributes_type", "dict_type") and is_model(annotation):
        return f"{key} must be a mapping, got {type(value).__name__}"
    if kind == "missing":
        return f"{where}: missing key '{dotted}'"
    if kind == "literal_error" and not in_item:
        return f"{key} must be {_type_name(annotation)}, got {value!r}"
    if kind in ("greater_than", "greater_than_equal", "less_than_equal", "less_than"):
        low = _constraint(model, parts, "ge")
        high = _constraint(model, parts, "le")
        if low is not None and high is not None:
            return f"{key} must be between {low:g} and {high:g}, got {value!r}"
        if kind == "greater_than":
            return f"{key} must be greater than {context['gt']:g}, got {value!r}"
        if kind == "greater_than_equal":
            return f"{key} must be {context['ge']:g} or more, got {value!r}"
        limit = context.get("le", context.get("lt"))
        return f"{key} must be at most {limit:g}, got {value!r}"
    if in_item:
        return f"{where}: key '{dotted.rpartition('[')[0]}' must be a list of {_plural(annotation)}"
    if kind.endswith("_type") or kind.endswith("_parsing") or kind == "int_from_float":
        return f"{key} must be {_type_name(annotation)}, got {value!r}"
    if kind in ("cron", "time_range", "absolute_path", "regex", "cross_field"):
        return f"{key} {error['msg']}" if kind != "cross_field" else f"{key}: {error['msg']}"
    return f"{key}: {error['msg']}"


def _did_you_mean(model: type[BaseModel], loc: tuple) -> str:
    """``; did you mean 'max_rows'?`` for an unknown key that is close to a key of its section,
    else nothing (a key with no near neighbour gets no guess)."""
    parent, parts, _ = _field_at(model, loc[:-1]) if len(loc) > 1 else (model, (), False)
    sections = [kind for kind in base_types(parent) if isinstance(kind, type)]
    sections = [kind for kind in sections if issubclass(kind, BaseModel)]
    if not sections or not isinstance(loc[-1], str):
        return ""
    keys = [field.alias or name for name, field in sections[0].model_fields.items()]
    close = difflib.get_close_matches(loc[-1], keys, n=1, cutoff=0.6)
    if not close:
        return ""
    return f"; did you mean '{'.'.join((*parts, close[0]))}'?"


def is_model(annotation: Any) -> bool:
    return any(
        isinstance(kind, type) and issubclass(kind, BaseModel) for kind in base_types(annotation)
    )


def validation_message(model: type[BaseModel], error: ValidationError, where: str) -> str:
    """The first problem of `error`, as one line naming `where` and the dotted key.

    Only the first: a union's alternatives give several errors for one key, and a user fixes one
    line at a time.
    """
    return _message(model, error.errors()[0], where)
