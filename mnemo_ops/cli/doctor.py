"""``mnemo-ops doctor``: is the configuration valid, is the DB a compatible Mnemosyne DB, what is missing."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
from typing import Any

import typer

from mnemo_ops import database
from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.cli.common import table as results_table
from mnemo_ops.core.manifests import load_manifests
from mnemo_ops.foundation.errors import ConfigError, DatabaseError
from mnemo_ops.foundation.exit_codes import OK, USAGE
from mnemo_ops.jobs import implemented_jobs
from mnemo_ops.mnemosyne import versions

REQUIRED_WORKING_COLUMNS = (
    "id",
    "content",
    "source",
    "timestamp",
    "session_id",
    "importance",
    "metadata_json",
    "veracity",
    "memory_type",
    "consolidated_at",
    "consolidation_claimed_at",
    "recall_count",
    "pinned",
    "valid_until",
    "superseded_by",
)
EXPECTED_TABLES = ("canonical_facts", "graph_edges", "triples", "fts_episodes")


def _check(name: str, status: str, detail: str) -> dict[str, str]:
    return {"check": name, "status": status, "detail": detail}


def _database_checks(settings) -> list[dict[str, str]]:
    checks = []
    try:
        connection = database.open_memory_db(settings.db_path, readonly=True)
    except DatabaseError as error:
        return [_check("database", "error", error.message)]
    try:
        checks.append(_check("database", "ok", str(settings.db_path)))
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
        checks.append(
            _check(
                "journal_mode",
                "ok" if mode == "wal" else "warning",
                mode if mode == "wal" else f"{mode} (Mnemosyne uses WAL)",
            )
        )
        columns = set(database.column_names(connection, "working_memory"))
        missing = [c for c in REQUIRED_WORKING_COLUMNS if c not in columns]
        checks.append(
            _check(
                "working_memory columns",
                "error" if missing else "ok",
                f"missing: {', '.join(missing)}" if missing else f"{len(columns)} columns",
            )
        )
        tables = database.table_names(connection)
        absent = [t for t in EXPECTED_TABLES if t not in tables]
        checks.append(
            _check(
                "tables",
                "warning" if absent else "ok",
                f"not created yet: {', '.join(absent)}"
                if absent
                else "all expected tables present",
            )
        )
        checks.append(_compatibility_check(connection))
        vector_tables = sorted(t for t in tables if t.startswith("vec_"))
        checks.append(
            _check(
                "vectors",
                "ok" if vector_tables else "info",
                ", ".join(vector_tables)
                if vector_tables
                else "no sqlite-vec tables (FTS5 recall only)",
            )
        )
    finally:
        connection.close()
    return checks


def _compatibility_check(connection) -> dict[str, str]:
    """Can the installed Mnemosyne open this database? (the check every Mnemosyne job runs first)

    A database written by a newer Mnemosyne is an error (exit 2: jobs refuse it); one that the
    installed Mnemosyne would upgrade is a warning (only jobs writing through Mnemosyne refuse it).
    """
    found = versions.database_line(connection)
    version = versions.installed_version()
    for usage, status in ((versions.OPENS_SNAPSHOT, "error"), (versions.OPENS_DATABASE, "warning")):
        verdict = versions.judge(found, version, usage)
        if verdict.problem:
            return _check("mnemosyne compatibility", status, verdict.problem)
    return _check(
        "mnemosyne compatibility",
        "ok",
        f"written by {found.describe()}; mnemosyne-memory {version} opens it safely",
    )


def _version_check() -> dict[str, str]:
    version = versions.installed_version()
    if version is None:
        return _check("mnemosyne-memory", "error", "not installed")
    line = versions.known_line(version)
    if line is None:
        return _check(
            "mnemosyne-memory",
            "warning",
            f"{version} (not a line mnemo-ops is tested with; tested: {versions.tested_versions()})",
        )
    tested = "tested" if version == line.tested else f"line tested with {line.tested}"
    return _check("mnemosyne-memory", "ok", f"{version} (line {line.name}, {tested})")


BLOCKING_CHECKS = ("config", "database", "working_memory columns", "mnemosyne compatibility")
"""Checks whose error makes the database unusable for mnemo-ops (exit 2)."""


def collect_doctor(state) -> tuple[list[dict[str, str]], int]:
    """Run every check; return them and the exit code (2 when config or database is unusable)."""
    checks: list[dict[str, Any]] = []
    try:
        settings = state.settings
    except ConfigError as error:
        return [_check("config", "error", error.message)], USAGE
    checks.append(
        _check(
            "config",
            "ok",
            str(settings.config_file) if settings.config_file else "no config file (defaults)",
        )
    )
    try:
        manifests = load_manifests()
        checks.append(
            _check(
                "job manifests",
                "ok",
                f"{len(manifests)} jobs; implemented: {', '.join(implemented_jobs()) or 'none'}",
            )
        )
    except ConfigError as error:
        checks.append(_check("job manifests", "error", error.message))
    checks.append(_version_check())
    python_sqlite = sqlite3.sqlite_version
    checks.append(
        _check(
            "sqlite (agent side)",
            "ok" if tuple(map(int, python_sqlite.split("."))) >= (3, 37, 0) else "error",
            f"Python sqlite3 {python_sqlite}; apsw {database.sqlite_version()}",
        )
    )
    checks.extend(_database_checks(settings))
    state_dir = settings.state_dir
    if state_dir.exists():
        writable = os.access(state_dir, os.W_OK)
        checks.append(
            _check(
                "state dir",
                "ok" if writable else "error",
                f"{state_dir}{'' if writable else ' is not writable'}",
            )
        )
    else:
        checks.append(_check("state dir", "info", f"{state_dir} (created by the first job run)"))
    for module, purpose in (
        ("sqlite_vec", "vector recall"),
        ("llm", "model-backed summaries (extra 'llm')"),
    ):
        present = importlib.util.find_spec(module) is not None
        checks.append(
            _check(
                module,
                "ok" if present else "info",
                "installed" if present else f"optional, for {purpose}",
            )
        )
        if module == "sqlite_vec" and present and not _loads_extensions():
            # Mnemosyne warns about this on every start; the commands say it only with -v.
            checks[-1] = _check(
                module,
                "info",
                "installed, but this Python's sqlite3 cannot load extensions: Mnemosyne's "
                "vector search is off here (FTS5 recall only)",
            )
    code = (
        USAGE
        if any(c["status"] == "error" and c["check"] in BLOCKING_CHECKS for c in checks)
        else OK
    )
    return checks, code


@handle_errors
def doctor_command() -> None:
    """Run every check and show them; exit 2 when the config or the database is unusable."""
    checks, code = collect_doctor(invocation_state())

    def text(console) -> None:
        table = results_table(title="mnemo-ops doctor")
        for column in ("check", "status", "detail"):
            table.add_column(column)
        styles = {"ok": "green", "info": "dim", "warning": "yellow", "error": "bold red"}
        for check in checks:
            table.add_row(
                check["check"],
                f"[{styles.get(check['status'], 'white')}]{check['status']}[/]",
                check["detail"],
            )
        console.print(table)

    emit({"checks": checks, "ok": code == OK}, text)
    if code != OK:
        blocking = next(
            c for c in checks if c["status"] == "error" and c["check"] in BLOCKING_CHECKS
        )
        invocation_state().err_console.print(
            f"mnemo-ops: error: {blocking['check']}: {blocking['detail']}",
            markup=False,
            soft_wrap=True,
            highlight=False,
        )
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add the ``doctor`` command."""
    app.command(
        "doctor",
        help="Check config, database schema compatibility, versions and what is missing. Exit 2 when "
        "the config or the database is unusable (one line on stderr says why, e.g. the database was "
        "written by a newer Mnemosyne: which version to install).\n\n"
        "Example: mnemo-ops doctor",
    )(doctor_command)


def _loads_extensions() -> bool:
    """Whether this Python's sqlite3 (the one Mnemosyne uses) can load an extension like sqlite-vec."""
    connection = sqlite3.connect(":memory:")
    try:
        return hasattr(connection, "enable_load_extension")
    finally:
        connection.close()
