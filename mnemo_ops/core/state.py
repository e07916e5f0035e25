"""Our own state database (``<state_dir>/state.db``): the run ledger and every job's state.

It stays in the default rollback-journal mode (not WAL) so a read-only open, as in a dry run, creates
no -wal/-shm files in the state dir.

sqlite-utils serves this file (it is ours, not Mnemosyne's). The shared tables (the run ledger) come
from numbered migrations tracked with ``PRAGMA user_version``. A job that needs tables of its own
declares them as a `StateTable` and creates them idempotently (`StateTable.ensure`) when it first
writes them, so the order in which job modules are imported never matters.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlite_utils

from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.clock import isoformat


@dataclasses.dataclass(frozen=True)
class StateTable:
    """One table of state.db, declared where it is used and created idempotently on first use.

    `columns` maps each column to its Python type as sqlite-utils takes it (``str`` -> TEXT, ``int``
    -> INTEGER, ``float`` -> FLOAT); `indexes` are the column tuples to index, named as sqlite-utils
    names them (``idx_<table>_<columns>``), so a table created before this declaration is the same.
    """

    name: str
    columns: Mapping[str, type]
    pk: str | tuple[str, ...]
    indexes: tuple[tuple[str, ...], ...] = ()

    def ensure(self, db: sqlite_utils.Database) -> None:
        """Create the table and its indexes when missing (idempotent; never call it in a dry run)."""
        table = db[self.name]
        table.create(dict(self.columns), pk=self.pk, if_not_exists=True)
        for columns in self.indexes:
            table.create_index(list(columns), if_not_exists=True)


RUNS = StateTable(
    "runs",
    {
        "id": int,
        "job": str,
        "status": str,
        "dry_run": int,
        "started_at": str,
        "finished_at": str,
        "duration_s": float,
        "exit_code": int,
        "db": str,
        "error": str,
        "warnings": int,
        "worst_severity": str,
        "result_json": str,
    },
    pk="id",
    indexes=(("job", "started_at"),),
)
"""The run ledger: one row per run (ok, failed, skipped or interrupted; never a dry run)."""


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [RUNS.ensure]
"""Append-only: migration N (1-based) brings user_version from N-1 to N."""


def open_state(state_db_path: Path, create: bool = True) -> sqlite_utils.Database | None:
    """Open (and migrate) state.db; with create=False return None when it does not exist yet."""
    if not state_db_path.exists():
        if not create:
            return None
        state_db_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    db = sqlite_utils.Database(state_db_path)
    db.execute("PRAGMA busy_timeout = 5000")
    if create:
        os.chmod(state_db_path, 0o600)
        migrate(db)
    return db


def open_state_readonly(state_db_path: Path) -> sqlite_utils.Database | None:
    """Open state.db read-only (dry runs, status); None when it does not exist."""
    if not state_db_path.exists():
        return None
    import sqlite3

    connection = sqlite3.connect(f"file:{state_db_path}?mode=ro", uri=True)
    connection.execute("PRAGMA busy_timeout = 5000")
    return sqlite_utils.Database(connection)


def migrate(db: sqlite_utils.Database) -> int:
    """Apply pending migrations; return the resulting schema version."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    for number, migration in enumerate(MIGRATIONS, start=1):
        if number > version:
            with db.conn:
                migration(db)
                db.execute(f"PRAGMA user_version = {number}")
            version = number
    return version


def record_run(db: sqlite_utils.Database, result: JobResult) -> int:
    """Append one ledger row for a finished run; return its id."""
    data = result.to_dict()
    with db.conn:
        table = db["runs"]
        table.insert(
            {
                "job": result.job,
                "status": result.status,
                "dry_run": int(result.dry_run),
                "started_at": data["started_at"],
                "finished_at": data["finished_at"],
                "duration_s": result.duration_s,
                "exit_code": result.exit_code,
                "db": result.db,
                "error": result.error,
                "warnings": len(result.warnings),
                "worst_severity": result.worst_severity,
                "result_json": json.dumps(data, sort_keys=True),
            }
        )
        return table.last_pk


def last_runs(db: sqlite_utils.Database | None) -> dict[str, dict[str, Any]]:
    """The latest ledger row per job (any status), plus the latest successful finish time."""
    if db is None or "runs" not in db.table_names():
        return {}
    latest: dict[str, dict[str, Any]] = {}
    for row in db.query(
        "SELECT job, status, started_at, finished_at, duration_s, exit_code, error FROM runs "
        "WHERE id IN (SELECT max(id) FROM runs GROUP BY job)"
    ):
        latest[row["job"]] = dict(row)
    for row in db.query(
        "SELECT job, max(finished_at) AS last_success FROM runs WHERE status = 'ok' GROUP BY job"
    ):
        latest.setdefault(row["job"], {})["last_success"] = row["last_success"]
    return latest


def runs_since(db: sqlite_utils.Database | None, since: datetime) -> list[dict[str, Any]]:
    """Ledger rows started at or after `since`, oldest first."""
    if db is None or "runs" not in db.table_names():
        return []
    return [
        dict(row)
        for row in db.query(
            "SELECT * FROM runs WHERE started_at >= ? ORDER BY id", [isoformat(since)]
        )
    ]


def checkpoint_uses(db: sqlite_utils.Database | None) -> list[dict[str, Any]]:
    """The real runs that started from a checkpoint (their own pre-write one, or one they reused):
    job, status, started_at and the checkpoint's name, oldest first. Retention keeps rollback
    points from these."""
    if db is None or "runs" not in db.table_names():
        return []
    return [
        dict(row)
        for row in db.query(
            "SELECT job, status, started_at, checkpoint FROM ("
            "SELECT id, job, status, started_at, json_extract(result_json, '$.checkpoint') AS "
            "checkpoint FROM runs WHERE dry_run = 0 AND json_valid(result_json)) "
            "WHERE typeof(checkpoint) = 'text' ORDER BY id"
        )
    ]
