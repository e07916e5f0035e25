"""Which sessions the verification recalls in: the ones the Hermes plugin will recall in."""

from __future__ import annotations

import sqlite3

from mnemo_ops.jobs.memory_block_migrate.store import SESSION_PREFIX
from mnemo_ops.jobs.memory_block_migrate.verify import (
    NEW_SESSION,
    agent_session,
    sessions_to_verify,
)


def _add_row(connection: sqlite3.Connection, memory_id: str, session: str, timestamp: str) -> None:
    connection.execute(
        "INSERT INTO working_memory (id, content, source, timestamp, session_id) "
        "VALUES (?, ?, 'conversation', ?, ?)",
        (memory_id, f"a row of {session}", timestamp, session),
    )


def test_the_plugins_newest_session_is_preferred_and_ours_never_count(sample):
    connection = sqlite3.connect(sample.db_path, isolation_level=None)
    try:
        newest_agent = agent_session(connection, SESSION_PREFIX)
        assert newest_agent == "hermes_today-2026-11-30"  # the sample's newest plugin session
        # Rows of our own sessions, and newer rows of other writers (an import, a capture), never
        # count: the plugin's newest ``hermes_<key>`` is the conversation that goes on.
        _add_row(connection, "f" * 16, f"{SESSION_PREFIX}20261201T000000Z", "2099-01-01T00:00:00")
        _add_row(connection, "e" * 16, NEW_SESSION, "2099-01-01T00:00:00")
        _add_row(connection, "b" * 16, "import-2099", "2099-01-01T00:00:00")
        assert agent_session(connection, SESSION_PREFIX) == newest_agent
        _add_row(connection, "d" * 16, "hermes_telegram-42", "2100-01-01T09:00:00")
        _add_row(connection, "c" * 16, "hermes_cli-20261020", "2026-10-20T09:00:00")
        assert agent_session(connection, SESSION_PREFIX) == "hermes_telegram-42"
    finally:
        connection.close()
    assert sessions_to_verify("hermes_telegram-42") == ["hermes_telegram-42", NEW_SESSION]
    assert sessions_to_verify(None) == [NEW_SESSION]
    assert NEW_SESSION.startswith("hermes_")
