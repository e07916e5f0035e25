"""Run the sleep stages on a home and SIGKILL this process at a chosen write to the memory database.

Usage: python -m tests.faults.sleep_kill_child HOME MOMENT CALL POINT

The clock is frozen (ticking) at MOMENT (ISO). The CALL-th write batch (0-based, counted over every
``transactions.write_batch`` the sleep stages make) kills the process with SIGKILL: ``before`` it
starts, ``inside`` its BEGIN IMMEDIATE transaction after the work and before COMMIT, or ``after``
it committed. Prints "completed" when the run ended before that write (the kill did not land).
"""

from __future__ import annotations

import os
import signal
import sys
from datetime import datetime
from pathlib import Path


def main() -> None:
    """Run the stages with the kill hook."""
    home, moment, call, point = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    from freezegun import freeze_time

    from mnemo_ops.database import transactions
    from mnemo_ops.mnemosyne.sample_home import SampleLayout
    from tests.jobs.evening_batch.sleep.conftest import run_sleep, settings_for

    real_write_batch = transactions.write_batch
    calls = {"count": 0}

    def die() -> None:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def write_batch(connection, work, *args, **kwargs):
        number = calls["count"]
        calls["count"] += 1
        if number != call:
            return real_write_batch(connection, work, *args, **kwargs)
        if point == "before":
            die()
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
    with freeze_time(datetime.fromisoformat(moment), tick=True):
        result = run_sleep(settings_for(layout, Path(home), "sleep:\n  confirmation_edges: true\n"))
    print("completed", result.status, result.error)


if __name__ == "__main__":
    main()
