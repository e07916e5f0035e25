"""Stopping a job at a safe point when SIGINT or SIGTERM arrives, so the run can be recorded.

Python's defaults end the process where the signal lands: SIGTERM at once, with no ledger row and
the writer lock dropped only by the kernel; SIGINT with a KeyboardInterrupt that the job's own
``except Exception`` clauses do not see and the runner does not record. Under `safe_points` a
signal only sets a flag; the job stops at the next safe point, where `check` raises `Interrupted`:

- before each write transaction (``database/transactions``: between batches, none of them open);
- between the steps of a job that has steps;
- while a child process runs (``foundation/child_process``): the child is ended as on a timeout,
  and what it had not committed is rolled back by SQLite.

`Interrupted` derives from BaseException, like KeyboardInterrupt, so the ``except Exception``
clauses that collect a step's failure and go on do not swallow it, while every ``except
BaseException`` / ``finally`` that rolls a transaction back or removes a partial file still runs.
The runner records the run as interrupted, releases the lock and exits 128 + the signal's number
(130 for SIGINT, 143 for SIGTERM, as a shell reports a process ended by it).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that ask a job to stop: Ctrl-C, and what cron, systemd and Kubernetes send."""

_requested: signal.Signals | None = None


class Interrupted(BaseException):
    """A stop asked by a signal, raised at a safe point; `exit_code` is 128 + its number."""

    def __init__(self, signal_number: int):
        self.signal = signal.Signals(signal_number)
        self.exit_code = 128 + int(self.signal)
        super().__init__(f"interrupted by {self.signal.name}")


def requested() -> signal.Signals | None:
    """The signal that asked for a stop during the current `safe_points` block, else None."""
    return _requested


def check() -> None:
    """A safe point: raise `Interrupted` when a stop was asked, else return at once."""
    if _requested is not None:
        raise Interrupted(_requested)


def _note(signal_number: int, frame) -> None:
    global _requested
    if _requested is None:  # the first signal names the stop; a second one asks nothing new
        _requested = signal.Signals(signal_number)


@contextmanager
def safe_points() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM ask for a stop at the next safe point (`check`)
    instead of ending the process where they land. The previous handlers are put back after.

    Only the main thread can set signal handlers: elsewhere the block changes nothing."""
    global _requested
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _requested = None
    previous = {number: signal.signal(number, _note) for number in SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _requested = None
