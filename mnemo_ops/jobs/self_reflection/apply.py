"""Parent side of the writes: run ``reflection.child`` with Mnemosyne pointed at the database's folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mnemo_ops.database import transactions
from mnemo_ops.foundation.child_process import ChildProcessFailed, run_child
from mnemo_ops.mnemosyne.api import mnemosyne_environment


def apply_plan(
    db_path: Path,
    hermes_home: Path,
    owner: str,
    session_id: str,
    actions: list[dict[str, Any]],
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Apply `actions` in a child process; return one outcome per action done.

    Raises ChildProcessFailed (a MnemoOpsError) with one line when the child fails (the actions it
    finished are in the database, and the next run finds them).
    """
    if not actions:
        return []
    meter = transactions.current_meter()
    request = {
        "db_path": str(db_path),
        "owner": owner,
        "session_id": session_id,
        "actions": actions,
        # The run's transaction policy; the child's figures come back into the run's meter.
        "policy": dataclasses.asdict(meter.policy),
    }
    outcomes: list[dict[str, Any]] = []

    def progress(message: dict[str, Any]) -> None:
        # One message per action done; the child's meter figures come with its last message
        # (here when it failed, else in the result).
        if "done" in message:
            outcomes.append(message)
        if isinstance(message.get("transactions"), dict):
            meter.add(message["transactions"])

    try:
        result = run_child(
            "mnemo_ops.jobs.self_reflection.child",
            request,
            timeout=timeout_s,
            environment=mnemosyne_environment(Path(db_path).parent, hermes_home),
            cwd=Path(db_path).parent,
            on_progress=progress,
        )
    except ChildProcessFailed as error:
        raise error.with_context(
            f"storing the lessons failed after {len(outcomes)} of {len(actions)} writes"
        ) from None
    if isinstance(result.get("transactions"), dict):
        meter.add(result["transactions"])
    return outcomes
