"""Parent side of the writes: run ``reflection.child`` with Mnemosyne pointed at the database's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mnemo_ops.mnemosyne.write_children import apply_in_child


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
    return apply_in_child(
        "mnemo_ops.jobs.self_reflection.child",
        {"owner": owner, "session_id": session_id, "actions": actions},
        db_path,
        hermes_home,
        "storing the lessons",
        timeout_s=timeout_s,
    )
