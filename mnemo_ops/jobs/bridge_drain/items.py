"""Queue items: parse a spool file (``.json`` object or array, ``.jsonl``) and validate each item.

Pure functions on bytes and Python values, no I/O, so the hourly drain, ``mnemo-ops capture`` and the
property tests share exactly one set of rules. A problem with the whole file raises `FileRejected`;
a problem with one item becomes a `RejectedItem` (with every reason found, not only the first) and the
other items of the file still go in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from datetime import datetime
from typing import Any

from mnemo_ops.settings.job_sections import BridgeDrainOptions

VERACITIES = ("stated", "inferred", "tool", "imported", "unknown")
"""Mnemosyne's veracity labels (``beam.clamp_veracity`` would silently turn any other into 'unknown')."""

MEMORY_TYPES = (
    "fact",
    "preference",
    "decision",
    "commitment",
    "goal",
    "event",
    "instruction",
    "relationship",
    "context",
    "learning",
    "observation",
    "error",
    "artifact",
    "unknown",
)
"""``mnemosyne.core.typed_memory.MemoryType`` values (3.15.1), copied so parsing never imports Mnemosyne."""

KNOWN_FIELDS = (
    "content",
    "source",
    "importance",
    "veracity",
    "session_id",
    "memory_type",
    "metadata",
    "idempotency_key",
    "created_at",
)
FORMATS = (".json", ".jsonl")

DEFAULT_SOURCE = "bridge"
DEFAULT_IMPORTANCE = 0.5  # Mnemosyne's own default for remember()
DEFAULT_VERACITY = "unknown"  # Mnemosyne's own default for remember()
# The defaults of the ``bridge_drain`` options, read from the one schema (never restated here).
_DEFAULTS = BridgeDrainOptions()
DEFAULT_SESSION = _DEFAULTS.default_session
DEFAULT_MAX_ITEM_BYTES = _DEFAULTS.max_item_bytes
DEFAULT_MAX_FILE_BYTES = _DEFAULTS.max_file_bytes
MAX_LABEL_CHARS = 200  # source, session_id, memory_type, idempotency_key

BRIDGE_METADATA_KEY = "_bridge"
"""Where the drain's provenance (idempotency key, file, position, capture time) lives in metadata_json.

Underscore-prefixed like Mnemosyne's own ``_blob`` / ``_dates`` keys; producers may not set it."""


class FileRejected(Exception):
    """The whole file is rejected (too big, not UTF-8, not parseable, wrong shape); `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Item:
    """One valid item, with defaults applied and unknown fields folded into `metadata`."""

    content: str
    source: str
    importance: float
    veracity: str
    session_id: str
    memory_type: str | None
    metadata: dict[str, Any]
    idempotency_key: str
    created_at: str | None
    position: int
    original: str = dataclasses.field(default="", compare=False, repr=False)
    """The item's text as delivered, for failed/ if Mnemosyne's write filter refuses it."""

    def row_metadata(self, file_name: str) -> dict[str, Any]:
        """The metadata stored with the row: the item's own plus the bridge provenance (with the key)."""
        provenance: dict[str, Any] = {
            "key": self.idempotency_key,
            "file": file_name,
            "position": self.position,
        }
        if self.created_at is not None:
            provenance["created_at"] = self.created_at
        return {**self.metadata, BRIDGE_METADATA_KEY: provenance}


@dataclasses.dataclass(frozen=True)
class RejectedItem:
    """One bad item: its 1-based position, every reason found, and its original text (kept verbatim)."""

    position: int
    reasons: tuple[str, ...]
    original: str

    def describe(self, file_name: str) -> str:
        """One line naming the file, the item and the reasons."""
        return f"{file_name} item {self.position}: {'; '.join(self.reasons)}"


@dataclasses.dataclass
class ParsedFile:
    """The outcome of parsing one file that was not rejected whole."""

    name: str
    items: list[Item]
    rejected: list[RejectedItem]

    @property
    def total(self) -> int:
        """Items found in the file, good and bad."""
        return len(self.items) + len(self.rejected)


def derive_key(file_name: str, position: int, content: str) -> str:
    """The idempotency key of an item that has none: a hash of file name, position and content.

    The same file delivered again (same name, same items) gives the same keys, so it is a no-op.
    """
    digest = hashlib.sha256(f"{file_name}\x00{position}\x00{content}".encode()).hexdigest()
    return f"derived:{digest[:32]}"


def _label(value: Any, field: str, reasons: list[str], required: bool = False) -> str | None:
    if value is None:
        if required:
            reasons.append(f"field '{field}' is required")
        return None
    if not isinstance(value, str):
        reasons.append(f"field '{field}' must be a string, got {type(value).__name__}")
        return None
    if not value.strip():
        reasons.append(f"field '{field}' must not be empty")
        return None
    if len(value) > MAX_LABEL_CHARS:
        reasons.append(f"field '{field}' is longer than {MAX_LABEL_CHARS} characters")
        return None
    return value


def _content(value: Any, max_item_bytes: int, reasons: list[str]) -> str | None:
    if value is None:
        reasons.append("field 'content' is required")
        return None
    if not isinstance(value, str):
        reasons.append(f"field 'content' must be a string, got {type(value).__name__}")
        return None
    if not value.strip():
        reasons.append("field 'content' must not be empty")
        return None
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape: SQLite would refuse it
        reasons.append("field 'content' is not valid Unicode (lone surrogate)")
        return None
    if size > max_item_bytes:
        reasons.append(f"field 'content' is {size} bytes, over the {max_item_bytes}-byte limit")
        return None
    return value


def _importance(value: Any, reasons: list[str]) -> float:
    if value is None:
        return DEFAULT_IMPORTANCE
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        reasons.append(
            f"field 'importance' must be a number from 0 to 1, got {type(value).__name__}"
        )
        return DEFAULT_IMPORTANCE
    if not math.isfinite(value) or not 0 <= value <= 1:
        reasons.append(f"field 'importance' must be from 0 to 1, got {value!r}")
        return DEFAULT_IMPORTANCE
    return float(value)


def _created_at(value: Any, reasons: list[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        reasons.append(f"field 'created_at' must be an ISO 8601 string, got {type(value).__name__}")
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        reasons.append(f"field 'created_at' is not an ISO 8601 date-time: {value[:60]!r}")
        return None
    return value


def _metadata(data: dict[str, Any], reasons: list[str]) -> dict[str, Any]:
    metadata = data.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        reasons.append(f"field 'metadata' must be an object, got {type(metadata).__name__}")
        metadata = {}
    metadata = dict(metadata)
    # Unknown fields are kept, in metadata; a clash would silently drop one of the two values.
    for field, value in data.items():
        if field in KNOWN_FIELDS:
            continue
        if field in metadata:
            reasons.append(f"field '{field}' is given both at the top level and in 'metadata'")
        else:
            metadata[field] = value
    if BRIDGE_METADATA_KEY in metadata:
        reasons.append(f"metadata key '{BRIDGE_METADATA_KEY}' is reserved for the bridge")
    return metadata


def validate_item(
    data: Any,
    file_name: str,
    position: int,
    original: str,
    max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES,
    default_session: str = DEFAULT_SESSION,
) -> Item | RejectedItem:
    """Validate one decoded item; return an `Item`, or a `RejectedItem` listing every problem."""
    if not isinstance(data, dict):
        kind = "an array" if isinstance(data, list) else type(data).__name__
        return RejectedItem(position, (f"an item must be a JSON object, got {kind}",), original)
    reasons: list[str] = []
    content = _content(data.get("content"), max_item_bytes, reasons)
    source = _label(data.get("source"), "source", reasons) or DEFAULT_SOURCE
    importance = _importance(data.get("importance"), reasons)
    veracity = data.get("veracity", DEFAULT_VERACITY)
    if veracity not in VERACITIES:
        reasons.append(f"field 'veracity' must be one of {', '.join(VERACITIES)}, got {veracity!r}")
    session_id = _label(data.get("session_id"), "session_id", reasons) or default_session
    memory_type = _label(data.get("memory_type"), "memory_type", reasons)
    if memory_type is not None and memory_type not in MEMORY_TYPES:
        reasons.append(
            f"field 'memory_type' must be one of {', '.join(MEMORY_TYPES)}, got {memory_type!r}"
        )
    given_key = _label(data.get("idempotency_key"), "idempotency_key", reasons)
    created_at = _created_at(data.get("created_at"), reasons)
    metadata = _metadata(data, reasons)
    if reasons or content is None:
        return RejectedItem(position, tuple(reasons), original)
    return Item(
        content=content,
        source=source,
        importance=importance,
        veracity=veracity,
        session_id=session_id,
        memory_type=memory_type,
        metadata=metadata,
        idempotency_key=given_key or derive_key(file_name, position, content),
        created_at=created_at,
        position=position,
        original=original,
    )


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileRejected(f"not UTF-8 (invalid byte at offset {error.start})") from None
    return text[1:] if text.startswith("\ufeff") else text  # a byte-order mark is not content


def _json_error(error: json.JSONDecodeError) -> str:
    return f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them unless told otherwise.
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def parse_file(
    name: str,
    data: bytes,
    max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    default_session: str = DEFAULT_SESSION,
) -> ParsedFile:
    """Parse and validate one spool file; raise `FileRejected` when the whole file must be rejected.

    ``.json``: one item object or an array of them (positions 1..n). ``.jsonl``: one item per non-blank
    line (position = line number); a line that is not JSON rejects that line only.
    """
    if len(data) > max_file_bytes:
        raise FileRejected(f"file is {len(data)} bytes, over the {max_file_bytes}-byte limit")
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix not in FORMATS:
        raise FileRejected(f"unknown format {suffix or '(no suffix)'!r}: expected .json or .jsonl")
    text = _decode(data)
    parsed = ParsedFile(name=name, items=[], rejected=[])

    def add(value: Any, position: int, original: str) -> None:
        outcome = validate_item(value, name, position, original, max_item_bytes, default_session)
        (parsed.items if isinstance(outcome, Item) else parsed.rejected).append(outcome)

    if suffix == ".json":
        try:
            document = _loads(text)
        except json.JSONDecodeError as error:
            raise FileRejected(_json_error(error)) from None
        except (ValueError, RecursionError) as error:
            raise FileRejected(f"not valid JSON: {error}") from None
        if isinstance(document, dict):
            add(document, 1, json.dumps(document, ensure_ascii=False))
        elif isinstance(document, list):
            for index, value in enumerate(document, start=1):
                add(value, index, json.dumps(value, ensure_ascii=False))
        else:
            raise FileRejected(
                f"a .json file must hold an item object or an array, got {type(document).__name__}"
            )
        return parsed
    # Split on "\n" only: str.splitlines would also split inside JSON strings holding U+2028 and friends.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            value = _loads(line)
        except json.JSONDecodeError as error:
            parsed.rejected.append(RejectedItem(number, (_json_error(error),), line))
            continue
        except (ValueError, RecursionError) as error:
            parsed.rejected.append(RejectedItem(number, (f"not valid JSON: {error}",), line))
            continue
        add(value, number, line)
    return parsed
