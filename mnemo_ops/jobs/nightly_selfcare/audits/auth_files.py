"""Auth file health: ``auth.json`` and ``.env`` under ``$HERMES_HOME``.

Checked: present, parseable, a regular file (not a symlink), mode not wider than 0600, and expiry
fields that are past or due soon. The files hold API keys and OAuth tokens, so a finding names only the
file, a line number or a key's name, and a date: never a value read from the file. Hermes refreshes an
OAuth access token by itself when a ``refresh_token`` sits beside it, so such an expired token is
reported as info only. What a secret looks like (dotenv lines, secret key names, token shapes) lives
in ``mnemo_ops.models.redaction``, shared with the model layer, which redacts the same secrets from every
text before it goes to a model.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo_ops.jobs.nightly_selfcare.audits.outcome import AuditOutcome
from mnemo_ops.models.redaction.patterns import parse_env
from mnemo_ops.settings import Settings

CODE_PREFIXES = ("auth-",)
HANDLES_SECRETS = True
"""Tells `run_audit` never to quote an unexpected exception of this audit (it could hold a value)."""
REAUTHENTICATE_FIX = "hermes model"
_EXPIRY_KEY = re.compile(
    r"(^|[_.-])(expires_at|expires_on|expires|expiry|expiration|exp)$", re.IGNORECASE
)
_SAFE_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")


def parse_moment(value: Any) -> datetime | None:
    """An expiry value as an aware UTC datetime: ISO 8601 text or epoch seconds (or milliseconds)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip().strip("'\"")
        if re.fullmatch(r"\d{9,13}", text):
            return parse_moment(int(text))
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None


def _key_label(key: Any) -> str:
    """A key's name for a message, or '?' when it does not look like a field name (never a value)."""
    text = str(key)
    return text if _SAFE_KEY.match(text) else "?"


def json_expiry_fields(data: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """(dotted key path, value, refreshable) for each expiry-like field of a JSON document."""
    if isinstance(data, dict):
        refreshable = any(
            str(key).lower() == "refresh_token" and value for key, value in data.items()
        )
        for key, value in data.items():
            dotted = f"{path}.{_key_label(key)}" if path else _key_label(key)
            if isinstance(value, (dict, list)):
                yield from json_expiry_fields(value, dotted)
            elif _EXPIRY_KEY.search(str(key)):
                yield dotted, value, refreshable
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from json_expiry_fields(item, f"{path}[{index}]")


def _check_file(outcome: AuditOutcome, path: Path) -> bool:
    """Presence, type and mode; True when the file can be read."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        outcome.warn("auth-file-missing", "info", f"{path} does not exist")
        return False
    if stat.S_ISLNK(info.st_mode):
        outcome.warn(
            "auth-file-symlink",
            "warning",
            f"{path} is a symlink; it was not followed",
            fix=f"ls -l {path}",
        )
        return False
    if not stat.S_ISREG(info.st_mode):
        outcome.warn(
            "auth-file-unreadable", "error", f"{path} is not a regular file", fix=f"ls -l {path}"
        )
        return False
    mode = stat.S_IMODE(info.st_mode)
    outcome.stats[path.name] = {"mode": f"{mode:04o}", "size": info.st_size}
    if mode & 0o077:
        outcome.warn(
            "auth-file-permissions",
            "error",
            f"{path} has mode {mode:04o}, wider than 0600: other users can read its secrets",
            fix=f"chmod 600 {path}",
        )
    return True


def _read_text(outcome: AuditOutcome, path: Path) -> str | None:
    try:
        with open(
            path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW)
        ) as handle:
            return handle.read().decode("utf-8")
    except UnicodeDecodeError:
        outcome.warn(
            "auth-file-unparseable", "error", f"{path} is not UTF-8 text", fix=f"$EDITOR {path}"
        )
    except OSError as error:
        outcome.warn(
            "auth-file-unreadable",
            "error",
            f"cannot read {path}: {error.strerror}",
            fix=f"ls -l {path}",
        )
    return None


def _check_expiry(
    outcome: AuditOutcome, where: str, value: Any, refreshable: bool, now: datetime, warn_days: int
) -> None:
    moment = parse_moment(value)
    if moment is None:
        return
    when = moment.astimezone(UTC).isoformat(timespec="minutes")
    if moment <= now:
        if refreshable:
            outcome.warn(
                "auth-token-refresh-due",
                "info",
                f"{where} expired at {when}; Hermes refreshes it with the stored refresh token",
            )
        else:
            outcome.warn(
                "auth-expired", "error", f"{where} expired at {when}", fix=REAUTHENTICATE_FIX
            )
    elif moment <= now + timedelta(days=warn_days) and not refreshable:
        days = (moment - now).total_seconds() / 86400
        outcome.warn(
            "auth-expiring-soon",
            "warning",
            f"{where} expires at {when} (in {days:.1f} days)",
            fix=REAUTHENTICATE_FIX,
        )


def audit(settings: Settings, now: datetime) -> AuditOutcome:
    """Check auth.json and .env in HERMES_HOME without ever reporting a value from them."""
    outcome = AuditOutcome("auth_files")
    warn_days = settings.nightly_selfcare.auth_expiry_warn_days
    auth_json = settings.hermes_home / "auth.json"
    if _check_file(outcome, auth_json) and (text := _read_text(outcome, auth_json)) is not None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            # error.msg is one of json's fixed phrases; the document itself is never quoted.
            outcome.warn(
                "auth-file-unparseable",
                "error",
                f"{auth_json}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno})",
                fix=REAUTHENTICATE_FIX,
            )
        else:
            fields = list(json_expiry_fields(data))
            outcome.stats["auth.json"]["expiry_fields"] = len(fields)
            for where, value, refreshable in fields:
                _check_expiry(outcome, f"auth.json {where}", value, refreshable, now, warn_days)
    dotenv = settings.hermes_home / ".env"
    if _check_file(outcome, dotenv) and (text := _read_text(outcome, dotenv)) is not None:
        values, bad_lines = parse_env(text)
        outcome.stats[".env"]["keys"] = len(values)
        if bad_lines:
            shown = ", ".join(str(number) for number in bad_lines[:10])
            outcome.warn(
                "auth-file-unparseable",
                "warning",
                f"{dotenv}: {len(bad_lines)} line(s) are not KEY=VALUE (line {shown})",
                fix=f"$EDITOR {dotenv}",
            )
        for key, value in sorted(values.items()):
            if _EXPIRY_KEY.search(key) or "EXPIR" in key.upper():
                _check_expiry(outcome, f".env {key}", value, False, now, warn_days)
    return outcome
