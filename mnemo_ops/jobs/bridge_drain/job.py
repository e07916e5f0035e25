"""bridge-drain: ingest captured items from the Maildir-style spool into Mnemosyne, exactly once.

The work lives in ``mnemo_ops.jobs.bridge_drain``: ``items`` (parse and validate), ``spool`` (Maildir),
``ingest`` (through Mnemosyne's remember, keys stored with the rows) and ``drain`` (one run).
"""

from __future__ import annotations

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.jobs.bridge_drain.drain import REJECTION_WARNINGS_SHOWN, Drain
from mnemo_ops.jobs.bridge_drain.ingest import (
    KEYS,
    Ingestor,
    keys_in_database,
    merged_keys_in_state,
    open_ingest_connection,
)
from mnemo_ops.jobs.bridge_drain.spool import Spool
from mnemo_ops.mnemosyne.api import live_schema_gaps

COUNTS = (
    "files_drained",
    "items_ingested",
    "items_merged",
    "duplicates_skipped",
    "items_rejected",
    "files_rejected",
)
"""Every count is always present in ``changes`` (zero when nothing happened)."""


def run(ctx: JobContext) -> JobResult:
    """Drain ``<state_dir>/queue/new``: ingest valid items, move files to cur/ or failed/."""
    for name in COUNTS:
        ctx.count(name, 0)
    spool = Spool(ctx.settings.queue_dir)
    spool.check()
    names = spool.pending()
    ctx.result.stats["files_pending"] = len(names)
    if not names:
        return ctx.result
    connection = ctx.open_db()
    state_db = ctx.open_state()
    drain = None
    try:
        drain = Drain(
            ctx=ctx,
            spool=spool,
            limits=ctx.options,
            connection=connection,
            known=keys_in_database(connection),
            merged=merged_keys_in_state(state_db),
        )
        if not ctx.dry_run:
            spool.ensure()
            KEYS.ensure(state_db)
            drain.state_db = state_db
            schema_gaps = live_schema_gaps(connection)
            # apsw bundles its own SQLite; Mnemosyne uses Python's sqlite3 (the system one). Two SQLite
            # libraries must never have one database open in the same process: they cannot see each
            # other's locks, so closing one deletes the WAL under the other, whose later writes are
            # then lost. So apsw is closed before Mnemosyne opens, and the ingest reads and writes
            # through Python's sqlite3 only.
            connection.close()
            connection = drain.connection = open_ingest_connection(ctx.settings.db_path)
            drain.ingestor = Ingestor(ctx, connection, schema_gaps)
        # Counted in items, not files: one file may hold one item or thousands.
        # Read twice only for a person watching: a scheduled run shows nothing.
        shown = ctx.progress.enabled
        with ctx.progress.spinner("bridge-drain: counting the spool's items"):
            counts = {name: drain.items_in(name) for name in names} if shown else {}
        with ctx.progress.bar(
            "bridge-drain: items", total=sum(counts.values()) if shown else None
        ) as bar:
            for name in names:
                done = bar.record.completed
                try:
                    drain.drain_file(name, bar.advance)
                except OSError as error:  # e.g. a file removed under us: report it, keep going
                    ctx.warn("bridge-file-error", f"{name}: {error}", severity="error")
                    bar.advance(max(0, counts.get(name, 0) - (bar.record.completed - done)))
        if drain.rejections_reported > REJECTION_WARNINGS_SHOWN:
            ctx.warn(
                "bridge-rejected",
                f"... and {drain.rejections_reported - REJECTION_WARNINGS_SHOWN} more "
                f"rejections; see {spool.folder('failed')}/*.error.json",
                severity="warning",
            )
    finally:
        if drain is not None and drain.ingestor is not None:
            drain.ingestor.close()
        connection.close()
        if state_db is not None:
            state_db.close()
    if any(warning.severity == "error" for warning in ctx.result.warnings):
        raise MnemoOpsError(
            "some spool files could not be processed (see warnings); they stay in queue/new"
        )
    return ctx.result
