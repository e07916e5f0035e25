"""Make a checkpoint in a child process: what the pre-write hook uses inside other jobs' processes.

A job may hold Mnemosyne connections (Python's sqlite3, another SQLite library than apsw's) in its
own process. POSIX locks belong to the process: when the checkpoint's apsw connections closed their
file descriptors on the DB, the kernel would drop the locks Mnemosyne's connections hold on it (and the
other way round, mid-copy). A child process has only its own connections, so the copy is safe whatever
the job holds. The parent passes the moment (so names follow the parent's clock) and gets back the
outcome, through ``foundation.child_process``; a CheckpointError comes back as a result too (its
message, code and severity), a crash as ChildProcessFailed.

    echo '{"db": ..., "state_dir": ..., "memory_blocks_dir": ..., "kind": "pre-write", "job": ..., "moment": ...}' \\
        | python -m mnemo_ops.checkpoints.worker
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo_ops.checkpoints.create import CheckpointError, CheckpointOutcome, create_checkpoint
from mnemo_ops.foundation.child_process import ChildProcessFailed, child_main, run_child
from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.settings import Config, Settings, parse_config


def _settings(payload: dict[str, Any]) -> Settings:
    """The few settings a checkpoint needs (paths, the agent's disk reserve, the backup section)."""
    return Settings(
        db_path=Path(payload["db"]),
        state_dir=Path(payload["state_dir"]),
        config_file=None,
        hermes_home=Path(payload["memory_blocks_dir"]).parent,
        memory_blocks_dir=Path(payload["memory_blocks_dir"]),
        owner="default",
        config=parse_config(
            {key: payload[key] for key in ("disk", "backup") if payload.get(key)},
            "the checkpoint request",
        )
        if payload.get("disk") or payload.get("backup")
        else Config(),
        sources={},
    )


def create_in_child(
    settings: Settings, kind: str, job: str | None, moment: datetime
) -> CheckpointOutcome:
    """Run ``create_checkpoint`` in a child process; raise CheckpointError as the child reported it
    (ChildProcessFailed when the child itself failed)."""
    payload = {
        "db": str(settings.db_path),
        "state_dir": str(settings.state_dir),
        "memory_blocks_dir": str(settings.memory_blocks_dir),
        "kind": kind,
        "job": job,
        "moment": isoformat(moment),
        "disk": settings.disk.model_dump(),
        "backup": settings.backup.model_dump(),
    }
    try:
        # No timeout of its own: the job's manifest timeout interrupts the wait and ends the copy
        # (the next run cleans up what it left).
        answer = run_child("mnemo_ops.checkpoints.worker", payload, timeout=None)
    except ChildProcessFailed as error:
        raise error.with_context("the checkpoint process") from None
    if "error" in answer:
        raise CheckpointError(
            answer["error"],
            code=answer.get("code", "backup-failed"),
            severity=answer.get("severity", "error"),
        )
    answer["path"] = Path(answer["path"])
    return CheckpointOutcome(**answer)


def create(payload: dict[str, Any]) -> dict[str, Any]:
    """Make the checkpoint the request describes; return its outcome (or the error) as JSON data."""
    try:
        outcome = create_checkpoint(
            _settings(payload),
            payload["kind"],
            job=payload.get("job"),
            moment=datetime.fromisoformat(payload["moment"]),
        )
    except CheckpointError as error:
        return {"error": error.message, "code": error.code, "severity": error.severity}
    except MnemoOpsError as error:
        return {"error": error.message, "code": "backup-failed", "severity": "error"}
    return {
        "name": outcome.name,
        "path": str(outcome.path),
        "verified": outcome.verified,
        "manifest": outcome.manifest,
        "problems": outcome.problems,
        "source_corrupt": outcome.source_corrupt,
        "stats": outcome.stats,
        "state_db_problem": outcome.state_db_problem,
    }


if __name__ == "__main__":
    child_main(create)
