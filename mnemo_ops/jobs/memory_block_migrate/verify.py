"""Verify that each stored entry comes back when recalled by its own text, as the agent would get it.

Recall goes through the eval's Mnemosyne engine (``evaluation.engines.mnemosyne``: a child process on
a snapshot copy, so the recall counters it bumps never touch the live database), with the profile
``memory_block_migrate.recall_profile``: ``hermes`` by default, what the Hermes plugin injects each
turn (plain recall with top 16, the low-relevance cut, the first 5), since the agent sees nothing
else once an entry has left its block.

In which session: Mnemosyne's recall reads the rows of the query's session and the ``global`` ones
(cross-session recall is off unless configured), and the Hermes plugin recalls in the session of the
conversation. Which conversation comes next is unknown, so an entry must come back in both:

- the agent's latest session: the conversation most likely to go on, with its own rows competing
  against the entry. The Hermes plugin names its sessions ``hermes_<key>`` (the gateway's session
  key, e.g. one per Telegram topic, else Hermes' session id; mnemosyne-hermes in 3.15.1 and
  4.0.0b6), so the newest such session is taken; without one, the session of the newest row
  written by anyone but mnemo-ops;
- a session with no rows of its own, named the plugin's way: the next new conversation, which sees
  the global rows only.

A returned item counts when it is the entry's row, or a row whose text is the entry's text.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mnemo_ops.evaluation.engines.base import Query
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
from mnemo_ops.guard.measure import cutoff_for
from mnemo_ops.settings import Settings

HERMES_SESSION_PREFIX = "hermes_"
"""How the Hermes plugin names the sessions it recalls in (``hermes_<session key>``)."""
NEW_SESSION = f"{HERMES_SESSION_PREFIX}mnemo-ops-verify-new-conversation"
"""A session id nobody writes: what a new conversation sees."""


@dataclasses.dataclass(frozen=True)
class ToVerify:
    """A stored entry to recall."""

    key: str
    memory_id: str
    text: str


@dataclasses.dataclass(frozen=True)
class Verification:
    """The rank at which each session got the entry back (None: not within the cutoff)."""

    key: str
    ranks: dict[str, int | None]

    @property
    def recalled(self) -> bool:
        """Every session got it back."""
        return all(rank is not None for rank in self.ranks.values())


def agent_session(connection, excluded_prefix: str) -> str | None:
    """The Hermes plugin's newest session, else the session of the newest working memory not
    written by mnemo-ops (sessions starting with `excluded_prefix`); None when there is none."""
    query = (
        "SELECT session_id FROM working_memory WHERE session_id IS NOT NULL "
        "AND substr(session_id, 1, length(?1)) <> ?1 AND session_id <> ?2 {only} "
        "ORDER BY timestamp DESC LIMIT 1"
    )
    for only in ("AND substr(session_id, 1, length(?3)) = ?3", ""):
        rows = connection.execute(
            query.format(only=only),
            (excluded_prefix, NEW_SESSION, HERMES_SESSION_PREFIX)
            if only
            else (excluded_prefix, NEW_SESSION),
        ).fetchall()
        if rows:
            return rows[0][0]
    return None


def sessions_to_verify(latest_agent_session: str | None) -> list[str]:
    """The agent's latest session (when there is one) and a new conversation's."""
    return [session for session in (latest_agent_session, NEW_SESSION) if session]


def _same_text(returned: str, text: str) -> bool:
    return " ".join((returned or "").split()) == " ".join(text.split())


def verify(
    settings: Settings,
    db_path: Path,
    items: list[ToVerify],
    sessions: list[str],
    profile: str,
) -> tuple[dict[str, Verification], dict]:
    """Recall each item by its text in each session; (key -> verification, the engine's description)."""
    engine = MnemosyneEngine.from_settings(settings, db_path=db_path, profile=profile)
    cutoff = cutoff_for(settings, engine)
    if not items:
        return {}, engine.describe()
    queries = [
        Query(text=item.text, k=cutoff, session=session) for session in sessions for item in items
    ]
    ranked = engine.recall_many(queries)
    results: dict[str, Verification] = {}
    for index, item in enumerate(items):
        ranks: dict[str, int | None] = {}
        for number, session in enumerate(sessions):
            returned = ranked[number * len(items) + index][:cutoff]
            ranks[session] = next(
                (
                    rank
                    for rank, found in enumerate(returned, start=1)
                    if found.id == item.memory_id or _same_text(found.content, item.text)
                ),
                None,
            )
        results[item.key] = Verification(item.key, ranks)
    description = engine.describe()
    description["cutoff"] = cutoff
    return results, description
