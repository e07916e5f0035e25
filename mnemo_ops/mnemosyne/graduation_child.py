"""Child process: write graduated rows through Mnemosyne's own API (``graduation`` describes the
request and the actions); one progress message per action done, then the meter's figures."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import child_main, send_progress
from mnemo_ops.mnemosyne.graduation import (
    LINEAGE_KEY,
    METADATA_KEY,
    SCOPE,
    SESSION,
    SOURCE,
    VERACITY,
)

LOCK_RETRY_ATTEMPTS = 8
LOCK_RETRY_BACKOFF_S = 0.05


class Writer:
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
        self.memory.beam.author_id = self.owner
        self.connection = sqlite3.connect(str(self.db_path), timeout=5.0, isolation_level=None)

    def close(self) -> None:
        from mnemo_ops.mnemosyne.api import close_mnemosyne_connections

        for connection in (self.memory.conn, self.memory.beam.conn):
            if connection.in_transaction:
                connection.commit()
        self.connection.close()
        close_mnemosyne_connections()

    def apply(self, action: dict[str, Any]) -> dict[str, Any]:
        if action["op"] == "store":
            return self.store(action)
        if action["op"] == "reinforce":
            return {"memory_id": action["memory_id"], "added": self.reinforce(action)}
        raise ValueError(f"unknown action {action['op']!r}")

    def _row_with_key(self, key: str) -> str | None:
        rows = self.connection.execute(
            "SELECT id FROM working_memory WHERE source = ? AND scope = ? AND json_valid(metadata_json) "
            f"AND json_extract(metadata_json, '$.{METADATA_KEY}.key') = ? "
            "AND (valid_until IS NULL OR valid_until = '') LIMIT 1",
            (SOURCE, SCOPE, key),
        ).fetchall()
        return rows[0][0] if rows else None

    def store(self, action: dict[str, Any]) -> dict[str, Any]:
        existing = self._row_with_key(action["key"])
        if existing is not None:
            return {"memory_id": existing, "existed": True}
        metadata = {
            LINEAGE_KEY: list(action["derived_from"]),
            METADATA_KEY: {
                "key": action["key"],
                "owner": self.owner,
                "night": action["night"],
                "said_on": action.get("said_on"),
                "confirmations": 0,
            },
        }
        memory_id = self._retry(
            lambda: self.memory.remember(
                action["content"],
                source=SOURCE,
                importance=float(action["importance"]),
                metadata=metadata,
                scope=SCOPE,
                veracity=VERACITY,
            ),
            self.memory.conn,
            self.memory.beam.conn,
        )
        if memory_id is None:
            return {"memory_id": None, "filtered": True}
        self._stamp_owner(memory_id)
        return {"memory_id": memory_id, "existed": False}

    def _stamp_owner(self, memory_id: str) -> None:
        """The owner as the row's author (Mnemosyne stamps the beam's author_id; older writes may not)."""
        from mnemo_ops.database import transactions

        def work(connection):
            connection.execute(
                "UPDATE working_memory SET author_id = ? WHERE id = ? AND author_id IS NOT ?",
                (self.owner, memory_id, self.owner),
            )

        transactions.write_batch(self.connection, work)

    def reinforce(self, action: dict[str, Any]) -> int:
        from mnemo_ops.database import transactions

        def work(connection):
            rows = connection.execute(
                "SELECT metadata_json FROM working_memory WHERE id = ?", (action["memory_id"],)
            ).fetchall()
            if not rows:
                return 0
            metadata = json.loads(rows[0][0] or "{}")
            lineage = list(metadata.get(LINEAGE_KEY) or [])
            new = [memory_id for memory_id in action["derived_from"] if memory_id not in lineage]
            if not new:
                return 0
            metadata[LINEAGE_KEY] = lineage + new
            graduation = metadata.setdefault(METADATA_KEY, {})
            graduation["confirmations"] = int(graduation.get("confirmations") or 0) + len(new)
            connection.execute(
                "UPDATE working_memory SET metadata_json = ? WHERE id = ?",
                (json.dumps(metadata), action["memory_id"]),
            )
            return len(new)

        return int(transactions.write_batch(self.connection, work) or 0)

    def _retry(self, write, *connections):
        from mnemo_ops.database import transactions

        for attempt in range(1, LOCK_RETRY_ATTEMPTS + 1):
            try:
                return write()
            except sqlite3.Error as error:
                for connection in connections:
                    if connection.in_transaction:
                        connection.rollback()
                if not transactions.is_busy_error(error) or attempt == LOCK_RETRY_ATTEMPTS:
                    raise
                time.sleep(LOCK_RETRY_BACKOFF_S * attempt)
        raise AssertionError("unreachable")


def apply_request(request: dict[str, Any]) -> dict[str, Any]:
    from mnemo_ops.database import transactions

    policy = transactions.Policy(**request["policy"]) if request.get("policy") else None
    with transactions.metered(policy) as meter:
        try:
            writer = Writer(request)
            try:
                for number, action in enumerate(request["actions"]):
                    send_progress({"done": number, **writer.apply(action)})
            finally:
                writer.close()
        except Exception:
            send_progress({"transactions": meter.figures()})
            raise
    return {"transactions": meter.figures()}


if __name__ == "__main__":
    child_main(apply_request)
