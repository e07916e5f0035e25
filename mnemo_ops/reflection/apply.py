"""Parent side of the writes: run ``reflection.child`` with Mnemosyne pointed at the database's folder."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mnemo_ops.database import transactions
from mnemo_ops.foundation.errors import MnemoOpsError


def apply_plan(
    db_path: Path,
    hermes_home: Path,
    owner: str,
    session_id: str,
    actions: list[dict[str, Any]],
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Apply `actions` in a child process; return one outcome per action done.

    Raises MnemoOpsError with one line when the child fails (the actions it finished are in the
    database, and the next run finds them).
    """
    if not actions:
        return []
    environment = dict(os.environ)
    environment.update(
        {
            "MNEMOSYNE_DATA_DIR": str(Path(db_path).parent),
            "HERMES_HOME": str(hermes_home),
            "PYTHONUNBUFFERED": "1",
        }
    )
    meter = transactions.current_meter()
    request = {
        "db_path": str(db_path),
        "owner": owner,
        "session_id": session_id,
        "actions": actions,
        # The run's transaction policy; the child's figures come back into the run's meter.
        "policy": dataclasses.asdict(meter.policy),
    }
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "mnemo_ops.reflection.child"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=environment,
            timeout=timeout_s,
            cwd=str(Path(db_path).parent),
        )
    except subprocess.TimeoutExpired:
        raise MnemoOpsError(
            f"storing the lessons did not finish within {timeout_s:.0f} s"
        ) from None
    outcomes, fatal, finished = [], None, False
    for line in completed.stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "done" in message:
            outcomes.append(message)
        elif "fatal" in message:
            fatal = message["fatal"]
        elif message.get("finished"):
            finished = True
        if isinstance(message.get("transactions"), dict):
            meter.add(message["transactions"])
    if fatal or not finished or completed.returncode != 0:
        if not fatal:
            tail = [line for line in completed.stderr.splitlines() if line.strip()]
            fatal = tail[-1] if tail else f"exit status {completed.returncode}"
        raise MnemoOpsError(
            f"storing the lessons failed after {len(outcomes)} of {len(actions)} writes: {fatal}"
        )
    return outcomes
