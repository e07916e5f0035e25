"""A week of sessions that state known lessons, written through Mnemosyne's own API, with a Hermes
session store beside it: the self-reflection job's test and demo home.

Among ordinary conversation (garden, cooking, small talk), the sessions state:

- a **preference stated twice**, in two sessions ("I prefer window seats on long flights");
- a **multi-step procedure** that worked (renewing the proxy's certificate, three numbered steps,
  then "That worked"), its steps in Hermes' session store (the assistant's reply) and its question
  and confirmation in Mnemosyne;
- a **failure and its fix** (the nightly backup failed with "permission denied", fixed by chown);
- a **version quirk** ("the photo tool only works with Python 3.11; Python 3.12 breaks ...");
- in a session still going on (active 20 minutes ago) a preference that must wait for next week.

Rows are stored with Mnemosyne's default scope (``session``, private to their session) except the
ones listed in `SHARED`, stored ``global``; one shared row holds an API key (to show redaction), one
session row holds `PRIVATE_MARKER` (to show what never reaches a remote model). Hermes' ``state.db``
has the ``sessions`` and ``messages`` tables of Hermes' own schema (the columns we read), in WAL mode.

Layout: a Hermes home as in ``sample_database`` (``SampleLayout``).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import ChildProcessFailed, child_main, run_child
from mnemo_ops.mnemosyne.sample_home import SampleLayout, backdate

PRIVATE_MARKER = "zanzibar-private-marker"
API_KEY = "sk-proj-REFLECTIONFIXTURE0123456789"

# (session id, days ago, [(speaker, text, shared)]); speaker "user" rows are source user/stated.
SESSIONS: list[tuple[str, float, list[tuple[str, str, bool]]]] = [
    (
        "travel-planning",
        6.0,
        [
            ("user", "We are flying to Lisbon in March to see my sister.", False),
            ("user", "I prefer window seats on long flights.", True),
            ("agent", "Noted. The direct flight leaves at nine in the morning.", False),
            ("user", "The hotel near Alfama has a rooftop terrace.", False),
            ("user", f"Remember {PRIVATE_MARKER}: my sister's flat is above the bakery.", False),
        ],
    ),
    (
        "proxy-certificate",
        5.0,
        [
            ("user", "How do I renew the TLS certificate on the proxy?", False),
            ("user", "That worked, thanks! The site is green again.", False),
            ("agent", "Good to hear; the next renewal is due in sixty days.", False),
        ],
    ),
    (
        "nightly-backup",
        4.0,
        [
            (
                "agent",
                "The nightly backup failed with error: permission denied on /srv/backup.",
                False,
            ),
            ("user", "Odd, it ran fine last week.", False),
            (
                "agent",
                "We fixed it by running chown backup:backup /srv/backup and the backup works again.",
                False,
            ),
            ("user", f"For the record my API key is {API_KEY} but do not share it.", True),
        ],
    ),
    (
        "photo-tool",
        3.0,
        [
            (
                "agent",
                "Note that the photo tool only works with Python 3.11; Python 3.12 breaks its C extension.",
                True,
            ),
            ("user", "Good to know. Also, as always, I prefer window seats on long flights.", True),
            ("user", "We talked about the tomatoes again; they are ripening slowly.", False),
        ],
    ),
    (
        "garden-chat",
        2.0,
        [
            ("user", "The basil next to the tomatoes is doing well this year.", False),
            ("agent", "Compost from kitchen scraps goes into the raised beds in autumn.", False),
            ("user", "We looked at the seed catalogue together.", False),
        ],
    ),
    (
        "still-talking",
        20 / (24 * 60),
        [
            ("user", "I prefer green tea over coffee in the mornings.", False),
            ("agent", "I will keep that in mind.", False),
        ],
    ),
]

HERMES_MESSAGES: list[tuple[str, str, str, int]] = [
    # (session id, role, text, offset in minutes from the session's start)
    ("proxy-certificate", "user", "How do I renew the TLS certificate on the proxy?", 0),
    (
        "proxy-certificate",
        "assistant",
        "To renew the certificate: 1. stop nginx 2. run certbot renew 3. start nginx again",
        1,
    ),
    ("proxy-certificate", "user", "That worked, thanks! The site is green again.", 4),
    ("garden-chat", "user", "The basil next to the tomatoes is doing well this year.", 0),
]
"""Hermes' transcript holds the assistant's reply with the steps, which Mnemosyne never stored;
the other messages repeat Mnemosyne rows (read once)."""

EXPECTED_KINDS = ("preference", "procedure", "failure", "environment")
EXPECTED_SLOTS = {
    "preference": "long-seats-window",
    "procedure": "certificate-renew",
    "environment": "python-3.11",
}


def session_start(now: datetime, days_ago: float) -> datetime:
    """When a session of the fixture started (its turns follow one minute apart)."""
    return now - timedelta(days=days_ago) - timedelta(minutes=10)


def build(directory: Path, now: datetime | None = None) -> SampleLayout:
    """Write the home into `directory` (must not hold one yet); return its layout."""
    layout = SampleLayout(Path(directory).absolute())
    if layout.db_path.exists():
        raise FileExistsError(f"{layout.db_path} already exists")
    for folder in (
        layout.data_dir,
        layout.memory_blocks_dir,
        layout.state_dir,
        layout.directory / "home",
    ):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for block in ("MEMORY.md", "USER.md"):
        (layout.memory_blocks_dir / block).write_text("", encoding="utf-8")
    moment = now or datetime.now()
    add_week(layout, moment)
    write_hermes_store(layout.hermes_home / "state.db", moment)
    return layout


def add_week(layout: SampleLayout, now: datetime | None = None) -> None:
    """Write the week's sessions through Mnemosyne into the home's database (new or existing).

    Mnemosyne runs in a child process, so the caller's process never holds a Mnemosyne connection
    beside its own SQLite library.
    """
    moment = now or datetime.now()
    try:
        run_child(
            "devtools.samples.reflection_week",
            {"db_path": str(layout.db_path), "now": moment.isoformat()},
            timeout=None,
            environment=layout.environ(variables={"MNEMOSYNE_NO_EMBEDDINGS": "1"}),
        )
    except ChildProcessFailed as error:
        raise error.with_context("writing the reflection week") from None


def write_hermes_store(path: Path, now: datetime) -> None:
    """Hermes' session store with the fixture's messages (the columns self-reflection reads)."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.executescript(
            """
            CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, started_at REAL NOT NULL,
                ended_at REAL, end_reason TEXT, message_count INTEGER DEFAULT 0, title TEXT,
                last_activity_at REAL, parent_session_id TEXT);
            CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL
                REFERENCES sessions(id), role TEXT NOT NULL, content TEXT, tool_call_id TEXT,
                tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL, active INTEGER NOT NULL DEFAULT 1);
            CREATE VIRTUAL TABLE messages_fts USING fts5(content, content=messages, content_rowid=id);
            """
        )
        days = {session_id: days_ago for session_id, days_ago, _ in SESSIONS}
        for session_id in sorted({message[0] for message in HERMES_MESSAGES}):
            start = session_start(now, days[session_id]).timestamp()
            connection.execute(
                "INSERT INTO sessions (id, source, started_at, ended_at, end_reason, last_activity_at) "
                "VALUES (?, 'cli', ?, ?, 'session_end', ?)",
                (session_id, start, start + 300, start + 300),
            )
        for session_id, role, text, minutes in HERMES_MESSAGES:
            stamp = session_start(now, days[session_id]).timestamp() + 60 * minutes
            cursor = connection.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
                (session_id, role, text, stamp),
            )
            connection.execute(
                "INSERT INTO messages_fts (rowid, content) VALUES (?, ?)", (cursor.lastrowid, text)
            )
        connection.commit()
    finally:
        connection.close()


def _write(spec: dict[str, Any]) -> dict[str, str]:
    """Runs in the child: store every turn through Mnemosyne, then age the rows; text -> id."""
    from mnemosyne.core.memory import Mnemosyne

    db_path = Path(spec["db_path"])
    now = datetime.fromisoformat(spec["now"])
    ids: dict[str, str] = {}
    ages: list[tuple[str, str]] = []
    for session_id, days_ago, turns in SESSIONS:
        memory = Mnemosyne(session_id=session_id, db_path=db_path)
        start = session_start(now, days_ago)
        for position, (speaker, text, shared) in enumerate(turns):
            memory_id = memory.remember(
                text,
                source="user" if speaker == "user" else "conversation",
                importance=0.6 if speaker == "user" else 0.4,
                veracity="stated" if speaker == "user" else "unknown",
                scope="global" if shared else "session",
            )
            if memory_id:
                ids[text] = memory_id
                ages.append((memory_id, (start + timedelta(minutes=position)).isoformat()))
    backdate(db_path, ages)
    return ids


if __name__ == "__main__":
    child_main(_write)
