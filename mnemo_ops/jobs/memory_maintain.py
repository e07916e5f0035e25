"""memory-maintain: the canonical promotion backstop, then orphan linking (DESIGN section 4).

Options: the ``memory_maintain`` section of the settings schema (``k``, ``min_score``,
``max_rows_per_run``, ``batch_size``, ``match_budget``), also as ``--option KEY=VALUE`` for one run.
"""

from __future__ import annotations

from typing import Any

from mnemo_ops import database
from mnemo_ops.canonical import backstop, trigger
from mnemo_ops.core.clock import isoformat, local_timestamp, utc_now
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.linking import orphans

CURSOR_TABLE = "memory_maintain_cursor"


def link_options(ctx: JobContext) -> orphans.LinkOptions:
    """Linking options from the job's resolved section (``--option`` over config over defaults)."""
    return orphans.LinkOptions(
        k=ctx.options["k"],
        min_score=ctx.options["min_score"],
        max_rows=ctx.options["max_rows_per_run"],
        batch_size=ctx.options["batch_size"],
        match_budget=ctx.options["match_budget"] or None,
    )


def _read_cursor(ctx: JobContext) -> str:
    state = ctx.open_state()
    if state is None:
        return ""
    try:
        if CURSOR_TABLE not in state.table_names():
            return ""
        rows = list(
            state.query(
                f"SELECT last_id FROM {CURSOR_TABLE} WHERE db = ?", [str(ctx.settings.db_path)]
            )
        )
        return rows[0]["last_id"] if rows else ""
    finally:
        state.close()


def _cursor_writer(ctx: JobContext):
    """A function saving the cursor to state.db after each committed batch (real runs only)."""
    state = ctx.open_state()
    state[CURSOR_TABLE].create(
        {"db": str, "last_id": str, "updated_at": str}, pk="db", if_not_exists=True
    )

    def save(cursor: str) -> None:
        state[CURSOR_TABLE].upsert(
            {
                "db": str(ctx.settings.db_path),
                "last_id": cursor,
                "updated_at": isoformat(utc_now()),
            },
            pk="db",
        )

    return state, save


def _owner(ctx: JobContext, connection) -> str:
    installed = trigger.status(connection)
    if not installed.installed:
        ctx.warn(
            "canonical-trigger-missing",
            "the canonical promotion trigger is not installed; only this backstop promotes new facts",
            severity="info",
            fix="mnemo-ops trigger install",
        )
        return ctx.settings.owner
    if not installed.up_to_date:
        ctx.warn(
            "canonical-trigger-outdated",
            f"the canonical promotion trigger is incomplete or version {installed.version} "
            f"(current {trigger.TRIGGER_VERSION})",
            fix="mnemo-ops trigger install",
        )
    return installed.owner or ctx.settings.owner


def _backstop(ctx: JobContext, connection) -> None:
    owner = _owner(ctx, connection)
    now = local_timestamp()
    plan = backstop.plan(connection, owner, now)
    ctx.result.stats["canonical"] = {"owner": owner, **plan.to_stats()}
    if plan.slot_taken:
        ctx.warn(
            "canonical-slot-taken",
            f"{len(plan.slot_taken)} qualifying row(s) not promoted: another current fact holds their "
            f"auto slot (first: {plan.slot_taken[0]})",
            severity="info",
        )
    if ctx.dry_run:
        ctx.count("canonical_closed", len(plan.close))
        ctx.count("canonical_promoted", len(plan.promote))
        return
    if plan.close or plan.promote:
        ctx.before_write()
    closed, promoted = backstop.apply(connection, owner, plan, now)
    ctx.count("canonical_closed", closed)
    ctx.count("canonical_promoted", promoted)


def _link(ctx: JobContext, connection, options: orphans.LinkOptions) -> None:
    missing = {"graph_edges", "fts_working"} - database.table_names(connection)
    if missing:
        ctx.warn(
            "orphan-linking-unavailable",
            f"no orphan linking: the database has no {', '.join(sorted(missing))} table",
            severity="warning",
        )
        return
    start_after = _read_cursor(ctx)
    state = save = None
    if not ctx.dry_run:
        state, save = _cursor_writer(ctx)
    try:
        found = orphans.count_orphans(connection, local_timestamp())
        with ctx.progress.bar("linking orphan memories", total=min(found, options.max_rows)) as bar:
            totals = orphans.link_orphans(
                orphans.LinkRun(
                    connection=connection,
                    options=options,
                    dry_run=ctx.dry_run,
                    start_after=start_after,
                    before_write=ctx.before_write,
                    after_commit=save,
                    progress=bar,
                    orphans_found=found,
                )
            )
        if save is not None:
            save(totals.cursor)
    finally:
        if state is not None:
            state.close()
    ctx.count("edges_created", totals.edges_created)
    stats: dict[str, Any] = totals.to_stats()
    stats.update(
        {
            "k": options.k,
            "min_score": options.min_score,
            "max_rows": options.max_rows,
            "resumed_after": start_after or None,
        }
    )
    ctx.result.stats["linking"] = stats
    if not totals.completed_round:
        ctx.warn(
            "orphan-linking-capped",
            f"stopped after {options.max_rows} orphans (max_rows); the next run resumes there",
            severity="info",
        )


def run(ctx: JobContext) -> JobResult:
    """Promote what the trigger missed, then link orphans; every write in short BEGIN IMMEDIATE batches."""
    options = link_options(ctx)
    connection = ctx.open_db()
    try:
        _backstop(ctx, connection)
        _link(ctx, connection, options)
    finally:
        connection.close()
    ctx.count("canonical_closed", 0)
    ctx.count("canonical_promoted", 0)
    ctx.count("edges_created", 0)
    return ctx.result
