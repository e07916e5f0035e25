"""Store block entries in the memory database through Mnemosyne's API, in a child process.

What is stored for an entry (its text, verbatim, as the row's content):

- USER.md: source ``user``, veracity ``stated`` (what the user told the agent), importance
  ``memory_block_migrate.user_importance`` (0.8): the canonical promotion trigger makes each one a
  canonical fact (it takes ``user`` + ``stated`` + importance >= 0.7).
- MEMORY.md: the agent's own notes: source ``memory-block``, veracity ``inferred``, importance
  ``memory_block_migrate.memory_importance`` (0.7); never promoted as user-stated.
- scope ``global``: a block is in the system prompt of every session, so what replaces it must be
  reachable from every session (Mnemosyne's recall reads the current session's rows and the global
  ones), and each run stores into a session of its own (``mnemo-ops-memory-blocks-<time>``), so
  Mnemosyne's trim of a session's old rows (run by its remember) never reaches earlier runs' rows.
- metadata ``_memory_block``: the key (exactly once), the block, and when the entry was first seen.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import ChildProcessFailed, run_child
from mnemo_ops.jobs.memory_block_migrate.stored_rows import METADATA_KEY
from mnemo_ops.memory_blocks.blocks import USER_BLOCK
from mnemo_ops.mnemosyne.api import mnemosyne_environment
from mnemo_ops.settings import Settings
from mnemo_ops.settings.job_sections import MemoryBlockMigrateOptions

SESSION_PREFIX = "mnemo-ops-memory-blocks-"
MEMORY_SOURCE = "memory-block"
USER_SOURCE = "user"
WORKER_MODULE = "mnemo_ops.jobs.memory_block_migrate.store_worker"


@dataclasses.dataclass(frozen=True)
class EntryToStore:
    """One entry on its way into the database."""

    block: str
    key: str
    text: str
    first_seen: str | None

    def request(self, options: MemoryBlockMigrateOptions, moved_at: str) -> dict[str, Any]:
        """The worker's request item: content, source, veracity, importance and metadata."""
        user = self.block == USER_BLOCK
        return {
            "key": self.key,
            "content": self.text,
            "source": USER_SOURCE if user else MEMORY_SOURCE,
            "veracity": "stated" if user else "inferred",
            "importance": options.user_importance if user else options.memory_importance,
            "metadata": {
                METADATA_KEY: {
                    "key": self.key,
                    "block": self.block,
                    "first_seen": self.first_seen,
                    "stored_at": moved_at,
                    "by": "mnemo-ops memory-block-migrate",
                }
            },
        }


@dataclasses.dataclass(frozen=True)
class StoreOutcome:
    """``stored`` (now), ``already-stored`` (by an earlier run), ``filtered`` (Mnemosyne's write
    filter refused it) or ``merged`` (Mnemosyne folded it into a row without our key)."""

    key: str
    outcome: str
    memory_id: str | None


def session_for_run(stamp: str) -> str:
    """The session a run stores into (one per run; see the module docstring)."""
    return f"{SESSION_PREFIX}{stamp}"


def store_entries(
    settings: Settings,
    entries: list[EntryToStore],
    options: MemoryBlockMigrateOptions,
    session_id: str,
    moved_at: str,
    initialise: bool,
) -> dict[str, StoreOutcome]:
    """Store `entries` in ``settings.db_path`` through the worker; key -> outcome.

    No timeout of its own: the job's manifest timeout interrupts the wait, and the worker's process
    group is ended with it (a worker killed by the job's own kill dies with the job too).
    """
    if not entries:
        return {}
    request = {
        "db_path": str(settings.db_path),
        "hermes_home": str(settings.hermes_home),
        "session_id": session_id,
        "initialise": initialise,
        "entries": [entry.request(options, moved_at) for entry in entries],
    }
    try:
        # Importing Mnemosyne initialises a database at its default path: aim it at this database.
        reply = run_child(
            WORKER_MODULE,
            request,
            timeout=None,
            environment=mnemosyne_environment(Path(settings.db_path).parent, settings.hermes_home),
        )
    except ChildProcessFailed as error:
        raise error.with_context("storing memory block entries through Mnemosyne") from None
    return {
        item["key"]: StoreOutcome(item["key"], item["outcome"], item.get("memory_id"))
        for item in reply["outcomes"]
    }
