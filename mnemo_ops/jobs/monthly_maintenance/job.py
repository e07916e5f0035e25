"""monthly-maintenance: integrity audit of the memory database, then safe repairs and upkeep.

Order: ``PRAGMA integrity_check`` first. A database that fails it gets no writes at all: a critical
finding, exit 1, and the exact ``mnemo-ops backup restore NAME`` command for the newest verified
checkpoint. Otherwise every check runs read-only (mnemo_ops/jobs/monthly_maintenance/checks.py), the findings are
reported, and a real run applies the planned repairs (mnemo_ops/jobs/monthly_maintenance/repairs.py), then
``PRAGMA optimize``, bounded FTS5 merges and a passive WAL checkpoint; VACUUM only with ``--vacuum``.
A dry run reports the same findings and the same change counts, and changes nothing.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.checkpoints.catalog import newest_verified_checkpoint, restore_command
from mnemo_ops.core import disk_reserve as reserve
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.database import snapshot
from mnemo_ops.foundation.child_process import ChildProcessFailed
from mnemo_ops.foundation.errors import DatabaseError, MnemoOpsError
from mnemo_ops.jobs.monthly_maintenance import checks, repairs
from mnemo_ops.mnemosyne import vectors
from mnemo_ops.mnemosyne.embedding import load_embedder

_FTS_TABLE_IN_MESSAGE = re.compile(r'(?:table "|main\.)(\w+)')


def refuse_damaged(ctx: JobContext, problems: list[str]) -> JobResult:
    """No writes on a damaged file: one critical finding with the restore command, status failed (exit 1)."""
    name = newest_verified_checkpoint(ctx.settings.backups_dir)
    first = problems[0][:200]
    if name:
        advice = f"restore the newest verified checkpoint {name}"
        fix = restore_command(ctx.settings, name)
    else:
        advice = (
            f"no verified checkpoint was found in {ctx.settings.backups_dir}; "
            "copy the file aside before any repair"
        )
        fix = None
    ctx.warn(
        "integrity-check-failed",
        f"PRAGMA integrity_check problems: {len(problems)} (first: {first}); "
        f"nothing was written; {advice}",
        "critical",
        fix=fix,
    )
    ctx.result.stats["integrity_check"] = problems[:20]
    ctx.result.fail("the database failed PRAGMA integrity_check; no repair was attempted")
    return ctx.result


def _fts_tables(connection: apsw.Connection) -> list[str]:
    """FTS5 tables in the schema (the merge step and rebuilds apply to them)."""
    return [
        row[0]
        for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING fts5%' ORDER BY name"
        )
    ]


def _rebuilds_from_integrity_lines(lines: list[str], fts_tables: list[str]) -> list[str]:
    """FTS5 tables that PRAGMA integrity_check named as damaged."""
    named = {match for line in lines for match in _FTS_TABLE_IN_MESSAGE.findall(line)}
    return [table for table in fts_tables if table in named]


def _open_checker(ctx: JobContext, workspace: Path) -> apsw.Connection | None:
    """A writable connection for FTS5's integrity-check, on a private snapshot copy in `workspace`.

    The check is an INSERT command (always rolled back) and so holds the write lock for as long as
    it reads the whole index, which on a large home is longer than the live agent may be kept
    waiting (its busy timeout, and our own bound on a write transaction). On a copy made inside one
    read snapshot it blocks no one, and its verdict is the snapshot's; a damaged index is then
    rebuilt in the live file. The copy is skipped (the check too, with a note) when it would eat
    into the free space kept for the agent. None when no copy can be made.
    """
    if reserve.same_filesystem(workspace, ctx.settings.db_path.parent):
        space = reserve.free_space(
            ctx.settings, workspace, needed=reserve.database_bytes(ctx.settings)
        )
        if not space.enough:
            return None
    copy = workspace / "fts-check.db"
    try:
        snapshot.copy_snapshot(ctx.settings.db_path, copy)
        connection = database.connect(copy, readonly=False)
    except (DatabaseError, apsw.Error, OSError):
        return None
    return connection


def audit_database(
    ctx: JobContext,
    connection: apsw.Connection,
    options: dict[str, Any],
    integrity_fts_lines: list[str],
) -> checks.Audit:
    """Run the read-only audit and decide the vector repair (a model is looked for only when needed)."""
    with tempfile.TemporaryDirectory(prefix="mnemo-ops-fts-check-") as workspace:
        checker = _open_checker(ctx, Path(workspace))
        try:
            audit = checks.run_audit(connection, checker, options, ctx.dry_run)
        finally:
            if checker is not None:
                checker.close()
    for table in _rebuilds_from_integrity_lines(integrity_fts_lines, _fts_tables(connection)):
        if table not in audit.rebuild_tables:
            audit.rebuild_tables.append(table)
            audit.add(
                f"fts-{table.removeprefix('fts_')}-inconsistent",
                "error",
                f"{table}: PRAGMA integrity_check reports FTS5 damage; "
                f"{checks.outcome('rebuilt', ctx.dry_run)} with 'rebuild'",
            )
    planned = {closure.row_id for closure in audit.canonical_closures}
    audit.lineage_closures = [
        closure for closure in audit.lineage_closures if closure.row_id not in planned
    ]
    if audit.vectors_missing:
        audit.embedding_available = (
            load_embedder(ctx.settings.db_path, ctx.settings.hermes_home) is not None
        )
    counts = audit.vector_counts
    if counts is not None and (
        audit.vectors_missing or counts.unindexed_working or counts.unindexed_episodes
    ):
        # Asked only when something is missing: a child that loads Mnemosyne, not the database.
        audit.vector_writer = vectors.probe_writer(ctx.settings.db_path, ctx.settings.hermes_home)
    checks.vector_findings(audit, ctx.dry_run)
    return audit


def planned_changes(audit: checks.Audit) -> dict[str, int]:
    """The writes the repairs will make, by name (what a dry run reports)."""
    return {
        "fts_indexes_rebuilt": len(audit.rebuild_tables),
        "fts_entries_added": audit.fts_working.added,
        "fts_entries_removed": audit.fts_working.removed,
        "fts_entries_reindexed": audit.fts_working.reindexed,
        "canonical_duplicates_closed": len(audit.canonical_closures),
        "triples_closed": len(audit.triple_closures),
        "auto_lineages_closed": len(audit.lineage_closures),
        "vectors_reembedded": len(audit.vectors_missing) if audit.embedding_available else 0,
        "vectors_indexed": checks.planned_index_writes(audit)[0],
        "episode_vectors_added": checks.planned_index_writes(audit)[1],
    }


def apply_repairs(ctx: JobContext, audit: checks.Audit, options: dict[str, Any]) -> dict[str, int]:
    """Apply every planned repair and the upkeep; return the writes actually made."""
    done: dict[str, int] = dict.fromkeys(planned_changes(audit), 0)
    connection = ctx.open_db(readonly=False)
    try:
        for table in audit.rebuild_tables:
            repairs.rebuild_fts(connection, table)
            done["fts_indexes_rebuilt"] += 1
        plan = audit.fts_working
        with ctx.progress.bar("re-indexing fts_working", len(plan.ids)) as bar:
            counts = repairs.reconcile_fts_working(connection, plan, bar.advance)
        done["fts_entries_added"], done["fts_entries_removed"] = counts["added"], counts["removed"]
        done["fts_entries_reindexed"] = counts["reindexed"]
        done["canonical_duplicates_closed"] = repairs.apply_closures(
            connection, audit.canonical_closures
        )
        done["triples_closed"] = repairs.apply_closures(connection, audit.triple_closures)
        done["auto_lineages_closed"] = repairs.apply_closures(connection, audit.lineage_closures)
        if audit.vectors_missing and audit.embedding_available:
            done["vectors_reembedded"] = _reembed(ctx, connection, audit.vectors_missing)
        if any(checks.planned_index_writes(audit)):
            done["vectors_indexed"], done["episode_vectors_added"] = _index(ctx, audit)
        upkeep = repairs.optimize(
            connection,
            _fts_tables(connection),
            options.fts_merge_pages,
            options.fts_merge_max_steps,
        )
        try:
            if ctx.options.vacuum:
                repairs.vacuum(connection)
                upkeep.vacuum = True
        finally:  # a VACUUM that fails still leaves the upkeep's figures
            ctx.result.stats["maintenance"] = upkeep.to_stats()
    finally:
        connection.close()
    return done


def _reembed(ctx: JobContext, connection: apsw.Connection, memory_ids: list[str]) -> int:
    embedder = load_embedder(ctx.settings.db_path, ctx.settings.hermes_home)
    if embedder is None:
        return 0
    with ctx.progress.bar("re-embedding working rows", len(memory_ids)) as bar:
        stored, error = repairs.reembed_working_rows(connection, memory_ids, embedder, bar.advance)
    if error:  # the model failed: report it, keep what was stored and the other repairs
        ctx.warn(
            "vectors-reembed-failed", f"re-embedding stopped after {stored} rows: {error}", "error"
        )
    return stored


def _index(ctx: JobContext, audit: checks.Audit) -> tuple[int, int]:
    """Mirror stored embeddings into vec_working and embed the episodes without a vector, through
    Mnemosyne in a child process (it loads sqlite-vec; we never do)."""
    episodes = audit.vector_counts.unindexed_episodes if checks.episodes_embeddable(audit) else []
    batches = -(-len(episodes) // vectors.EPISODE_BATCH)
    with ctx.progress.bar("indexing vectors", 1 + batches) as bar:
        try:
            reply = vectors.write_vectors(
                ctx.settings.db_path,
                ctx.settings.hermes_home,
                episodes,
                timeout_s=None,
                progress=lambda data: bar.advance(1),
            )
        except ChildProcessFailed as error:
            ctx.warn("vectors-index-failed", f"writing sqlite-vec vectors failed: {error}", "error")
            return 0, 0
    if reply.get("error"):  # the model failed part-way: what was written stays
        ctx.warn(
            "vectors-index-failed",
            f"embedding episodes stopped after {reply['episodes_added']}: {reply['error']}",
            "error",
        )
    return int(reply["mirrored"]), int(reply["episodes_added"])


def preflight(ctx: JobContext) -> None:
    """Before the recall guard's trial: a database that fails ``integrity_check`` gets no writes.

    The finding (critical, with the restore command) is made here, on the live file, because a
    damaged file may not even copy for the trial. Raises MnemoOpsError (exit 1) to stop the run.
    """
    if ctx.dry_run:
        return  # the dry run's own audit reports it the same way
    # Opened as the job opens it (read-write, only read): the last connection to close removes the
    # WAL, where a read-only one would leave an empty WAL file beside the damaged database.
    connection = ctx.open_db()
    try:
        core_problems, _fts_lines = checks.sqlite_integrity(connection)
    finally:
        connection.close()
    if core_problems:
        refuse_damaged(ctx, core_problems)
        raise MnemoOpsError(ctx.result.error)


def run(ctx: JobContext) -> JobResult:
    """Audit, then (unless a dry run) repair and tidy the memory database."""
    options = ctx.options
    connection = ctx.open_db()
    try:
        core_problems, fts_lines = checks.sqlite_integrity(connection)
        if core_problems:
            return refuse_damaged(ctx, core_problems)
        ctx.result.stats["integrity_check"] = "ok" if not fts_lines else fts_lines[:20]
        audit = audit_database(ctx, connection, options, fts_lines)
    finally:
        connection.close()
    for finding in audit.findings:
        ctx.warn(finding.code, finding.message, finding.severity, fix=finding.fix)
    ctx.result.stats.update(audit.stats)
    ctx.result.stats["findings"] = len(audit.findings)
    if ctx.dry_run:
        for name, count in planned_changes(audit).items():
            if count:
                ctx.count(name, count)
        ctx.result.stats["maintenance_planned"] = [
            "optimize",
            "fts merge",
            "wal_checkpoint(PASSIVE)",
        ] + (["vacuum"] if ctx.options.vacuum else [])
        return ctx.result
    ctx.before_write()
    for name, count in apply_repairs(ctx, audit, options).items():
        if count:
            ctx.count(name, count)
    return ctx.result
