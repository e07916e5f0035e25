"""Hermes' ``cron/jobs.json`` read and rewritten as text, so that what we do not change keeps its bytes.

The file is parsed for where its parts are (each entry's span, the ``jobs`` array's, ``updated_at``'s)
rather than loaded and dumped again: every foreign entry, and the file's own layout, stays exactly as
it was. A file that is not valid JSON, or not in the shape Hermes writes, is refused
(`HermesJobsFileError`) and never overwritten. Nothing here follows a symlink.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.foundation.private_files import refuse_symlink
from mnemo_ops.scheduling.hermes.paths import HermesPaths


class HermesJobsFileError(MnemoOpsError):
    """jobs.json cannot be read safely (not JSON, or not the shape Hermes writes): nothing is written."""


_WHITESPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


@dataclasses.dataclass
class JobsDocument:
    """jobs.json as text plus where its parts are: each entry's span, the array's, updated_at's."""

    path: Path
    text: str | None  # None: the file does not exist yet
    entries: list[Any]
    entry_spans: list[tuple[int, int]]
    array_span: tuple[int, int] | None  # "[" .. "]" inclusive-exclusive
    updated_at_span: tuple[int, int] | None
    key_indent: str = "  "

    @property
    def exists(self) -> bool:
        """True when the file exists."""
        return self.text is not None

    def entry_text(self, index: int) -> str:
        """The exact text of entry `index`."""
        start, end = self.entry_spans[index]
        return self.text[start:end]


def _malformed(path: Path, reason: str) -> HermesJobsFileError:
    return HermesJobsFileError(
        f"{path}: {reason}; fix it (`hermes cron list` repairs the shapes Hermes knows) "
        "before installing: nothing was written"
    )


def parse_jobs_text(path: Path, text: str) -> JobsDocument:
    """Locate the entries of a jobs.json text; HermesJobsFileError when it is not Hermes' shape."""
    try:
        _DECODER.decode(text.lstrip("\ufeff"))
    except json.JSONDecodeError as error:
        raise _malformed(
            path, f"not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    index = _skip(text, 1 if text.startswith("\ufeff") else 0)
    if index >= len(text) or text[index] != "{":
        raise _malformed(path, 'not an object {"jobs": [...]} (Hermes repairs other shapes itself)')
    index = _skip(text, index + 1)
    array_span = updated_at_span = None
    key_indent = "  "
    while index < len(text) and text[index] != "}":
        line_start = text.rfind("\n", 0, index) + 1
        key_prefix = text[line_start:index]
        key, index = json.decoder.scanstring(text, index + 1)
        index = _skip(text, index)
        index = _skip(text, index + 1)  # the ":"
        value, end = _DECODER.raw_decode(text, index)
        if key == "jobs":
            if not isinstance(value, list):
                raise _malformed(path, f'"jobs" is a {type(value).__name__}, not a list')
            array_span = (index, end)
            # Hermes writes indent=2; a compact file gives no indentation to follow.
            key_indent = key_prefix if key_prefix and not key_prefix.strip() else "  "
        elif key == "updated_at":
            updated_at_span = (index, end)
        index = _skip(text, end)
        if index < len(text) and text[index] == ",":
            index = _skip(text, index + 1)
    if array_span is None:
        raise _malformed(path, 'no "jobs" list')
    entries, spans = [], []
    index = _skip(text, array_span[0] + 1)
    while text[index] != "]":
        value, end = _DECODER.raw_decode(text, index)
        entries.append(value)
        spans.append((index, end))
        index = _skip(text, end)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return JobsDocument(path, text, entries, spans, array_span, updated_at_span, key_indent)


def read_jobs_document(paths: HermesPaths) -> JobsDocument:
    """jobs.json of `paths` (an empty document when the file does not exist yet)."""
    refuse_symlink(paths.cron_dir)
    refuse_symlink(paths.jobs_file)
    try:
        raw = paths.jobs_file.read_bytes()
    except FileNotFoundError:
        return JobsDocument(paths.jobs_file, None, [], [], None, None)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed(paths.jobs_file, "not UTF-8 text") from None
    return parse_jobs_text(paths.jobs_file, text)


def _indented(value: Any, indent: str) -> str:
    """`value` as Hermes writes it (``json.dump(indent=2, ensure_ascii=False)``), nested at `indent`."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def compose_jobs_text(
    document: JobsDocument, entries: list[tuple[int | None, Any]], stamp: str
) -> str:
    """The new jobs.json text: `entries` in order, each ``(index of an original entry or None, value)``.

    An entry given with its original text keeps those bytes; the separators around the original
    entries are kept too, so removing what install appended gives back the earlier array exactly.
    """
    if not document.exists:
        values = [value for _, value in entries]
        return json.dumps({"jobs": values, "updated_at": stamp}, indent=2, ensure_ascii=False)
    text = document.text
    start, end = document.array_span
    element_indent = document.key_indent + "  "
    spans = document.entry_spans
    if spans:
        opening = text[start + 1 : spans[0][0]]
        closing = text[spans[-1][1] : end - 1]
        separators = [text[spans[i - 1][1] : spans[i][0]] for i in range(1, len(spans))]
        default_separator = separators[-1] if separators else "," + opening
        element_indent = opening.rsplit("\n", 1)[-1] if "\n" in opening else element_indent
    else:
        opening = "\n" + element_indent
        closing = "\n" + document.key_indent
        separators, default_separator = [], ",\n" + element_indent
    parts: list[str] = []
    previous = None
    for index, value in entries:
        if parts:
            neighbours = index is not None and previous is not None and index == previous + 1
            parts.append(separators[index - 1] if neighbours else default_separator)
        parts.append(
            document.entry_text(index) if index is not None else _indented(value, element_indent)
        )
        previous = index
    array = "[" + (opening + "".join(parts) + closing if parts else "") + "]"
    new_text = text[:start] + array + text[end:]
    if document.updated_at_span is not None:
        shift = len(array) - (end - start)
        a, b = document.updated_at_span
        if a > start:
            a, b = a + shift, b + shift
        new_text = new_text[:a] + json.dumps(stamp) + new_text[b:]
    return new_text
