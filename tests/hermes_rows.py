"""Rows of the tests' Hermes conversation home (``tests/conftest.py`` ``hermes_home``) that the
guard's and the deploy gate's place tests change: a statement no suite case names, and the SQL a
test's own change makes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mnemo_ops.evaluation.suite import load_suite


def execute_sql(db_path: Path, statement: str, arguments: tuple = ()) -> int:
    """Run one parameterised statement on `db_path` in its own transaction; the rows it changed."""
    connection = sqlite3.connect(db_path)
    try:
        with connection:
            return connection.execute(statement, arguments).rowcount
    finally:
        connection.close()


def unused_user_rows(home, count: int) -> list[tuple[str, str]]:
    """(id, text) of [USER] rows no suite case names, longest first (a query of many words)."""
    named = {
        memory_id
        for case in load_suite(home.state_dir / "eval" / "suite.jsonl").cases
        for memory_id in case.relevant
    }
    connection = sqlite3.connect(home.db_path)
    try:
        rows = connection.execute(
            "SELECT id, content FROM working_memory WHERE content LIKE '[USER]%' "
            "AND scope = 'session' ORDER BY length(content) DESC, id"
        ).fetchall()
    finally:
        connection.close()
    return [
        (memory_id, text[len("[USER] ") :]) for memory_id, text in rows if memory_id not in named
    ][:count]
