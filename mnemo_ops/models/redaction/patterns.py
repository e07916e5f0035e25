"""What a secret looks like: the patterns shared by the auth-file audit and the model layer.

Each token pattern is named; a redaction says only that name (``[REDACTED:openai-key]``), so the
output shows that something was removed and why, never what.
"""

from __future__ import annotations

import re

ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")
"""A dotenv line: ``KEY=value`` (optionally ``export KEY=value``)."""

SECRET_KEY_NAME = re.compile(
    r"(api[_-]?key|apikey|secret|token|passw(or)?d|passwd|pwd|credential|private[_-]?key|"
    r"client[_-]?secret|auth|cookie|session[_-]?key|bearer|access[_-]?key)",
    re.IGNORECASE,
)
"""A field or variable name whose value is a secret (``OPENAI_API_KEY``, ``access_token``...)."""

MIN_SECRET_CHARS = 8
"""Values shorter than this are never treated as secrets by themselves (``true``, ``gpt-4``...)."""

TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"
        ),
    ),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{16,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("slack-token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("telegram-bot-token", re.compile(r"\b\d{8,10}:[A-Za-z0-9_-]{35}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer-token", re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9._~+/-]{16,}=*")),
    ("url-password", re.compile(r"(?<=://)[^\s:/@]+:[^\s@/]+(?=@)")),
)
"""Token shapes, most specific first (a private key block before the keys it may contain)."""

ASSIGNMENT = re.compile(
    r"""(?P<key>["']?[A-Za-z0-9_.-]*"""
    + r"(?:api[_-]?key|apikey|secret|token|passw(?:or)?d|passwd|pwd|credential|client[_-]?secret)"
    + r"""[A-Za-z0-9_.-]*["']?)(?P<separator>\s*[=:]\s*)(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;}'"]+)""",
    re.IGNORECASE,
)
"""``NAME=value``, ``name: value`` and ``"name": "value"`` where the name says the value is secret."""


def parse_env(text: str) -> tuple[dict[str, str], list[int]]:
    """(KEY -> value, numbers of lines that are not KEY=VALUE) of a dotenv file."""
    values: dict[str, str] = {}
    bad_lines: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = ENV_LINE.match(line)
        if not match:
            bad_lines.append(number)
            continue
        raw = match.group(2).strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]
        values[match.group(1)] = raw
    return values, bad_lines


def is_secret_key_name(name: str) -> bool:
    """True when a field or variable called `name` holds a secret."""
    return bool(SECRET_KEY_NAME.search(str(name)))
