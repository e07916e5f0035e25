"""Write transactions on the memory database: ``BEGIN IMMEDIATE``, bounded by time, retried on busy.

The live agent writes to the same file through its own connections, with a 5 s busy timeout. So
every write transaction of ours takes the write lock up front (never upgraded mid-way), is short,
and is retried from the start when SQLite reports the database busy or locked. "Short" is a time,
not a row count: a row can cost 20 us or 20 ms depending on what it touches and how big the
database is, so `write_items` commits when the policy's target time has passed (each transaction
stops taking items at `target_s`), and every transaction is timed against the bound (`max_s`, well
under the agent's timeout). After each commit the writer pauses for a share of the time it held the
lock (`agent_share`), so the agent's next write is never overtaken by our next transaction again and
again.

Why it matters so much: Mnemosyne's ``remember`` runs its dedup SELECT and then an INSERT through
Python's sqlite3, which opens a deferred transaction before the INSERT. When the INSERT times out,
Mnemosyne never rolls that transaction back; its next dedup SELECT then takes a read snapshot inside
it, and every later INSERT fails at once with "database is locked" (SQLITE_BUSY_SNAPSHOT) as soon as
any other connection has committed (docs/contracts.md, "Why the agent's writes fail at once").
One transaction of ours longer than 5 s costs the agent every write until it restarts.

Every transaction run here is recorded in the current `TransactionMeter` (set per job run with
`metered`): count, the longest, time over the bound, busy retries, the pauses. The job wiring puts
them in the result's stats, and so in the run ledger.

One implementation serves both SQLite libraries we use: apsw (our own connections) and Python's
sqlite3 (the library Mnemosyne uses, which bridge-drain writes through while Mnemosyne has the file
open).
"""

from __future__ import annotations

import contextvars
import dataclasses
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import apsw

from mnemo_ops.database import wal
from mnemo_ops.foundation import interrupts
from mnemo_ops.settings.sections import TransactionOptions

T = TypeVar("T")
R = TypeVar("R")

ATTEMPTS = 8
FIRST_ITEMS = 16
"""`write_items`' first transaction takes at most this many items (its commit cost is not known yet)."""
BACKOFF_S = 0.05
"""Retry schedule: the busy timeout already waits up to 5 s per attempt; then 50 ms, 100 ms, ..."""
MAX_AGENT_SHARE = 0.9
"""A share of 1 would mean pausing forever; 0.9 pauses nine times the transaction's length."""


@dataclasses.dataclass(frozen=True)
class Policy:
    """How long a write transaction may run and how much room the agent gets after it.

    - `target_s`: `write_items` stops taking new items once a transaction has run this long;
    - `max_s`: the bound; a transaction that ran longer is counted (``over_bound``) and reported;
    - `agent_share`: after each commit, pause ``held * share / (1 - share)`` (0: no pause).
    Made from the ``transactions`` section (milliseconds there, seconds here).
    """

    target_s: float
    max_s: float
    agent_share: float

    @classmethod
    def defaults(cls) -> Policy:
        """The policy of the defaults (outside a job run, e.g. ``trigger install``)."""
        return cls.of(TransactionOptions())

    @classmethod
    def of(cls, options: TransactionOptions) -> Policy:
        """The policy of a ``transactions`` section."""
        return cls(
            target_s=options.target_ms / 1000,
            max_s=options.max_ms / 1000,
            agent_share=options.agent_share,
        )

    def pause_after(self, held_s: float) -> float:
        """The pause after a transaction that held the write lock for `held_s` seconds."""
        share = min(max(self.agent_share, 0.0), MAX_AGENT_SHARE)
        return held_s * share / (1 - share)


@dataclasses.dataclass
class TransactionMeter:
    """What the write transactions of one job run cost the agent (held times, waits, pauses)."""

    policy: Policy = dataclasses.field(default_factory=Policy.defaults)
    count: int = 0
    held_s: float = 0.0
    longest_s: float = 0.0
    longest_label: str | None = None
    over_bound: int = 0
    longest_wait_s: float = 0.0
    busy_retries: int = 0
    paused_s: float = 0.0
    checkpoints: int = 0
    """Passive WAL checkpoints run after our transactions (`database.wal`), outside their time."""
    checkpoint_s: float = 0.0
    item_costs: dict[str | None, float] = dataclasses.field(default_factory=dict)
    """Lock time per item, commit included, of the last `write_items` transaction, per label."""

    def record(self, label: str | None, held_s: float, waited_s: float) -> None:
        """Count one committed (or rolled back) transaction that held the lock for `held_s`."""
        self.count += 1
        self.held_s += held_s
        if held_s > self.longest_s:
            self.longest_s, self.longest_label = held_s, label
        if held_s > self.policy.max_s:
            self.over_bound += 1
        self.longest_wait_s = max(self.longest_wait_s, waited_s)

    def figures(self) -> dict[str, Any]:
        """The meter's own figures (seconds), to send from a child process to its parent."""
        return {
            name: getattr(self, name)
            for name in (
                "count",
                "held_s",
                "longest_s",
                "longest_label",
                "over_bound",
                "longest_wait_s",
                "busy_retries",
                "paused_s",
                "checkpoints",
                "checkpoint_s",
            )
        }

    def add(self, figures: dict[str, Any]) -> None:
        """Count a child process's transactions (its `figures`) as this run's own."""
        self.count += int(figures.get("count") or 0)
        self.held_s += float(figures.get("held_s") or 0.0)
        if float(figures.get("longest_s") or 0.0) > self.longest_s:
            self.longest_s = float(figures["longest_s"])
            self.longest_label = figures.get("longest_label")
        self.over_bound += int(figures.get("over_bound") or 0)
        self.longest_wait_s = max(self.longest_wait_s, float(figures.get("longest_wait_s") or 0.0))
        self.busy_retries += int(figures.get("busy_retries") or 0)
        self.paused_s += float(figures.get("paused_s") or 0.0)
        self.checkpoints += int(figures.get("checkpoints") or 0)
        self.checkpoint_s += float(figures.get("checkpoint_s") or 0.0)

    def checkpoint(self, connection: Any) -> None:
        """Run the WAL checkpoint the last commit made due, timed apart from any transaction."""
        started = time.monotonic()
        if wal.checkpoint_due(connection):
            self.checkpoints += 1
            self.checkpoint_s += time.monotonic() - started

    def to_stats(self) -> dict[str, Any]:
        """The ``stats.transactions`` block of a job result (milliseconds)."""
        return {
            "count": self.count,
            "longest_write_transaction_ms": round(self.longest_s * 1000, 1),
            "longest_label": self.longest_label,
            "held_ms": round(self.held_s * 1000, 1),
            "over_bound": self.over_bound,
            "bound_ms": round(self.policy.max_s * 1000),
            "target_ms": round(self.policy.target_s * 1000),
            "longest_lock_wait_ms": round(self.longest_wait_s * 1000, 1),
            "busy_retries": self.busy_retries,
            "agent_pause_ms": round(self.paused_s * 1000, 1),
            "wal_checkpoints": self.checkpoints,
            "wal_checkpoint_ms": round(self.checkpoint_s * 1000, 1),
        }


_CURRENT: contextvars.ContextVar[TransactionMeter | None] = contextvars.ContextVar(
    "mnemo_ops_transaction_meter", default=None
)


@contextmanager
def metered(policy: Policy | None = None) -> Iterator[TransactionMeter]:
    """Record every write transaction run inside the block (in this thread) in a new meter."""
    meter = TransactionMeter(policy or Policy.defaults())
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def current_meter() -> TransactionMeter:
    """The meter of the running job (a fresh, unrecorded one with the default policy outside a job)."""
    meter = _CURRENT.get()
    return meter if meter is not None else TransactionMeter()


def current_policy() -> Policy:
    """The policy in force (the running job's, else the defaults)."""
    return current_meter().policy


def is_busy_error(error: BaseException) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED (any extended code), from apsw or from Python's sqlite3."""
    if isinstance(error, (apsw.BusyError, apsw.LockedError)):
        return True
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)


def _in_transaction(connection: Any) -> bool:
    if isinstance(connection, apsw.Connection):
        return not connection.get_autocommit()
    return connection.in_transaction


@contextmanager
def immediate_transaction(connection: Any) -> Iterator[Any]:
    """One ``BEGIN IMMEDIATE`` transaction: commit on success, roll back on any exception.

    A Python sqlite3 connection must be in autocommit mode (``isolation_level=None``), so that the
    module never opens a transaction of its own around ours. Not timed: `write_batch` is.
    Before it begins is a safe point: a stop asked by a signal is raised there (``interrupts``).
    """
    interrupts.check()
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        if _in_transaction(connection):
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    current_meter().checkpoint(connection)


def write_batch(
    connection: Any,
    work: Callable[[Any], T],
    attempts: int = ATTEMPTS,
    backoff_s: float = BACKOFF_S,
    label: str | None = None,
    on_held: Callable[[float], None] | None = None,
) -> T:
    """Run `work(connection)` inside one BEGIN IMMEDIATE transaction, retrying it whole when busy.

    `work` must be safe to repeat: it is called again from the start after a busy rollback. After
    `attempts` tries the busy error propagates. The time the write lock was held (from BEGIN
    IMMEDIATE returning to COMMIT returning) is recorded in the current meter under `label`, and
    after the commit the writer pauses for the agent's share (`Policy.pause_after`). Before the
    transaction begins is a safe point: a stop asked by a signal is raised there (``interrupts``),
    so a job stops between batches with none of its transactions open.
    """
    interrupts.check()
    meter = current_meter()
    for attempt in range(1, attempts + 1):
        asked = time.monotonic()
        try:
            connection.execute("BEGIN IMMEDIATE")
        except (apsw.Error, sqlite3.Error) as error:
            if not is_busy_error(error) or attempt == attempts:
                raise
            meter.busy_retries += 1
            time.sleep(backoff_s * attempt)
            continue
        acquired = time.monotonic()
        try:
            value = work(connection)
            connection.execute("COMMIT")
        except BaseException as error:
            if _in_transaction(connection):
                connection.execute("ROLLBACK")
            meter.record(label, time.monotonic() - acquired, acquired - asked)
            if (
                not isinstance(error, (apsw.Error, sqlite3.Error))
                or not is_busy_error(error)
                or attempt == attempts
            ):
                raise
            meter.busy_retries += 1
            time.sleep(backoff_s * attempt)
            continue
        held = time.monotonic() - acquired
        meter.record(label, held, acquired - asked)
        if on_held is not None:
            on_held(held)
        meter.checkpoint(connection)  # after the hold was measured: it never holds the write lock
        pause = meter.policy.pause_after(held)
        if pause > 0:
            meter.paused_s += pause
            time.sleep(pause)
        return value
    raise AssertionError("unreachable")


def write_statement(
    connection: Any, sql: str, parameters: tuple = (), label: str | None = None
) -> None:
    """One statement in its own retried ``BEGIN IMMEDIATE`` transaction."""
    write_batch(connection, lambda conn: conn.execute(sql, parameters), label=label)


def write_items(
    connection: Any,
    items: Sequence[T],
    apply: Callable[[Any, T], R],
    label: str | None = None,
    max_items: int | None = None,
) -> list[R]:
    """``apply(connection, item)`` for every item, in transactions sized by time; the results in order.

    Each transaction takes items until it has run for the policy's `target_s` (at least one item,
    at most `max_items`), commits, pauses for the agent, and the next one goes on from there. Each
    is retried whole on busy, so `apply` must re-check its conditions inside the transaction (it is
    repeated after a busy rollback). A kill leaves whole transactions only.

    The clock inside the transaction cannot see the COMMIT, and the commit's cost grows with the
    pages the items dirtied: on a large home the commit can take several times as long as the work
    before it, so the agent would wait far longer than the target. So the number of items is
    also sized from the lock time per item, commit included, that the previous transaction took:
    the first takes at most FIRST_ITEMS, each next one at most twice as many as the last.
    """
    results: list[R] = []
    position = 0
    meter = current_meter()
    # A job writes in many calls (linking: one per batch); what the last one measured carries over.
    known = meter.item_costs.get(label)
    fitting = FIRST_ITEMS if known is None else _fitting(meter.policy.target_s, known, None)
    while position < len(items):
        target_s = current_policy().target_s
        limit = fitting if max_items is None else min(max_items, fitting)

        def work(
            conn: Any, start: int = position, target_s: float = target_s, limit: int = limit
        ) -> list[R]:
            done: list[R] = []
            deadline = time.monotonic() + target_s
            for item in items[start : min(len(items), start + limit)]:
                done.append(apply(conn, item))
                if time.monotonic() >= deadline:
                    break
            return done

        held: list[float] = []
        done = write_batch(connection, work, label=label, on_held=held.append)
        results.extend(done)
        position += len(done)
        if held and done:
            per_item_s = held[-1] / len(done)
            meter.item_costs[label] = per_item_s
            fitting = _fitting(target_s, per_item_s, len(done))
    return results


def _fitting(target_s: float, per_item_s: float, last: int | None) -> int:
    """Items that fit in `target_s` at `per_item_s` each (at least 1; at most twice `last`)."""
    fitting = max(1, int(target_s / max(per_item_s, 1e-9)))
    return fitting if last is None else min(2 * last, fitting)


def batched(items: Iterable[T], size: int = 500) -> Iterator[list[T]]:
    """Yield lists of at most `size` items (work units read or planned together; writes of a
    batch go through `write_items`, which sizes transactions by time)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
