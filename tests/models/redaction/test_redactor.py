"""Redaction: the secret patterns shared by the auth audit and the model layer."""

from __future__ import annotations

import json

import pytest

from mnemo_ops.models.redaction import Redactor, known_secret_values, redactor_for
from mnemo_ops.models.redaction.patterns import is_secret_key_name, parse_env

STORED = "plain-words-but-stored-0123"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("my key is sk-proj-abcdefghijklmnop1234 now", "sk-proj-abcdefghijklmnop1234"),
        ("anthropic sk-ant-api03-abcdefghijklmnopqrstu", "sk-ant-api03-abcdefghijklmnopqrstu"),
        ("push with ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123"),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
        ("aws AKIAABCDEFGHIJKLMNOP done", "AKIAABCDEFGHIJKLMNOP"),
        ("Authorization: Bearer abcdefghijklmnop1234567", "abcdefghijklmnop1234567"),
        ("postgres://dana:s3cretpass@db.local/photos", "s3cretpass"),
        ("OPENAI_API_KEY=short-but-secret", "short-but-secret"),
        ('{"access_token": "abcd1234xyz"}', "abcd1234xyz"),
        ("password: hunter2", "hunter2"),
        ("jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0NTY3.SflKxwRJSMeKKF2QT4f", "SflKxwRJSMeKKF2QT4f"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAB3NzaC1yc2E\n-----END OPENSSH PRIVATE KEY-----",
            "AAAAB3NzaC1yc2E",
        ),
        (f"the value {STORED} was pasted", STORED),
    ],
)
def test_secrets_are_replaced_and_counted(text, secret):
    redacted = Redactor([STORED]).redact(text)
    assert secret not in redacted.text
    assert "[REDACTED:" in redacted.text
    assert redacted.count >= 1
    assert secret not in repr(redacted)


def test_ordinary_text_is_left_alone():
    for text in (
        "Dana prefers window seats on long flights",
        "The token expired yesterday, so we logged in again",
        "PostgreSQL 15 lives in /var/lib/postgresql/15/main",
    ):
        assert Redactor().redact(text).text == text


def test_known_values_come_from_hermes_auth_files(tmp_path):
    (tmp_path / "auth.json").write_text(
        json.dumps(
            {
                "providers": {"nous": {"access_token": "tok-from-auth-json-1", "expires_at": 1}},
                "active_provider": "nous",
            }
        )
    )
    (tmp_path / ".env").write_text("OPENROUTER_API_KEY=env-secret-value-22\nLOG_LEVEL=debug\n")
    values = known_secret_values(tmp_path)
    assert {"tok-from-auth-json-1", "env-secret-value-22"} <= values
    assert "debug" not in values and "nous" not in values
    text = "pasted tok-from-auth-json-1 and env-secret-value-22 into chat"
    redacted = redactor_for(tmp_path).redact(text).text
    assert "tok-from-auth-json-1" not in redacted and "env-secret-value-22" not in redacted


def test_auth_files_behind_a_symlink_are_not_read(tmp_path):
    real = tmp_path / "elsewhere.env"
    real.write_text("API_KEY=never-read-through-link\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").symlink_to(real)
    assert known_secret_values(home) == set()


def test_the_audit_uses_the_shared_dotenv_parser():
    from mnemo_ops.jobs.nightly_selfcare.audits import auth_files

    assert auth_files.parse_env is parse_env
    assert parse_env("export A_TOKEN='x y'\nbroken line\n") == ({"A_TOKEN": "x y"}, [2])
    assert is_secret_key_name("OPENAI_API_KEY") and not is_secret_key_name("LOG_LEVEL")
