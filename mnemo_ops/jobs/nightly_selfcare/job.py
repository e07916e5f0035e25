"""nightly-selfcare: run the audits, record the day's row counts and the memory block entries' first
sightings, stage expired files, write the report.

Every audit only reads; the job's writes are the row counts and first-seen dates in state.db, files
moved into quarantine (never deleted) and ``reports/YYYY-MM-DD.md``. A dry run reports the same
findings and counts and changes nothing.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from mnemo_ops import database
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import DatabaseError
from mnemo_ops.jobs.nightly_selfcare import quarantine, report, report_render, row_count_history
from mnemo_ops.jobs.nightly_selfcare.audits import AUDIT_MODULES, run_audit
from mnemo_ops.memory_blocks import entry_history
from mnemo_ops.memory_blocks.blocks import BLOCK_NAMES, Block, read_block
from mnemo_ops.memory_blocks.limits import block_limits


@dataclasses.dataclass
class Staging:
    """What staging found and did (``stats.staging``): candidates by rule and their bytes, then the
    paths it would move (a dry run, or nothing to move) or the quarantine ids of those it moved
    (at most 50 of either)."""

    by_rule: dict[str, int]
    bytes: int
    files: list[str] | None = None
    ids: list[str] | None = None

    def to_stats(self) -> dict[str, Any]:
        """``stats.staging`` (``files`` or ``ids`` only once known)."""
        stats: dict[str, Any] = {"by_rule": self.by_rule, "bytes": self.bytes}
        if self.files is not None:
            stats["files"] = self.files
        if self.ids is not None:
            stats["ids"] = self.ids
        return stats


@dataclasses.dataclass
class ReportWritten:
    """The morning report (``stats.report``): its worst severity, its warnings, and the file it was
    written to (a real run)."""

    worst_severity: str | None
    warnings: int
    path: str | None = None

    def to_stats(self) -> dict[str, Any]:
        """``stats.report`` (``path`` only once the file is written)."""
        stats: dict[str, Any] = {"worst_severity": self.worst_severity, "warnings": self.warnings}
        if self.path is not None:
            stats["path"] = self.path
        return stats


def _audit(ctx: JobContext, now: datetime) -> None:
    for name in AUDIT_MODULES:
        outcome = run_audit(name, ctx.settings, now)
        ctx.result.warnings.extend(outcome.warnings)
        ctx.result.stats[name] = outcome.stats


def _record_row_counts(ctx: JobContext, now: datetime) -> None:
    """Today's row count per memory table, for the report's growth against a week ago."""
    try:
        connection = ctx.open_db(readonly=True)
    except DatabaseError as error:
        ctx.warn("row-counts-unavailable", f"row counts not recorded: {error.message}", "warning")
        return
    try:
        counts = database.row_counts(connection)
    finally:
        connection.close()
    day = now.date()
    ledger = ctx.open_state()
    try:
        changed = row_count_history.changed_counts(ledger, day, counts)
        ctx.result.stats["row_counts"] = {
            table: count for table, count in counts.items() if count is not None
        }
        ctx.count("row_counts_recorded", len(changed))
        if ctx.dry_run or not changed:
            return
        row_count_history.record(ledger, day, changed, isoformat(now))
    finally:
        if ledger is not None:
            ledger.close()


def _record_block_entries(ctx: JobContext, now: datetime) -> None:
    """First-seen dates of the memory blocks' entries (the files keep none): memory-block-migrate
    moves the oldest first. A block the audit could not read is left out (the audit reported it)."""
    folder = ctx.settings.memory_blocks_dir
    if folder.is_symlink():
        return
    limits = block_limits(ctx.settings)
    blocks = [read_block(folder / name, limits.of(name)) for name in BLOCK_NAMES]
    readable = [block for block in blocks if isinstance(block, Block)]
    ledger = ctx.open_state()
    try:
        fresh = {
            block.name: entry_history.unseen(ledger, block.name, block.entries)
            for block in readable
        }
        ctx.count("block_entries_recorded", sum(len(entries) for entries in fresh.values()))
        if ctx.dry_run:
            return
        for block in readable:
            if fresh[block.name]:
                entry_history.record_seen(ledger, block.name, block.entries, isoformat(now))
    finally:
        if ledger is not None:
            ledger.close()


def _stage_expired(ctx: JobContext, now: datetime) -> None:
    """Move files that the staging rules call expired into quarantine/<date>/."""
    if not ctx.settings.nightly_selfcare.staging.enabled:
        return
    rules = quarantine.staging_rules(ctx.settings)
    candidates, notes = quarantine.find_candidates(ctx.settings, rules, now)
    for note in notes:
        ctx.warn("staging-refused", note, "info")
    by_rule: dict[str, int] = {}
    for candidate in candidates:
        by_rule[candidate.rule] = by_rule.get(candidate.rule, 0) + 1
    staging = Staging(by_rule=by_rule, bytes=sum(candidate.size for candidate in candidates))
    ctx.count("files_staged", len(candidates))
    try:
        _repair_manifests(ctx)
        if ctx.dry_run or not candidates:
            staging.files = [str(candidate.path) for candidate in candidates[:50]]
            return
        staged, problems = quarantine.stage(ctx.settings, candidates, now)
        staging.ids = [entry["id"] for entry in staged[:50]]
    finally:  # what was found, even when moving it failed
        ctx.result.stats["staging"] = staging.to_stats()
    for problem in problems:
        ctx.warn(
            "staging-failed", f"not staged: {problem}", "warning", fix="mnemo-ops quarantine list"
        )
    if problems:
        ctx.result.changes["files_staged"] -= len(problems)


def _repair_manifests(ctx: JobContext) -> None:
    """Bring each quarantine day's manifest up to date with its entries (a killed run's leftovers)."""
    stale = quarantine.stale_day_manifests(ctx.settings)
    ctx.count("quarantine_manifests_repaired", len(stale))
    if ctx.dry_run or not stale:
        return
    quarantine.repair_day_manifests(stale)


def _write_report(ctx: JobContext) -> None:
    """The morning report, including this run's own findings (the ledger row comes after the job)."""
    built = report.build_report(ctx.settings, current=ctx.result)
    written = ReportWritten(worst_severity=built.worst_severity, warnings=len(built.warnings))
    ctx.count("reports_written", 1)
    try:
        if ctx.dry_run:
            return
        written.path = str(report_render.write_report_file(ctx.settings, built))
    finally:  # the report's figures, even when writing its file failed
        ctx.result.stats["report"] = written.to_stats()


def run(ctx: JobContext) -> JobResult:
    """Audit, record row counts and block entries, stage expired files, write the report."""
    now = utc_now()
    with ctx.progress.bar("nightly-selfcare", total=5) as bar:
        _audit(ctx, now)
        bar.advance()
        _record_row_counts(ctx, now)
        bar.advance()
        _record_block_entries(ctx, now)
        bar.advance()
        _stage_expired(ctx, now)
        bar.advance()
        _write_report(ctx)
        bar.advance()
    return ctx.result
