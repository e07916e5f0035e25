"""JSON out of a model's reply: models wrap it in prose or code fences; anything else is malformed."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


class MalformedAnswer(ValueError):
    """The model's reply is not the JSON the task asked for (the message says why, in one line)."""


def parse_json(reply: str) -> Any:
    """The JSON value in `reply`: the whole text, a fenced block, or the outermost ``{...}``."""
    text = (reply or "").strip()
    if not text:
        raise MalformedAnswer("the reply is empty")
    candidates = [text]
    candidates += [match.strip() for match in _FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise MalformedAnswer("the reply holds no JSON object")
