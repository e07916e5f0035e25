"""Run a night of the six sleep steps and SIGKILL this process at a chosen NREM or REM write.

Usage: python -m tests.faults.dream_kill_child HOME LABEL CALL POINT

The CALL-th write batch (0-based) labelled LABEL (``sleep-nrem`` or ``sleep-rem``) kills the process
with SIGKILL ``inside`` its BEGIN IMMEDIATE transaction (after the work, before COMMIT) or ``after``
it committed (before the run records it in state.db). Prints "completed" when the kill did not land.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def main() -> None:
    """Run the night with the kill hook."""
    home, label, call, point = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    from mnemo_ops.database import transactions
    from mnemo_ops.mnemosyne.sample_home import SampleLayout
    from tests.jobs.evening_batch.sleep.conftest import settings_for
    from tests.jobs.evening_batch.sleep.dreams import run_night

    real_write_batch = transactions.write_batch
    calls = {"count": 0}

    def die() -> None:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def write_batch(connection, work, *args, **kwargs):
        if kwargs.get("label") != label:
            return real_write_batch(connection, work, *args, **kwargs)
        number = calls["count"]
        calls["count"] += 1
        if number != call:
            return real_write_batch(connection, work, *args, **kwargs)
        if point == "inside":

            def killing(conn):
                work(conn)
                die()

            return real_write_batch(connection, killing, *args, **kwargs)
        value = real_write_batch(connection, work, *args, **kwargs)
        die()
        return value

    transactions.write_batch = write_batch
    layout = SampleLayout(Path(home))
    result = run_night(settings_for(layout, Path(home)))
    print("completed", result.status, result.error)


if __name__ == "__main__":
    main()
