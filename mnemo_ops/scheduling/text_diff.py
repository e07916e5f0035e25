"""A unified diff of two texts that reads right when a text does not end with a newline.

``difflib.unified_diff`` leaves a last line without its newline as it is, so the next diff line (or
whatever is printed after the diff) runs on from it. Like ``diff -u``, each such line is ended here
and followed by ``\\ No newline at end of file``.
"""

from __future__ import annotations

import difflib

NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(before: str, after: str, from_name: str, to_name: str) -> str:
    """The unified diff of `before` and `after` ("" when equal), every line newline-terminated."""
    lines = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), from_name, to_name
    ):
        if line.endswith("\n"):
            lines.append(line)
        else:
            lines.append(f"{line}\n{NO_NEWLINE}")
    return "".join(lines)
