"""Redaction: replace every secret in a text by ``[REDACTED:<kind>]`` before the text goes anywhere
it could be read by someone else (a model, above all)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path

from mnemo_ops.models.redaction.known import known_secret_values
from mnemo_ops.models.redaction.patterns import ASSIGNMENT, TOKEN_PATTERNS

MARKER = "[REDACTED:{kind}]"


@dataclasses.dataclass(frozen=True)
class Redacted:
    """A redacted text and what was removed from it (kinds and counts only, never values)."""

    text: str
    count: int
    kinds: tuple[str, ...] = ()


class Redactor:
    """Finds secrets by shape (`TOKEN_PATTERNS`, `ASSIGNMENT`) and by value (the stored ones)."""

    def __init__(self, known_values: Iterable[str] = ()):
        # Longest first, so a value that contains another is replaced whole.
        values = sorted({value for value in known_values if value}, key=len, reverse=True)
        self._known = re.compile("|".join(re.escape(value) for value in values)) if values else None

    def redact(self, text: str) -> Redacted:
        """`text` with every secret replaced; the number and kinds of replacements."""
        count = 0
        kinds: list[str] = []

        def replace(kind: str):
            def substitute(match: re.Match[str]) -> str:
                nonlocal count
                count += 1
                kinds.append(kind)
                return MARKER.format(kind=kind)

            return substitute

        if self._known is not None:
            text = self._known.sub(replace("stored-secret"), text)
        for kind, pattern in TOKEN_PATTERNS:
            text = pattern.sub(replace(kind), text)

        def assignment(match: re.Match[str]) -> str:
            nonlocal count
            value = match.group("value").strip("\"'")
            if not value or value.startswith("[REDACTED:"):
                return match.group(0)
            count += 1
            kinds.append("secret-assignment")
            quote = match.group("value")[0] if match.group("value")[0] in "\"'" else ""
            marker = MARKER.format(kind="secret-assignment")
            return f"{match.group('key')}{match.group('separator')}{quote}{marker}{quote}"

        text = ASSIGNMENT.sub(assignment, text)
        return Redacted(text=text, count=count, kinds=tuple(sorted(set(kinds))))


def redactor_for(hermes_home: Path) -> Redactor:
    """A redactor that knows the secrets stored in `hermes_home`'s auth files."""
    return Redactor(known_secret_values(hermes_home))
