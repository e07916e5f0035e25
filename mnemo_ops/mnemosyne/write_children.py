"""The parent side of a child that writes through Mnemosyne's own API, one action at a time.

The child (self-reflection's lessons, graduation's global rows) reports each action it finished as
a progress message holding ``done``, and its transaction figures with its last message or its
result; they come back into the run's meter. A failed child raises one line saying how many of the
writes were made: those are in the database, and the next run finds them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mnemo_ops.database import transactions
from mnemo_ops.foundation.child_process import ChildProcessFailed, run_child
from mnemo_ops.mnemosyne.api import mnemosyne_environment


def apply_in_child(
    module: str,
    request: dict[str, Any],
    db_path: Path,
    hermes_home: Path,
    what: str,
    home: Path | None = None,
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Run the writing child `module` on `request` (its ``actions`` and the fields the child
    reads) with Mnemosyne pointed at the database's folder; one outcome per action done, in order.

    `what` names the writes in the error (``storing the lessons``); `home` is a private HOME for
    the child (a dry run's copies). Raises ChildProcessFailed."""
    actions = request["actions"]
    if not actions:
        return []
    meter = transactions.current_meter()
    # The run's transaction policy; the child's figures come back into the run's meter.
    request = {**request, "db_path": str(db_path), "policy": dataclasses.asdict(meter.policy)}
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
            module,
            request,
            timeout=timeout_s,
            environment=mnemosyne_environment(Path(db_path).parent, hermes_home, home=home),
            cwd=Path(db_path).parent,
            on_progress=progress,
        )
    except ChildProcessFailed as error:
        raise error.with_context(
            f"{what} failed after {len(outcomes)} of {len(actions)} writes"
        ) from None
    if isinstance(result.get("transactions"), dict):
        meter.add(result["transactions"])
    return outcomes
