"""What a task may show a model: evidence items, and which of them are private.

Mnemosyne (3.15) marks who may see a memory with its ``scope``: ``global`` memories are shared with
every session, ``session`` memories stay inside the session they were said in (the default of
``Mnemosyne.remember``). Sending a memory to a model on another machine shows it far more widely than
another session would, so a memory is **private** unless it is ``global``; any other scope (``session``,
``private``, a custom one) and a metadata flag (``private``, ``sensitive`` true, or ``visibility``
``private``) make it private. ``trust_tier`` (STATED, DERIVED, EXTERNAL_WRITE, IMPORTED) says where a
memory came from, not who may see it, so it plays no part. Messages of Hermes' session store belong to
their session and count as session-scoped.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

SHARED_SCOPES = ("global",)
PRIVATE_FLAGS = ("private", "sensitive")


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One item a prompt may hold: a reference the model cites back, its text, and privacy."""

    ref: str
    text: str
    private: bool = True
    session_id: str | None = None


def _metadata(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value:
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def is_private_row(scope: str | None, metadata: Any = None) -> bool:
    """True when a memory with this ``scope`` and ``metadata_json`` (text or dict) is private."""
    flags = _metadata(metadata)
    if any(flags.get(flag) is True for flag in PRIVATE_FLAGS):
        return True
    if str(flags.get("visibility", "")).lower() == "private":
        return True
    return (scope or "global") not in SHARED_SCOPES
