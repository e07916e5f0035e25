"""Eval suites: JSONL (one case per line) or YAML (a list of cases, or ``{k: 10, cases: [...]}``).

A case: ``{"id", "query", "relevant": [memory ids], "expect": [substrings], "session", "category",
"k", "answer"}``. ``id`` and ``query`` are required, and at least one of ``relevant`` / ``expect``.

``session`` names where the case is asked: a session id as the database names it (the Hermes
plugin's conversations are ``hermes_<key>``), or ``new``: a brand-new conversation, a session key no
row has (`NEW_CONVERSATION`). Without it the case is asked with no session (recall across sessions;
the Hermes profile asks in the agent's newest conversation). ``answer`` (the gold answer, which the
importers copy from the benchmark) is what "answer received" looks for in what the agent receives.

A suite is configuration a deploy gate trusts, so a malformed one is rejected as a whole (exit 2,
naming the file, the line or case, and the field) rather than silently run with fewer cases.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from mnemo_ops.foundation.errors import UsageError

NEW_CONVERSATION = "new"
"""The ``session`` of a case asked in a brand-new conversation (a session key no row has)."""

KNOWN_FIELDS = ("id", "query", "relevant", "expect", "session", "category", "k", "answer")


@dataclasses.dataclass(frozen=True)
class Case:
    """One query and what counts as a good answer to it."""

    id: str
    query: str
    relevant: tuple[str, ...] = ()
    expect: tuple[str, ...] = ()
    session: str | None = None
    category: str | None = None
    k: int | None = None
    answer: str | None = None

    @property
    def in_new_conversation(self) -> bool:
        """True when the case is asked in a brand-new conversation (``session: new``)."""
        return self.session == NEW_CONVERSATION

    def expected_text(self) -> str:
        """What the case expects, for messages: the ids and the substrings."""
        parts = [f"id {memory_id}" for memory_id in self.relevant] + [
            repr(text) for text in self.expect
        ]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The JSONL form, without empty fields."""
        data: dict[str, Any] = {"id": self.id, "query": self.query}
        if self.relevant:
            data["relevant"] = list(self.relevant)
        if self.expect:
            data["expect"] = list(self.expect)
        for name in ("session", "category", "k", "answer"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data


@dataclasses.dataclass
class Suite:
    """The cases of one suite file, its sha256 and its default k (None: the run's k)."""

    path: Path
    sha256: str
    cases: list[Case]
    k: int | None = None


def _string_list(where: str, name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(
        isinstance(item, (str, int)) and str(item).strip() for item in value
    ):
        raise UsageError(f"{where}: field '{name}' must be a list of non-empty strings")
    return tuple(str(item) for item in value)


def parse_case(where: str, data: Any) -> Case:
    """Validate one case (a mapping) and return it; UsageError naming `where` and the field otherwise."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a case must be an object, got {type(data).__name__}")
    unknown = sorted(str(key) for key in data if key not in KNOWN_FIELDS)
    if unknown:
        raise UsageError(
            f"{where}: unknown field '{unknown[0]}' (fields: {', '.join(KNOWN_FIELDS)})"
        )
    case_id = data.get("id")
    if not isinstance(case_id, (str, int)) or isinstance(case_id, bool) or not str(case_id).strip():
        raise UsageError(f"{where}: field 'id' is required (a non-empty string)")
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise UsageError(f"{where}: field 'query' is required (a non-empty string)")
    relevant = _string_list(where, "relevant", data.get("relevant"))
    expect = _string_list(where, "expect", data.get("expect"))
    if not relevant and not expect:
        raise UsageError(
            f"{where}: field 'relevant' or 'expect' is required (what counts as found)"
        )
    k = data.get("k")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k <= 0):
        raise UsageError(f"{where}: field 'k' must be a positive integer, got {k!r}")
    optional: dict[str, str | None] = {}
    for name in ("session", "category", "answer"):
        value = data.get(name)
        if value is not None and not isinstance(value, (str, int)):
            raise UsageError(f"{where}: field '{name}' must be a string")
        optional[name] = None if value is None else str(value)
    return Case(id=str(case_id), query=query, relevant=relevant, expect=expect, k=k, **optional)


def _jsonl_cases(path: Path, text: str) -> list[Case]:
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise UsageError(f"{path}:{number}: not valid JSON ({error.msg})") from None
        cases.append(parse_case(f"{path}:{number}", data))
    return cases


def _yaml_cases(path: Path, text: str) -> tuple[list[Case], int | None]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}{where}: not valid YAML") from None
    default_k = None
    if isinstance(data, dict):
        unknown = sorted(str(key) for key in data if key not in ("k", "cases"))
        if unknown:
            raise UsageError(f"{path}: unknown top-level key '{unknown[0]}' (keys: k, cases)")
        default_k = data.get("k")
        if default_k is not None and (
            not isinstance(default_k, int) or isinstance(default_k, bool) or default_k <= 0
        ):
            raise UsageError(f"{path}: key 'k' must be a positive integer, got {default_k!r}")
        data = data.get("cases")
    if not isinstance(data, list):
        raise UsageError(f"{path}: a YAML suite is a list of cases (or a mapping with 'cases')")
    return [
        parse_case(f"{path}: case {number}", item) for number, item in enumerate(data, start=1)
    ], default_k


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file (``.jsonl``/``.json`` or ``.yaml``/``.yml``)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: suite file not found") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot read suite: {error.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: suite is not UTF-8 text") from None
    default_k = None
    if path.suffix.lower() in (".yaml", ".yml"):
        cases, default_k = _yaml_cases(path, text)
    else:
        cases = _jsonl_cases(path, text)
    if not cases:
        raise UsageError(f"{path}: the suite has no cases")
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise UsageError(f"{path}: duplicate case id {case.id!r}")
        seen.add(case.id)
    return Suite(path=path, sha256=hashlib.sha256(raw).hexdigest(), cases=cases, k=default_k)


def write_jsonl(path: Path, cases: list[Case]) -> None:
    """Write cases as JSONL (temp file + rename, so a reader never sees half a suite)."""
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        for case in cases:
            handle.write(json.dumps(case.to_dict(), ensure_ascii=False) + "\n")
    temporary.replace(path)
