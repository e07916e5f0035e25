"""One bridge-drain run over the spool: parse each file, ingest its valid items (or, in a dry run,
predict exactly what the real run would do), and move the file to ``cur/`` or ``failed/``."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from typing import Any

import apsw

from mnemo_ops.core.context import JobContext
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.jobs.bridge_drain.ingest import KEYS_TABLE, Ingestor, KnownRow, content_exists
from mnemo_ops.jobs.bridge_drain.items import FileRejected, Item, RejectedItem, parse_file
from mnemo_ops.jobs.bridge_drain.spool import Spool
from mnemo_ops.mnemosyne.api import filter_reason
from mnemo_ops.settings.job_sections import BridgeDrainOptions

REJECTION_WARNINGS_SHOWN = 20  # one warning per problem, then a summary line
MAX_AGENT_SHARE = 0.9


def pause_after(options: BridgeDrainOptions, busy_s: float) -> float:
    """How long to pause after an item whose writes took `busy_s`, so the live agent gets its share.

    Each remember is a dozen short write transactions back to back; a waiting agent polls the lock
    at growing intervals (SQLite's busy handler), so without free stretches it can wait out its
    5 s timeout, and Mnemosyne leaves its connection failing from then on.
    """
    share = min(options.agent_share, MAX_AGENT_SHARE)
    return busy_s * share / (1 - share)


@dataclasses.dataclass
class Drain:
    """One run over the spool: what is known, what was done, and the pending state.db records."""

    ctx: JobContext
    spool: Spool
    limits: BridgeDrainOptions
    connection: apsw.Connection | sqlite3.Connection  # apsw while planning, sqlite3 while ingesting
    known: dict[str, KnownRow]
    merged: set[str]
    state_db: Any = None
    ingestor: Ingestor | None = None
    planned_contents: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    rejections_reported: int = 0

    def reject(self, message: str) -> None:
        """A warning per rejected file or item (the first few), so the report names file and field."""
        self.rejections_reported += 1
        if self.rejections_reported <= REJECTION_WARNINGS_SHOWN:
            self.ctx.warn("bridge-rejected", message, severity="warning")

    def drain_file(self, name: str) -> None:
        """Parse, ingest and move one file (or, in a dry run, count what would happen)."""
        now = isoformat(utc_now())
        try:
            parsed = parse_file(
                name,
                self.spool.read(name, self.limits.max_file_bytes),
                self.limits.max_item_bytes,
                self.limits.max_file_bytes,
                self.limits.default_session,
            )
        except FileRejected as rejection:
            self.ctx.count("files_rejected")
            self.reject(f"{name}: rejected whole: {rejection.reason}")
            if not self.ctx.dry_run:
                self.spool.reject_file(name, rejection.reason, now)
            return
        rejected = list(parsed.rejected)
        records: list[dict[str, Any]] = []
        for item in parsed.items:
            problem = self.ingest(item, name, records)
            if problem is not None:
                rejected.append(RejectedItem(item.position, (problem,), item.original))
        rejected.sort(key=lambda entry: entry.position)
        for entry in rejected:
            self.reject(entry.describe(name))
        self.ctx.count("items_rejected", len(rejected))
        self.ctx.count("files_drained")
        if self.ctx.dry_run:
            return
        self.record(records)
        if rejected:
            self.spool.write_rejected_items(name, rejected, now)
        self.spool.mark_drained(name)

    def ingest(self, item: Item, file_name: str, records: list[dict[str, Any]]) -> str | None:
        """Ingest one valid item (or predict it in a dry run); return a rejection reason or None."""
        known = self.known.get(item.idempotency_key)
        if known is not None or item.idempotency_key in self.merged:
            self.ctx.count("duplicates_skipped")
            if known is not None and item.memory_type and known.memory_type != item.memory_type:
                if not self.ctx.dry_run:
                    self.ingestor.set_memory_type(known.memory_id, item.memory_type)
                known.memory_type = item.memory_type
            if known is not None and not known.has_legacy_row:
                self.ctx.count("legacy_rows_repaired")
                if not self.ctx.dry_run:
                    self.ingestor.repair_legacy_row(known.memory_id)
                known.has_legacy_row = True
            return None
        if self.ctx.dry_run:
            reason = filter_reason(item.content)
            if reason is not None:
                return f"Mnemosyne's write filter refused it ({reason})"
            signature = (item.session_id, item.content)
            merged = signature in self.planned_contents or content_exists(
                self.connection, *signature
            )
            self.planned_contents.add(signature)
            self.known[item.idempotency_key] = KnownRow("(dry run)", item.memory_type)
            self.ctx.count("items_merged" if merged else "items_ingested")
            return None
        started = time.monotonic()
        outcome, memory_id = self.ingestor.remember(item, file_name)
        time.sleep(pause_after(self.limits, time.monotonic() - started))
        if outcome == "filtered":
            return (
                f"Mnemosyne's write filter refused it ({filter_reason(item.content) or 'rejected'})"
            )
        if outcome == "ingested":
            self.known[item.idempotency_key] = KnownRow(memory_id, item.memory_type)
        else:
            self.merged.add(item.idempotency_key)
        self.ctx.count("items_" + outcome)
        record = {
            "key": item.idempotency_key,
            "memory_id": memory_id,
            "session_id": item.session_id,
            "outcome": outcome,
            "file": file_name,
            "position": item.position,
            "ingested_at": isoformat(utc_now()),
        }
        if outcome == "merged":
            # state.db is the only place a merged item's key lives: record it at once, so a kill later
            # in the file cannot make the next run merge it (refresh the row) a second time.
            self.record([record])
        else:
            records.append(record)
        return None

    def record(self, records: list[dict[str, Any]]) -> None:
        """Index the file's keys in state.db (merged ones live only there; the DB row is the truth
        for ingested ones)."""
        if records and self.state_db is not None:
            with self.state_db.conn:
                self.state_db[KEYS_TABLE].insert_all(records, ignore=True)
