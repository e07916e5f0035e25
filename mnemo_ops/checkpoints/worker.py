"""Make a checkpoint in a child process: what the pre-write hook uses inside other jobs' processes.

A job may hold Mnemosyne connections (Python's sqlite3, another SQLite library than apsw's) in its
own process. POSIX locks belong to the process: when the checkpoint's apsw connections closed their
file descriptors on the DB, the kernel would drop the locks Mnemosyne's connections hold on it (and the
other way round, mid-copy). A child process has only its own connections, so the copy is safe whatever
the job holds. The parent passes the moment (so names follow the parent's clock) and reads back the
outcome as JSON.

    echo '{"db": ..., "state_dir": ..., "memory_blocks_dir": ..., "kind": "pre-write", "job": ..., "moment": ...}' \\
        | python -m mnemo_ops.checkpoints.worker
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo_ops.checkpoints.create import CheckpointError, CheckpointOutcome, create_checkpoint
from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.settings import Config, Settings, parse_config


def _settings(payload: dict[str, Any]) -> Settings:
    """The few settings a checkpoint needs (paths, and the agent's disk reserve)."""
    return Settings(
        db_path=Path(payload["db"]),
        state_dir=Path(payload["state_dir"]),
        config_file=None,
        hermes_home=Path(payload["memory_blocks_dir"]).parent,
        memory_blocks_dir=Path(payload["memory_blocks_dir"]),
        owner="default",
        config=parse_config({"disk": payload["disk"]}, "the checkpoint request")
        if payload.get("disk")
        else Config(),
        sources={},
    )


def create_in_child(
    settings: Settings, kind: str, job: str | None, moment: datetime
) -> CheckpointOutcome:
    """Run ``create_checkpoint`` in a child process; raise CheckpointError as the child reported it."""
    payload = {
        "db": str(settings.db_path),
        "state_dir": str(settings.state_dir),
        "memory_blocks_dir": str(settings.memory_blocks_dir),
        "kind": kind,
        "job": job,
        "moment": isoformat(moment),
        "disk": settings.disk.model_dump(),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops.checkpoints.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(json.dumps(payload))
    finally:  # a job timeout in the parent must not leave the copy running (the next run cleans up)
        if process.poll() is None:
            process.kill()
            process.wait()
    try:
        answer = json.loads(stdout)
    except ValueError:
        last_line = (stderr.strip().splitlines() or ["no output"])[-1]
        raise CheckpointError(
            f"the checkpoint process failed (exit {process.returncode}): {last_line}"
        ) from None
    if "error" in answer:
        raise CheckpointError(
            answer["error"],
            code=answer.get("code", "backup-failed"),
            severity=answer.get("severity", "error"),
        )
    answer["path"] = Path(answer["path"])
    return CheckpointOutcome(**answer)


def main() -> None:
    """Read the request on stdin, make the checkpoint, print the outcome (or the error) as JSON."""
    payload = json.loads(sys.stdin.read())
    try:
        outcome = create_checkpoint(
            _settings(payload),
            payload["kind"],
            job=payload.get("job"),
            moment=datetime.fromisoformat(payload["moment"]),
        )
    except CheckpointError as error:
        answer: dict[str, Any] = {
            "error": error.message,
            "code": error.code,
            "severity": error.severity,
        }
    except MnemoOpsError as error:
        answer = {"error": error.message, "code": "backup-failed", "severity": "error"}
    else:
        answer = {
            "name": outcome.name,
            "path": str(outcome.path),
            "verified": outcome.verified,
            "manifest": outcome.manifest,
            "problems": outcome.problems,
            "source_corrupt": outcome.source_corrupt,
            "stats": outcome.stats,
        }
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
