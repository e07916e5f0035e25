"""Parent side of episodic consolidation: what Mnemosyne's sleep would take, and running it contained.

Mnemosyne's sleep is its own operation, so we call it rather than re-implement it, but in a child
process whose environment we set: importing Mnemosyne initialises a database at its default path and
``Mnemosyne(...)`` seeds a ``config.yaml`` into ``MNEMOSYNE_DATA_DIR`` (docs/mnemosyne.md). A real run
points that environment at the database's own folder; a dry run copies the database into a temporary
folder (one read snapshot through the backup API), points HOME, HERMES_HOME and MNEMOSYNE_DATA_DIR at
that folder, runs Mnemosyne's own dry run there, and removes the folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops.database import snapshot
from mnemo_ops.foundation.child_process import ChildProcessFailed, run_child
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.mnemosyne import versions
from mnemo_ops.mnemosyne.api import mnemosyne_environment

MODELS = ("auto", "aaak")
"""``auto``: Mnemosyne's model chain when one is configured, else AAAK; ``aaak``: always AAAK."""


def working_memory_ttl_hours(environ: dict[str, str] | None = None) -> int:
    """Mnemosyne's WORKING_MEMORY_TTL_HOURS (``MNEMOSYNE_WM_TTL_HOURS``, default 168), read as it reads it."""
    env = os.environ if environ is None else environ
    value = env.get("MNEMOSYNE_WM_TTL_HOURS", "168")
    try:
        return int(value)
    except ValueError:
        raise MnemoOpsError(
            f"environment variable MNEMOSYNE_WM_TTL_HOURS must be a whole number of hours, "
            f"got {value!r}"
        ) from None


def _utc_clock(line: str | None) -> bool:
    """Does this line's sleep keep time in UTC? 3.15 stores and compares naive local time; 4.0
    stores naive UTC and compares ``datetime(timestamp)`` with a UTC cut-off."""
    line = line or versions.installed_line() or versions.LINES[0].name
    return versions.line_key(line) >= (4, 0)


def sleep_cutoff(
    now: datetime | None = None, environ: dict[str, str] | None = None, line: str | None = None
) -> str:
    """The age cut-off of Mnemosyne's sleep: rows older than TTL // 2 hours, as naive ISO in the
    time base of the installed line (`line`): local time for 3.15, UTC for 4.0."""
    if now is not None:
        moment = now
    elif _utc_clock(line):
        moment = datetime.now(UTC).replace(tzinfo=None)
    else:
        moment = datetime.now()
    return (moment - timedelta(hours=working_memory_ttl_hours(environ) // 2)).isoformat()


def eligible_condition(line: str | None = None) -> str:
    """The SQL condition (one ``?``: `sleep_cutoff`) of a working row the installed line's sleep takes:
    older than the cut-off, not consolidated, not pinned (3.15 compares the stored text with a
    local-time cut-off; 4.0 compares ``datetime(timestamp)`` with a UTC one and leaves out rows
    whose timestamp is not a date)."""
    older = (
        "datetime(trim(timestamp)) IS NOT NULL "
        "AND date(substr(trim(timestamp), 1, 10)) = substr(trim(timestamp), 1, 10) "
        "AND datetime(trim(timestamp)) < datetime(?)"
        if _utc_clock(line)
        else "timestamp < ?"
    )
    return f"{older} AND consolidated_at IS NULL AND (pinned IS NULL OR pinned = 0)"


def pending_work(
    connection: apsw.Connection,
    stale_seconds: int,
    now: datetime | None = None,
    line: str | None = None,
) -> dict[str, int]:
    """Rows Mnemosyne's sleep would consolidate now, and stale claims its reclaim would hand back.

    Mirrors the filters of ``BeamMemory.sleep`` of the installed line (`line`): not yet
    consolidated, not pinned, older than the cut-off, so the job takes its pre-write checkpoint
    only when there is work. 3.15 compares the stored text with a local-time cut-off; 4.0 compares
    ``datetime(timestamp)`` with a UTC one and leaves out rows whose timestamp is not a date.
    """
    utc = _utc_clock(line)
    moment = now or (datetime.now(UTC).replace(tzinfo=None) if utc else datetime.now())
    eligible = connection.execute(
        f"SELECT count(*) FROM working_memory WHERE {eligible_condition(line)}",
        (sleep_cutoff(moment, line=line),),
    ).fetchone()[0]
    stale_before = (moment - timedelta(seconds=stale_seconds)).isoformat()
    orphans = connection.execute(
        "SELECT count(*) FROM working_memory AS wm WHERE wm.consolidated_at IS NOT NULL "
        "AND wm.consolidation_claimed_at IS NOT NULL AND wm.consolidation_claimed_at < ? "
        "AND NOT EXISTS (SELECT 1 FROM episodic_memory AS em "
        "WHERE instr(',' || COALESCE(em.summary_of, '') || ',', ',' || wm.id || ',') > 0)",
        (stale_before,),
    ).fetchone()[0]
    return {"eligible": eligible, "orphan_claims": orphans}


def run_sleep(
    db_path: Path,
    hermes_home: Path,
    dry_run: bool,
    model: str = "auto",
    reclaim_stale_seconds: int = 3600,
    timeout_s: float | None = None,
    max_rows_per_summary: int | None = None,
    pending_rows: int = 0,
    max_sessions: int | None = None,
    left_over: dict[str, int] | None = None,
    inspect_snapshot: Callable[[Path], Any] | None = None,
) -> dict[str, Any]:
    """Run Mnemosyne's sleep for each session with work, on `db_path` (a snapshot of it in a dry
    run); return its summary.

    With `max_rows_per_summary`, Mnemosyne's sleep takes at most that many rows of a session per
    cycle (``MNEMOSYNE_SLEEP_BATCH``), so no summary covers more, and it is repeated until the
    `pending_rows` are done. With `max_sessions`, at most that many sessions sleep (the oldest
    first; the rest wait for the next run, ``sessions_deferred``). A session named in `left_over`
    with the same count of rows to take as recorded there is skipped (``sessions_unchanged``): the
    last sleep left those rows and nothing changed since. In a dry run,
    `inspect_snapshot(path)` is called on the consolidated snapshot before it is removed (so later
    steps can count exactly what they would do after the real consolidation); its value is
    returned under ``"inspection"``. Raises ChildProcessFailed (a MnemoOpsError) with one line when
    the child fails.
    """
    if model not in MODELS:
        raise MnemoOpsError(
            f"evening_batch.consolidation_model must be one of {', '.join(MODELS)}, got {model!r}"
        )
    scratch: Path | None = None
    try:
        # Rows one sleep takes from a session, so rows one summary can cover (read at import).
        variables = (
            {"MNEMOSYNE_SLEEP_BATCH": str(int(max_rows_per_summary))}
            if max_rows_per_summary
            else {}
        )
        if dry_run:
            scratch = Path(tempfile.mkdtemp(prefix="mnemo-ops-sleep-"))
            data_dir = scratch / "data"
            for folder in (data_dir, scratch / "home", scratch / "hermes"):
                folder.mkdir(mode=0o700)
            target = data_dir / "mnemosyne.db"
            snapshot.copy_snapshot(db_path, target)
            environment = mnemosyne_environment(
                data_dir, scratch / "hermes", home=scratch / "home", variables=variables
            )
        else:
            target = db_path
            environment = mnemosyne_environment(
                Path(db_path).parent, hermes_home, variables=variables
            )
        batch = int(max_rows_per_summary or 0)
        request = {
            "db_path": str(target),
            "dry_run": dry_run,
            "snapshot": dry_run,
            "sleep_batch": batch or None,
            # Each cycle consolidates at least one row while any is left, so this is enough.
            "max_cycles": (-(-pending_rows // batch) + 1) if batch else 1,
            "model": model,
            "reclaim_stale_seconds": reclaim_stale_seconds,
            "max_sessions": max_sessions,
            "left_over": left_over or {},
        }
        try:
            summary = run_child(
                "mnemo_ops.jobs.evening_batch.consolidation.child",
                request,
                timeout=timeout_s,
                environment=environment,
                cwd=scratch or Path(db_path).parent,
            )
        except ChildProcessFailed as error:
            raise error.with_context("Mnemosyne sleep") from None
        if scratch is not None and inspect_snapshot is not None:
            summary["inspection"] = inspect_snapshot(target)
        return summary
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
