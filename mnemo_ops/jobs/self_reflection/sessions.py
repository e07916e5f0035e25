"""The week's sessions: Mnemosyne's working rows and summaries by session, and Hermes' session store.

A session is reflected on once it has been idle for ``self_reflection.idle_hours`` (2 h): one still
going on is left for next week's run (it is counted as deferred). Which sessions are due: those whose
last activity lies after the previous week's run covered (``covered_until`` in its ledger row; without
one, ``window_days`` ago) and before the idle cut-off. Their turns are read from the start of the
window (the earlier of ``covered_until`` and ``window_days`` ago).

Hermes' ``$HERMES_HOME/state.db`` (tables ``sessions`` and ``messages``) is opened read-only and
never written: as immutable when nobody has it open (no lock, no -wal or -shm file created beside
it), else with a ``mode=ro`` URI beside the running Hermes (a WAL reader never blocks its writer);
a store that is missing, older or unreadable is reported and skipped. Its messages carry the same
session ids as the agent's Mnemosyne rows (the plugin stores turns under Hermes' session id), so
both meet in one session; a message whose text a Mnemosyne row of the session already holds is
read once.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.jobs.self_reflection.lessons import SOURCE
from mnemo_ops.mnemosyne import versions
from mnemo_ops.models import Evidence, is_private_row

HERMES_ROLES = ("user", "assistant")


@dataclasses.dataclass(frozen=True)
class Turn:
    """One statement of a session: a working row (``m:``), a summary (``e:``) or a Hermes message (``h:``)."""

    ref: str
    session_id: str
    text: str
    timestamp: str  # naive local ISO (a 4.0 row's naive UTC stamp is converted)
    role: str  # user | assistant | memory | summary
    private: bool

    def evidence(self, limit: int) -> Evidence:
        """This turn as evidence for a model (at most `limit` characters)."""
        return Evidence(
            self.ref, self.text[:limit], private=self.private, session_id=self.session_id
        )


@dataclasses.dataclass
class Session:
    """A session's turns in time order and when it was last active."""

    session_id: str
    turns: list[Turn] = dataclasses.field(default_factory=list)
    last_activity: str = ""

    @property
    def characters(self) -> int:
        """The length of the session's text."""
        return sum(len(turn.text) for turn in self.turns)


@dataclasses.dataclass
class Window:
    """Which sessions a run reflects on."""

    start: datetime  # turns from here (local, naive)
    due_after: datetime  # sessions last active after this...
    cutoff: datetime  # ...and not after this (now minus the idle time)


@dataclasses.dataclass
class Gathered:
    """The due sessions and what was left or could not be read."""

    sessions: list[Session]
    deferred: list[str]
    hermes: dict[str, Any]
    rows: int = 0
    summaries: int = 0
    messages: int = 0

    def to_stats(self) -> dict[str, Any]:
        """Counts for ``stats.reflection.input``."""
        return {
            "sessions": len(self.sessions),
            "sessions_deferred": len(self.deferred),
            "deferred": self.deferred[:20],
            "working_rows": self.rows,
            "summaries": self.summaries,
            "hermes_messages": self.messages,
            "hermes": self.hermes,
        }


def make_window(
    now: datetime, window_days: int, idle_hours: float, covered_until: datetime | None
) -> Window:
    """The window of a run at local time `now` (`covered_until`: the previous week's run's cut-off)."""
    default_start = now - timedelta(days=window_days)
    earliest = now - timedelta(days=2 * window_days)
    due_after = default_start if covered_until is None else max(covered_until, earliest)
    return Window(
        start=min(due_after, default_start),
        due_after=due_after,
        cutoff=now - timedelta(hours=idle_hours),
    )


def _local_iso(epoch: float) -> str:
    return datetime.fromtimestamp(float(epoch)).isoformat()


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def read_memory_rows(
    connection: apsw.Connection, window: Window, include_summaries: bool, line: str | None = None
) -> tuple[list[Turn], int, int]:
    """Live working rows (not our own lessons) and, optionally, summaries from the window.

    Rows are stamped in the time base of the Mnemosyne `line` that wrote them (default: the
    installed one; 4.0 stamps naive UTC, 3.15 naive local time): the window is turned into that
    base for the query, and each turn's time into local time, the base of the window and of
    Hermes' messages, so a session's idle time is right in every time zone.
    """
    now = versions.memory_time(datetime.now(), line)
    start = versions.memory_time(window.start, line)
    turns: list[Turn] = []
    rows = database.fetch_dicts(
        connection,
        "SELECT id, content, session_id, timestamp, scope, metadata_json FROM working_memory "
        f"WHERE timestamp >= ? AND {database.live_condition(now='?')} "
        "AND COALESCE(source, '') != ? AND session_id IS NOT NULL ORDER BY timestamp, id",
        (start, now, SOURCE),
    )
    for row in rows:
        if row["content"]:
            turns.append(
                Turn(
                    f"m:{row['id']}",
                    row["session_id"],
                    row["content"],
                    versions.local_time(row["timestamp"] or "", line),
                    "memory",
                    is_private_row(row.get("scope"), row.get("metadata_json")),
                )
            )
    summaries = 0
    if include_summaries and "session_id" in database.column_names(connection, "episodic_memory"):
        covered = {turn.ref[2:] for turn in turns}
        for row in database.fetch_dicts(
            connection,
            "SELECT id, content, session_id, timestamp, scope, metadata_json, summary_of "
            "FROM episodic_memory WHERE timestamp >= ? AND "
            f"{database.live_condition(now='?')} AND session_id IS NOT NULL ORDER BY timestamp, id",
            (start, now),
        ):
            sources = {part for part in (row.get("summary_of") or "").split(",") if part}
            # A summary whose sources are all here adds nothing but a second copy of them.
            if not row["content"] or (sources and sources <= covered):
                continue
            summaries += 1
            turns.append(
                Turn(
                    f"e:{row['id']}",
                    row["session_id"],
                    row["content"],
                    versions.local_time(row["timestamp"] or "", line),
                    "summary",
                    is_private_row(row.get("scope"), row.get("metadata_json")),
                )
            )
    return turns, len(rows), summaries


def _store_state(path: Path) -> tuple:
    """What changes when a writer opens the store: its -wal and -journal files, its size and time."""
    stat = path.stat()
    companions = tuple(
        path.with_name(path.name + suffix).exists() for suffix in ("-wal", "-journal")
    )
    return companions, stat.st_size, stat.st_mtime_ns


def _open_store(path: Path, immutable: bool) -> apsw.Connection:
    """Hermes' store, read-only. `immutable`: no locks and no -wal/-shm created beside it (SQLite's
    ``immutable=1``), for a store nobody has open; else ``mode=ro``, beside a running Hermes."""
    parameter = "immutable=1" if immutable else "mode=ro"
    connection = apsw.Connection(
        f"{path.absolute().as_uri()}?{parameter}",
        flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI,
    )
    connection.set_busy_timeout(database.BUSY_TIMEOUT_MS)
    return connection


def _read_store(connection: apsw.Connection, window: Window) -> tuple[list, dict[str, str]] | str:
    """The window's messages and each session's last activity; or the problem, in words."""
    tables = database.table_names(connection)
    if not {"sessions", "messages"} <= tables:
        return "no sessions and messages tables"
    message_columns = set(database.column_names(connection, "messages"))
    session_columns = set(database.column_names(connection, "sessions"))
    if not {"id", "session_id", "role", "content", "timestamp"} <= message_columns:
        return "messages lacks id, session_id, role, content or timestamp"
    placeholders = ", ".join("?" for _ in HERMES_ROLES)
    rows = connection.execute(
        f"SELECT id, session_id, role, content, timestamp FROM messages WHERE timestamp >= ? "
        f"AND role IN ({placeholders}) AND content IS NOT NULL AND content != '' "
        "ORDER BY timestamp, id",
        (_epoch(window.start), *HERMES_ROLES),
    ).fetchall()
    activity_columns = [
        column
        for column in ("last_activity_at", "ended_at", "started_at")
        if column in session_columns
    ]
    activity: dict[str, str] = {}
    if activity_columns and "id" in session_columns:
        expression = (
            "MAX(" + ", ".join(f"COALESCE({c}, 0)" for c in activity_columns) + ")"
            if len(activity_columns) > 1
            else f"COALESCE({activity_columns[0]}, 0)"
        )
        for session_id, moment in connection.execute(
            f"SELECT id, {expression} FROM sessions WHERE {expression} >= ?",
            (_epoch(window.start),),
        ).fetchall():
            if moment:
                activity[str(session_id)] = _local_iso(moment)
    return rows, activity


def read_hermes_messages(
    state_path: Path, window: Window
) -> tuple[list[Turn], dict[str, Any], dict[str, str]]:
    """Hermes' user and assistant messages from the window, read-only; and each session's last
    activity as Hermes recorded it. Never raises for a missing or unreadable store.

    A store nobody has open (no -wal or -journal beside it) is read as immutable, so not even the
    -wal and -shm files a read-only SQLite connection creates appear beside it; when Hermes opened
    it meanwhile (those files appear, or the file changes), the read is done again the ordinary
    read-only way, which never blocks Hermes' writes (WAL).
    """
    report: dict[str, Any] = {"path": str(state_path), "read": False}
    if not state_path.is_file():
        report["problem"] = "not found"
        return [], report, {}
    found = None
    for attempt in ("immutable", "read-only"):
        try:
            before = _store_state(state_path)
            if attempt == "immutable" and any(before[0]):
                continue  # Hermes has it open: read beside it
            connection = _open_store(state_path, immutable=attempt == "immutable")
        except (OSError, apsw.Error) as error:
            report["problem"] = f"cannot open: {error}"
            return [], report, {}
        try:
            found = _read_store(connection, window)
        except apsw.Error as error:
            found = f"cannot read: {error}"
        finally:
            connection.close()
        try:
            unchanged = _store_state(state_path) == before
        except OSError:
            unchanged = False
        if attempt != "immutable" or unchanged:
            report["mode"] = attempt
            break
    if isinstance(found, str):
        report["problem"] = found
        return [], report, {}
    rows, activity = found
    turns = [
        Turn(f"h:{message_id}", str(session_id), content, _local_iso(moment), role, True)
        for message_id, session_id, role, content, moment in rows
        if isinstance(content, str) and session_id is not None and moment is not None
    ]
    report.update(
        {"read": True, "messages": len(turns), "sessions": len({t.session_id for t in turns})}
    )
    return turns, report, activity


def gather(
    connection: apsw.Connection,
    hermes_state: Path | None,
    window: Window,
    include_summaries: bool = True,
    line: str | None = None,
) -> Gathered:
    """The sessions due for reflection in `window` (see the module docstring); `line`: the
    Mnemosyne line whose time base the rows have (default: the installed one)."""
    turns, rows, summaries = read_memory_rows(connection, window, include_summaries, line)
    hermes_report: dict[str, Any] = {"read": False, "problem": "off"}
    activity: dict[str, str] = {}
    messages: list[Turn] = []
    if hermes_state is not None:
        messages, hermes_report, activity = read_hermes_messages(hermes_state, window)
    by_session: dict[str, Session] = {}
    seen_text: set[tuple[str, str]] = set()
    for turn in turns:
        by_session.setdefault(turn.session_id, Session(turn.session_id)).turns.append(turn)
        seen_text.add((turn.session_id, " ".join(turn.text.split()).lower()))
    kept_messages = 0
    for turn in messages:
        if (turn.session_id, " ".join(turn.text.split()).lower()) in seen_text:
            continue
        kept_messages += 1
        by_session.setdefault(turn.session_id, Session(turn.session_id)).turns.append(turn)
    due, deferred = [], []
    due_after, cutoff = window.due_after.isoformat(), window.cutoff.isoformat()
    for session_id in sorted(by_session):
        session = by_session[session_id]
        session.turns.sort(key=lambda turn: (turn.timestamp, turn.ref))
        session.last_activity = max([session.turns[-1].timestamp, activity.get(session_id, "")])
        if session.last_activity > cutoff:
            deferred.append(session_id)
        elif session.last_activity > due_after:
            due.append(session)
    due.sort(key=lambda session: (session.last_activity, session.session_id))
    return Gathered(
        due, deferred, hermes_report, rows=rows, summaries=summaries, messages=kept_messages
    )
