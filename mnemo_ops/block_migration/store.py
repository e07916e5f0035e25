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
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mnemo_ops.block_migration.stored_rows import METADATA_KEY
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.memory_blocks.blocks import USER_BLOCK
from mnemo_ops.settings import Settings
from mnemo_ops.settings.job_sections import MemoryBlockMigrateOptions

SESSION_PREFIX = "mnemo-ops-memory-blocks-"
MEMORY_SOURCE = "memory-block"
USER_SOURCE = "user"
WORKER_MODULE = "mnemo_ops.block_migration.store_worker"


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
    """Store `entries` in ``settings.db_path`` through the worker; key -> outcome."""
    if not entries:
        return {}
    request = {
        "db_path": str(settings.db_path),
        "hermes_home": str(settings.hermes_home),
        "session_id": session_id,
        "initialise": initialise,
        "parent_pid": os.getpid(),
        "entries": [entry.request(options, moved_at) for entry in entries],
    }
    environment = dict(os.environ)
    # Importing Mnemosyne initialises a database at its default path: aim it at this database.
    environment["MNEMOSYNE_DATA_DIR"] = str(Path(settings.db_path).parent)
    environment["HERMES_HOME"] = str(settings.hermes_home)
    reply = _run_worker(request, environment)
    return {
        item["key"]: StoreOutcome(item["key"], item["outcome"], item.get("memory_id"))
        for item in reply["outcomes"]
    }


def _run_worker(request: dict[str, Any], environment: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryFile("w+") as request_file, tempfile.TemporaryFile("w+") as errors:
        json.dump(request, request_file)
        request_file.seek(0)
        process = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE],
            stdin=request_file,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=environment,
            text=True,
            close_fds=True,  # the writer lock is never inherited
        )
        final: dict[str, Any] | None = None
        try:
            for line in process.stdout:
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "result" in message or "error" in message:
                    final = message
            process.wait()
        finally:
            if process.poll() is None:  # the job timed out or was interrupted: stop the child too
                process.kill()
                process.wait()
        errors.seek(0)
        tail = errors.read()[-2000:].strip().splitlines()
    if final is None or "error" in final:
        detail = final["error"] if final else (tail[-1] if tail else f"exit {process.returncode}")
        raise MnemoOpsError(f"storing memory block entries through Mnemosyne failed: {detail}")
    return final["result"]
