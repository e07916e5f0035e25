"""The secrets Hermes stores: values from ``$HERMES_HOME/auth.json`` and ``$HERMES_HOME/.env``.

A key pasted into a conversation ("here is my key: ...") may have no recognisable shape; knowing the
stored values finds it anyway. The files are read the way the auth audit reads them: never through a
symlink, errors ignored (the audit reports them), and no value ever leaves this module except to be
matched.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mnemo_ops.models.redaction.patterns import MIN_SECRET_CHARS, is_secret_key_name, parse_env

MAX_FILE_BYTES = 1 << 20


def read_private_text(path: Path) -> str | None:
    """The UTF-8 text of `path`, or None when it is missing, a symlink, too big or unreadable."""
    try:
        with open(
            path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW)
        ) as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_FILE_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _json_values(data: Any, secret_branch: bool = False) -> Iterator[str]:
    """String leaves under a secret-looking key (or inside a branch named like one)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _json_values(value, secret_branch or is_secret_key_name(str(key)))
    elif isinstance(data, list):
        for item in data:
            yield from _json_values(item, secret_branch)
    elif isinstance(data, str) and secret_branch:
        yield data


def known_secret_values(hermes_home: Path) -> set[str]:
    """Secret values stored in Hermes' auth files (at least `MIN_SECRET_CHARS` long each)."""
    values: set[str] = set()
    auth_json = read_private_text(Path(hermes_home) / "auth.json")
    if auth_json is not None:
        try:
            values.update(_json_values(json.loads(auth_json)))
        except ValueError:
            pass
    dotenv = read_private_text(Path(hermes_home) / ".env")
    if dotenv is not None:
        parsed, _ = parse_env(dotenv)
        values.update(value for key, value in parsed.items() if is_secret_key_name(key))
    return {value.strip() for value in values if len(value.strip()) >= MIN_SECRET_CHARS}
