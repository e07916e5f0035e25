"""Child process: write graduated rows through Mnemosyne's own API (``graduation`` describes the
request and the actions); one progress message per action done, then the meter's figures.

Each action is idempotent or checked before it is made, so a run killed anywhere and started again
converges: a row is stored once (found by its graduation key before the write and before each retry
after a lock error), a reinforcement adds only source ids not yet in the lineage, a supersession
closes only a row still open, a derives edge is inserted only when missing. Every write is its own
short transaction; after each action the child pauses as long as it took, so the live agent gets
its share of the write lock.
"""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import child_main, send_progress
from mnemo_ops.mnemosyne.graduation import (
    CONTRADICTS,
    DERIVES,
    LINEAGE_KEY,
    METADATA_KEY,
    SCOPE,
    SESSION,
    SOURCE,
    VERACITY,
)

AGENT_SHARE = 1.0
"""After each action, pause this share of the time it took, so the agent gets the write lock too."""


class Writer:
    """The plan's writes: rows through ``Mnemosyne.remember``, lineage, edges and closes with short
    ``BEGIN IMMEDIATE`` transactions on a connection of its own."""

    def __init__(self, request: dict[str, Any]):
        from mnemo_ops.mnemosyne import api

        self.db_path = Path(request["db_path"])
        self.owner = request["owner"]
        probe = sqlite3.connect(f"{self.db_path.absolute().as_uri()}?mode=ro", uri=True)
        try:
            gaps = api.live_schema_gaps(probe)
        finally:
            probe.close()
        self.memory = api.open_mnemosyne(self.db_path, session_id=SESSION, initialise=bool(gaps))
        # Mnemosyne stamps the beam's author on every row it writes: the owner's row is the owner's.
        self.memory.beam.author_id = self.owner
        self.connection = sqlite3.connect(str(self.db_path), timeout=5.0, isolation_level=None)

    def close(self) -> None:
        """Commit whatever Mnemosyne left pending and close every connection."""
        from mnemo_ops.mnemosyne import writes
        from mnemo_ops.mnemosyne.api import close_mnemosyne_connections

        writes.end_transactions(writes.mnemosyne_connections(self.memory))
        self.connection.close()
        close_mnemosyne_connections()

    def apply(self, action: dict[str, Any]) -> dict[str, Any]:
        """Do one action; return what happened."""
        if action["op"] == "store":
            return self.store(action)
        if action["op"] == "reinforce":
            added = self.reinforce(action["memory_id"], action["derived_from"])
            return {"memory_id": action["memory_id"], "added": added}
        if action["op"] == "supersede":
            return self.supersede(action)
        raise ValueError(f"unknown action {action['op']!r}")

    def _row_with_key(self, key: str) -> str | None:
        """The row stored for `key` before (a killed run, or an attempt before a lock error)."""
        rows = self.connection.execute(
            "SELECT id FROM working_memory WHERE source = ? AND scope = ? AND json_valid(metadata_json) "
            f"AND json_extract(metadata_json, '$.{METADATA_KEY}.key') = ? ORDER BY rowid LIMIT 1",
            (SOURCE, SCOPE, key),
        ).fetchall()
        return rows[0][0] if rows else None

    def store(self, action: dict[str, Any]) -> dict[str, Any]:
        """Store one graduated row (once), owner-stamped, with its lineage and derives edges."""
        from mnemo_ops.mnemosyne import writes

        existing = self._row_with_key(action["key"])
        memory_id = existing
        if memory_id is None:
            metadata = {
                LINEAGE_KEY: list(action["derived_from"]),
                "method": action.get("method"),
                METADATA_KEY: {
                    "key": action["key"],
                    "owner": self.owner,
                    "night": action["night"],
                    "said_on": action.get("said_on"),
                    # Each source past the first is a restatement of the same fact.
                    "confirmations": max(0, len(action["derived_from"]) - 1),
                },
            }
            written = writes.write_once(
                lambda: self.memory.remember(
                    action["content"],
                    source=SOURCE,
                    importance=float(action["importance"]),
                    metadata=metadata,
                    scope=SCOPE,
                    veracity=VERACITY,
                ),
                lambda: writes.mnemosyne_connections(self.memory),
                find=lambda: self._row_with_key(action["key"]),
            )
            memory_id = written.value
            if written.found is not None:
                writes.repair_legacy_row(self.connection, written.found)
                memory_id = written.found
        if memory_id is None:
            return {"memory_id": None, "filtered": True}
        self._stamp(memory_id, action["derived_from"])
        return {"memory_id": memory_id, "existed": existing is not None}

    def _stamp(self, memory_id: str, sources: list[str]) -> None:
        """The owner as the row's author (a line that does not stamp the beam's author) and a
        derives edge to each source."""
        from mnemo_ops.database import transactions

        now = datetime.now().isoformat()

        def work(connection):
            connection.execute(
                "UPDATE working_memory SET author_id = ? WHERE id = ? AND author_id IS NOT ?",
                (self.owner, memory_id, self.owner),
            )
            for source in sources:
                _edge(connection, memory_id, source, DERIVES, now)

        transactions.write_batch(self.connection, work)

    def reinforce(self, memory_id: str, sources: list[str]) -> int:
        """Add restating rows to a graduated row's lineage (a confirmation each); how many were new."""
        from mnemo_ops.database import transactions

        now = datetime.now().isoformat()

        def work(connection):
            rows = connection.execute(
                "SELECT metadata_json FROM working_memory WHERE id = ?", (memory_id,)
            ).fetchall()
            if not rows:
                return 0
            metadata = json.loads(rows[0][0] or "{}")
            lineage = list(metadata.get(LINEAGE_KEY) or [])
            new = [source for source in sources if source not in lineage]
            if not new:
                return 0
            metadata[LINEAGE_KEY] = lineage + new
            graduation = metadata.setdefault(METADATA_KEY, {})
            graduation["confirmations"] = int(graduation.get("confirmations") or 0) + len(new)
            connection.execute(
                "UPDATE working_memory SET metadata_json = ? WHERE id = ?",
                (json.dumps(metadata), memory_id),
            )
            for source in new:
                _edge(connection, memory_id, source, DERIVES, now)
            return len(new)

        return int(transactions.write_batch(self.connection, work) or 0)

    def supersede(self, action: dict[str, Any]) -> dict[str, Any]:
        """Close a graduated row whose fact changed, pointing to the newer graduated row."""
        from mnemo_ops.database import transactions
        from mnemo_ops.mnemosyne import versions

        memory_id = action["memory_id"]
        newer = action.get("replaced_by") or self._row_with_key(action["key"])
        if newer == memory_id:
            newer = None
        now = versions.memory_time(datetime.now())  # the installed line's time base

        def work(connection):
            cursor = connection.execute(
                "UPDATE working_memory SET valid_until = ?, superseded_by = ? WHERE id = ? "
                "AND (valid_until IS NULL OR valid_until = '') "
                "AND (superseded_by IS NULL OR superseded_by = '')",
                (now, newer, memory_id),
            )
            if cursor.rowcount and newer:
                _edge(connection, newer, memory_id, CONTRADICTS, now)
            return cursor.rowcount

        closed = int(transactions.write_batch(self.connection, work) or 0)
        return {"memory_id": memory_id, "closed": closed, "replaced_by": newer}


def _edge(connection, source: str, target: str, edge_type: str, now: str) -> None:
    """One edge of ours, unless that (source, target, type) exists."""
    connection.execute(
        "INSERT INTO graph_edges (source, target, edge_type, weight, timestamp) "
        "SELECT ?1, ?2, ?3, 1.0, ?4 WHERE NOT EXISTS (SELECT 1 FROM graph_edges "
        "WHERE source = ?1 AND target = ?2 AND edge_type = ?3)",
        (source, target, edge_type, now),
    )


def apply_request(request: dict[str, Any]) -> dict[str, Any]:
    """Apply the request's actions in order (a progress message each); the meter's figures."""
    from mnemo_ops.database import transactions

    policy = transactions.Policy(**request["policy"]) if request.get("policy") else None
    with transactions.metered(policy) as meter:
        try:
            writer = Writer(request)
            try:
                for number, action in enumerate(request["actions"]):
                    started = time.monotonic()
                    send_progress({"done": number, **writer.apply(action)})
                    time.sleep(min(1.0, AGENT_SHARE * (time.monotonic() - started)))
            finally:
                writer.close()
        except Exception:
            send_progress({"transactions": meter.figures()})
            raise
    return {"transactions": meter.figures()}


if __name__ == "__main__":
    child_main(apply_request)
