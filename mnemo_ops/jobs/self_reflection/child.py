"""Child process: apply a self-reflection plan through Mnemosyne's own API; one JSON line per action.

The parent chooses the environment (MNEMOSYNE_DATA_DIR, HERMES_HOME) before this process imports
Mnemosyne, and holds no connection of its own to the database while it runs (one SQLite library per
process per database: this process uses only Python's sqlite3, Mnemosyne's). Run through
``foundation.child_process``: the request is ``{"db_path", "owner", "session_id", "actions",
"policy"}``; a progress message per action done (``{"done": i, "op", ...}``), then the result
``{"transactions": ...}`` (on a failure, the figures come in a last progress message before the
error).

Each action is idempotent or checked before it is made, so a run killed anywhere and started again
converges: a lesson row is stored once (the next run finds it by its slot), a close only closes what
is still open, a canonical fact is written only when its body differs (Mnemosyne's CanonicalStore
leaves an identical body unchanged), and a reinforcement adds only evidence ids not yet there.
"""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import child_main, send_progress

AGENT_SHARE = 0.5
"""After each action, pause as long as it took, so the live agent gets its share of the write lock."""


class Writer:
    """The plan's writes: lessons through ``Mnemosyne.remember``, canonical facts through Mnemosyne's
    ``CanonicalStore``, stamps and metadata with short ``BEGIN IMMEDIATE`` transactions."""

    def __init__(self, request: dict[str, Any]):
        from mnemo_ops.mnemosyne import api as mnemosyne_api

        self.db_path = Path(request["db_path"])
        self.owner = request["owner"]
        self.session_id = request["session_id"]
        probe = sqlite3.connect(f"{self.db_path.absolute().as_uri()}?mode=ro", uri=True)
        try:
            self.schema_gaps = mnemosyne_api.live_schema_gaps(probe)
        finally:
            probe.close()
        self.memory = mnemosyne_api.open_mnemosyne(
            self.db_path, session_id=self.session_id, initialise=bool(self.schema_gaps)
        )
        self.connection = sqlite3.connect(str(self.db_path), timeout=5.0, isolation_level=None)
        self._canonical = None

    def close(self) -> None:
        """Commit whatever Mnemosyne left pending and close every connection."""
        from mnemo_ops.mnemosyne import writes
        from mnemo_ops.mnemosyne.api import close_mnemosyne_connections

        writes.end_transactions(writes.mnemosyne_connections(self.memory))
        if self._canonical is not None:
            self._canonical.conn.close()
        self.connection.close()
        close_mnemosyne_connections()

    # ------------------------------------------------------------------------------ actions

    def apply(self, action: dict[str, Any]) -> dict[str, Any]:
        """Do one action; return what happened."""
        operation = action["op"]
        if operation == "store":
            return self.store(action)
        if operation == "reinforce":
            return {"reinforced": self.reinforce(action)}
        if operation == "close":
            return {"closed": self.close_row(action["memory_id"], action["superseded_by"])}
        if operation == "canonical":
            return {"canonical": self.canonical(action, action["memory_id"])}
        raise ValueError(f"unknown action {operation!r}")

    def store(self, action: dict[str, Any]) -> dict[str, Any]:
        """Store a lesson, close the lessons it supersedes, write its canonical fact.

        The lesson is looked up by its key before it is stored and again before each retry after a
        lock error (``mnemosyne.writes.write_once``): an attempt that committed the row before the
        error (Mnemosyne 3.15 commits the row, then its legacy row) is found, not stored twice, and
        its legacy row written if missing.
        """
        from mnemo_ops.jobs.self_reflection.lessons import SOURCE, TRUST_TIER, VERACITY
        from mnemo_ops.mnemosyne import writes

        existing = self._row_with_key(action["key"])
        memory_id = existing
        if memory_id is None:
            written = writes.write_once(
                lambda: self.memory.remember(
                    action["content"],
                    source=SOURCE,
                    importance=float(action["importance"]),
                    metadata=action["metadata"],
                    scope="global",
                    veracity=VERACITY,
                    trust_tier=TRUST_TIER,
                ),
                lambda: writes.mnemosyne_connections(self.memory),
                find=lambda: self._row_with_key(action["key"]),
            )
            memory_id = written.value
            if written.found is not None:
                writes.repair_legacy_row(self.connection, written.found)
                memory_id = written.found
        if memory_id is None:
            return {"filtered": True}
        closed = sum(self.close_row(old, memory_id) for old in action.get("closes") or [])
        fact = self.canonical(action["canonical"], memory_id) if action.get("canonical") else None
        return {
            "memory_id": memory_id,
            "existed": existing is not None,
            "closed": closed,
            "canonical": fact,
        }

    def _row_with_key(self, key: str) -> str | None:
        """A live lesson row of this run's session already holding `key` (a retry after a lock error)."""
        from mnemo_ops.jobs.self_reflection.lessons import METADATA_MARKER, SOURCE

        row = self.connection.execute(
            "SELECT id FROM working_memory WHERE session_id = ? AND source = ? AND json_valid(metadata_json) "
            "AND json_extract(metadata_json, '$.\"' || ? || '\".key') = ? LIMIT 1",
            (self.session_id, SOURCE, METADATA_MARKER, key),
        ).fetchall()
        return row[0][0] if row else None

    def close_row(self, memory_id: str, superseded_by: str) -> int:
        """Close a lesson that a newer one replaces (only if it is still open); 1 when closed."""
        from mnemo_ops.database import transactions
        from mnemo_ops.mnemosyne import versions

        now = versions.memory_time(datetime.now())  # the installed line's time base

        def work(connection):
            cursor = connection.execute(
                "UPDATE working_memory SET valid_until = ?, superseded_by = ? WHERE id = ? AND "
                "(valid_until IS NULL OR valid_until > ?) AND (superseded_by IS NULL OR superseded_by = '')",
                (now, superseded_by, memory_id, now),
            )
            return cursor.rowcount

        return int(transactions.write_batch(self.connection, work) or 0)

    def reinforce(self, action: dict[str, Any]) -> int:
        """Add new evidence ids to a stored lesson (a confirmation each); returns how many were new."""
        from mnemo_ops.database import transactions

        now = datetime.now().isoformat()
        lists = {"m": "memories", "h": "messages", "e": "summaries"}

        def work(connection):
            rows = connection.execute(
                "SELECT metadata_json FROM working_memory WHERE id = ?", (action["memory_id"],)
            ).fetchall()
            if not rows:
                return 0
            metadata = json.loads(rows[0][0] or "{}")
            added = 0
            for ref in action["evidence"]:
                prefix, _, identifier = ref.partition(":")
                name = lists.get(prefix)
                if name is None or identifier in (metadata.get(name) or []):
                    continue
                metadata[name] = sorted({*(metadata.get(name) or []), identifier})
                added += 1
            if not added:
                return 0
            metadata["sessions"] = sorted({*(metadata.get("sessions") or []), *action["sessions"]})
            metadata["confirmations"] = sum(
                len(metadata.get(name) or []) for name in lists.values()
            )
            metadata["last_confirmed"] = now
            metadata["weeks"] = sorted({*(metadata.get("weeks") or []), action["week"]})
            connection.execute(
                "UPDATE working_memory SET metadata_json = ?, importance = MAX(importance, ?) WHERE id = ?",
                (json.dumps(metadata), float(action["importance"]), action["memory_id"]),
            )
            return added

        return int(transactions.write_batch(self.connection, work))

    def canonical(self, fact: dict[str, Any], memory_id: str) -> str:
        """Mnemosyne's canonical upsert: created, unchanged, or updated (old row closed, version + 1).

        Retried while the database is locked (``mnemosyne.writes.write_once``) with no lookup: the
        upsert is idempotent by itself (an identical body leaves the fact unchanged).
        """
        from mnemo_ops.mnemosyne import writes
        from mnemo_ops.mnemosyne.api import open_canonical_store

        if self._canonical is None:
            self._canonical = open_canonical_store(self.db_path)
        store = self._canonical
        written = writes.write_once(
            lambda: store.remember(
                self.owner,
                fact["category"],
                fact["name"],
                fact["body"],
                source=f"reflection:{memory_id}",
                confidence=0.7,
            ),
            lambda: [store.conn],
            find=None,
        )
        return str(written.value.get("status"))


def apply_request(request: dict[str, Any]) -> dict[str, Any]:
    """Apply each action of the request (a progress message each); return the meter's figures.

    Our own write transactions are metered under the run's policy (``request["policy"]``) and their
    figures sent back, so the run's ``stats.transactions`` counts them.
    """
    from mnemo_ops.database import transactions

    policy = (
        transactions.Policy(**request["policy"]) if request.get("policy") else None
    )  # None: the schema defaults
    with transactions.metered(policy) as meter:
        try:
            writer = Writer(request)
            try:
                for number, action in enumerate(request["actions"]):
                    started = time.monotonic()
                    outcome = writer.apply(action)
                    send_progress({"done": number, "op": action["op"], **outcome})
                    # Mnemosyne's own writes in this action get the agent's pause too.
                    pause = (time.monotonic() - started) * AGENT_SHARE
                    meter.paused_s += pause
                    time.sleep(pause)
            finally:
                writer.close()
        except Exception:
            # The transactions made before the failure still count in the run's stats.
            send_progress({"transactions": meter.figures()})
            raise
    return {"transactions": meter.figures()}


if __name__ == "__main__":
    child_main(apply_request)
