"""memory-maintain: the canonical promotion backstop, then orphan linking (docs/jobs/memory-maintain.md).

Options: the ``memory_maintain`` section (``settings.job_sections.MemoryMaintainOptions``: ``k``,
``min_score``, ``max_rows_per_run``, ``batch_size``, ``full_round_days``, ``match_budget``,
``link``, ``backstop_max_rows``), also as ``--option KEY=VALUE`` for one run.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from mnemo_ops import database
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.database import fts_segments
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now
from mnemo_ops.guard.recall_guard import is_marked_not_needed, mark_not_needed
from mnemo_ops.jobs.memory_maintain import backstop, orphans, trigger

CURSOR_TABLE = "memory_maintain_cursor"


def link_options(ctx: JobContext) -> orphans.LinkOptions:
    """Linking options from the job's resolved section (``--option`` over config over defaults)."""
    return orphans.LinkOptions(
        k=ctx.options.k,
        min_score=ctx.options.min_score,
        max_rows=ctx.options.max_rows_per_run,
        batch_size=ctx.options.batch_size,
        match_budget=ctx.options.match_budget or None,
    )


@dataclasses.dataclass
class LinkState:
    """Where linking stands for this database (state.db ``memory_maintain_cursor``).

    - `last_id`: inside a full round, the id after which the next run resumes ("" : no round open);
    - `high_water`: the highest working rowid covered by completed work; incremental passes start
      after it (None: no round completed yet);
    - `full_round_at`: when the last full round started (ISO UTC);
    - `round_mark`: the highest rowid when the open full round started (its high water once done);
    - `backstop_mark`, `backstop_full_at`: the same for the canonical backstop (the rowid its last
      pass covered, and when its last full pass ran).
    """

    last_id: str = ""
    high_water: int | None = None
    full_round_at: str | None = None
    round_mark: int | None = None
    backstop_mark: int | None = None
    backstop_full_at: str | None = None


def _integer(value: Any) -> int | None:
    return None if value is None else int(value)


def _read_state(ctx: JobContext) -> LinkState:
    state = ctx.open_state()
    if state is None:
        return LinkState()
    try:
        if CURSOR_TABLE not in state.table_names():
            return LinkState()
        rows = list(
            state.query(f"SELECT * FROM {CURSOR_TABLE} WHERE db = ?", [ctx.settings.database_key])
        )
        if not rows:
            return LinkState()
        row = rows[0]
        return LinkState(
            last_id=row.get("last_id") or "",
            high_water=_integer(row.get("high_water")),
            full_round_at=row.get("full_round_at"),
            round_mark=_integer(row.get("round_mark")),
            backstop_mark=_integer(row.get("backstop_mark")),
            backstop_full_at=row.get("backstop_full_at"),
        )
    finally:
        state.close()


def _state_writer(ctx: JobContext):
    """A function saving the link state to state.db after each committed batch (real runs only)."""
    state = ctx.open_state()
    columns = {"db": str, "last_id": str, "updated_at": str, "high_water": int}
    columns.update({"full_round_at": str, "round_mark": int})
    columns.update({"backstop_mark": int, "backstop_full_at": str})
    table = state[CURSOR_TABLE]
    table.create(columns, pk="db", if_not_exists=True)
    for name, kind in columns.items():  # a table from an earlier version gains the new columns
        if name not in table.columns_dict:
            table.add_column(name, kind)

    def save(link_state: LinkState) -> None:
        record = dataclasses.asdict(link_state)
        record.update({"db": ctx.settings.database_key, "updated_at": isoformat(utc_now())})
        table.upsert(record, pk="db")

    return state, save


def _older_than_a_round(ctx: JobContext, stamp: str | None) -> bool:
    days = ctx.options.full_round_days
    if days == 0 or stamp is None:
        return True
    return utc_now() - datetime.fromisoformat(stamp) >= timedelta(days=days)


def _full_round_due(ctx: JobContext, link_state: LinkState) -> bool:
    """A full round when none completed yet, one is open, or the last started too long ago."""
    if link_state.high_water is None or link_state.last_id:
        return True
    return _older_than_a_round(ctx, link_state.full_round_at)


def _owner(ctx: JobContext, connection) -> tuple[str, bool]:
    """The lineages' owner, and whether the installed trigger is complete and current."""
    installed = trigger.status(connection)
    if not installed.installed:
        ctx.warn(
            "canonical-trigger-missing",
            "the canonical promotion trigger is not installed; only this backstop promotes new facts",
            severity="info",
            fix="mnemo-ops trigger install",
        )
        return ctx.settings.owner, False
    if not installed.up_to_date:
        ctx.warn(
            "canonical-trigger-outdated",
            f"the canonical promotion trigger is incomplete or version {installed.version} "
            f"(current {trigger.TRIGGER_VERSION})",
            fix="mnemo-ops trigger install",
        )
    return installed.owner or ctx.settings.owner, installed.up_to_date


@dataclasses.dataclass(frozen=True)
class CanonicalPass:
    """The backstop's pass (``stats.canonical``): whose lineages, incremental or full, what its
    plan found, and the share of it this run changes (``backstop_max_rows``)."""

    owner: str
    incremental: bool
    plan: backstop.BackstopPlan
    this_run: backstop.BackstopPlan

    def to_stats(self) -> dict[str, Any]:
        """``stats.canonical``: owner, mode, the plan's counts, then ``this_run``."""
        return {
            "owner": self.owner,
            "mode": "incremental" if self.incremental else "full",
            **self.plan.to_stats(),
            "this_run": self.this_run.size,
        }


def _backstop(ctx: JobContext, connection) -> None:
    owner, trigger_current = _owner(ctx, connection)
    now = local_timestamp()
    link_state = _read_state(ctx)
    mark = orphans.highest_rowid(connection)
    # With a current trigger, what it cannot see is only what came before it and closures by time:
    # a full pass every full_round_days finds those; the runs between look at new rows only, so a
    # run with nothing new costs nothing whatever the size (without the trigger: always full).
    incremental = (
        trigger_current
        and link_state.backstop_mark is not None
        and not _older_than_a_round(ctx, link_state.backstop_full_at)
    )
    plan = backstop.plan(
        connection, owner, now, after_rowid=link_state.backstop_mark if incremental else None
    )
    if plan.slot_taken:
        ctx.warn(
            "canonical-slot-taken",
            f"{len(plan.slot_taken)} qualifying row(s) not promoted: another current fact holds their "
            f"auto slot (first: {plan.slot_taken[0]})",
            severity="info",
        )
    # A large history that predates the trigger (on a big home, a large share of its facts) is
    # worked off over several runs: each run's share is bounded, and the marks below move only once
    # a pass is complete.
    this_run = plan.limited(ctx.options.backstop_max_rows)
    capped = this_run.size < plan.size
    ctx.result.stats["canonical"] = CanonicalPass(
        owner=owner, incremental=incremental, plan=plan, this_run=this_run
    ).to_stats()
    if capped:
        ctx.warn(
            "canonical-backstop-capped",
            f"the backstop changes {this_run.size} of {plan.size} canonical facts this run "
            "(backstop_max_rows); the next run goes on",
            severity="info",
        )
    if ctx.dry_run:
        ctx.count("canonical_closed", len(this_run.close))
        ctx.count("canonical_promoted", len(this_run.promote))
        return
    if this_run.size:
        ctx.before_write()
    closed, promoted = backstop.apply(connection, owner, this_run, now)
    ctx.count("canonical_closed", closed)
    ctx.count("canonical_promoted", promoted)
    if capped:
        return
    # Only a pass with the trigger in place may start the incremental ones (the mark says that
    # every row up to it has been seen by the trigger or by this backstop).
    state, save = _state_writer(ctx)
    try:
        fresh = _read_state(ctx)
        fresh.backstop_mark = mark if trigger_current else None
        if not incremental:
            fresh.backstop_full_at = isoformat(utc_now())
        save(fresh)
    finally:
        state.close()


MERGED_INDEXES = ("fts_working", "fts_episodes")
"""The FTS5 indexes linking looks terms and matches up in."""


def _merge_segments(ctx: JobContext, connection) -> None:
    """Merge the indexes linking reads when they have too many segments (bounded steps).

    Linking's lookups read every segment of an index, so its cost per orphan follows the segment
    count (database/fts_segments.py). A dry run only says what it would merge. The merge is a
    write: the pre-write checkpoint comes first.
    """
    above = ctx.options.fts_merge_above_segments
    if not above:
        return
    present = database.table_names(connection)
    counts = {
        table: fts_segments.segment_count(connection, table)
        for table in MERGED_INDEXES
        if table in present and f"{table}_idx" in present
    }
    crowded = {table: count for table, count in counts.items() if count > above}
    stats: dict[str, Any] = {"segments": counts, "above": above}
    ctx.result.stats["fts_merge"] = stats
    if not crowded or ctx.dry_run:
        stats["planned"] = sorted(crowded)
        return
    ctx.before_write()
    stats["merged"] = {
        table: fts_segments.merge_segments(
            connection, table, ctx.options.fts_merge_pages, ctx.options.fts_merge_max_steps
        ).to_stats()
        for table in crowded
    }


def _link(ctx: JobContext, connection, options: orphans.LinkOptions) -> None:
    missing = {"graph_edges", "fts_working"} - database.table_names(connection)
    if missing:
        ctx.warn(
            "orphan-linking-unavailable",
            f"no orphan linking: the database has no {', '.join(sorted(missing))} table",
            severity="warning",
        )
        return
    _merge_segments(ctx, connection)
    link_state = _read_state(ctx)
    full = _full_round_due(ctx, link_state)
    resumed_after = (link_state.last_id if full else None) or None
    now = local_timestamp()
    # The mark is read before the pass: rows added while it runs are the next pass's.
    mark = orphans.highest_rowid(connection)
    if full and not link_state.last_id:  # a new full round starts here
        link_state.round_mark, link_state.full_round_at = mark, isoformat(utc_now())
    state = save = None
    if not ctx.dry_run:
        state, save = _state_writer(ctx)

    def after_commit(totals: orphans.LinkTotals) -> None:
        if full:
            link_state.last_id = totals.cursor
        else:
            link_state.high_water = totals.last_rowid
        save(link_state)

    try:
        after_rowid = None if full else link_state.high_water
        found = orphans.count_orphans(connection, now, after_rowid)
        with ctx.progress.bar("linking orphan memories", total=min(found, options.max_rows)) as bar:
            totals = orphans.link_orphans(
                orphans.LinkRun(
                    connection=connection,
                    options=options,
                    dry_run=ctx.dry_run,
                    start_after=link_state.last_id if full else "",
                    before_write=ctx.before_write,
                    after_commit=after_commit if save is not None else None,
                    progress=bar,
                    orphans_found=found,
                    after_rowid=after_rowid,
                )
            )
        if totals.completed_round:
            link_state.last_id = ""
            link_state.high_water = (
                max(link_state.round_mark or 0, link_state.high_water or 0) if full else mark
            )
        elif full:
            link_state.last_id = totals.cursor
        else:
            link_state.high_water = totals.last_rowid
        if save is not None:
            save(link_state)
    finally:
        if state is not None:
            state.close()
    ctx.count("edges_created", totals.edges_created)
    stats: dict[str, Any] = totals.to_stats()
    stats.update(
        {
            "mode": "full" if full else "incremental",
            "k": options.k,
            "min_score": options.min_score,
            "max_rows": options.max_rows,
            "match_budget": options.match_budget,
            "resumed_after": resumed_after,
            "high_water": link_state.high_water,
        }
    )
    ctx.result.stats["linking"] = stats
    if not totals.completed_round:
        ctx.warn(
            "orphan-linking-capped",
            f"stopped after {options.max_rows} orphans (max_rows); the next run resumes there",
            severity="info",
        )


def preflight(ctx: JobContext) -> None:
    """Nothing new since the last passes: the recall guard makes no trial.

    Between full passes both halves are incremental and look only at rows past their rowid marks
    (the backstop only while the trigger is current); with no row past either mark the run changes
    nothing, and the trial's two whole-file copies would be its whole cost (minutes on a large
    home under load, where the run itself is over in a moment).
    """
    link_state = _read_state(ctx)
    connection = ctx.open_db(readonly=True)
    try:
        installed = trigger.status(connection)
        backstop_incremental = (
            installed.installed
            and installed.up_to_date
            and link_state.backstop_mark is not None
            and not _older_than_a_round(ctx, link_state.backstop_full_at)
        )
        linking_incremental = not ctx.options.link or not _full_round_due(ctx, link_state)
        if not (backstop_incremental and linking_incremental):
            return
        marks = [link_state.backstop_mark]
        if ctx.options.link:
            marks.append(link_state.high_water)
        if orphans.highest_rowid(connection) <= min(marks):
            mark_not_needed(ctx, "no memory added since the last passes")
    finally:
        connection.close()


def run(ctx: JobContext) -> JobResult:
    """Promote what the trigger missed, then link orphans; every write in short BEGIN IMMEDIATE batches."""
    if is_marked_not_needed(ctx):
        # Nothing was new when `preflight` looked; rows the agent adds meanwhile wait for the
        # next run, which tries them under the guard (nothing is written here without a trial).
        for name in ("canonical_closed", "canonical_promoted", "edges_created"):
            ctx.count(name, 0)
        return ctx.result
    options = link_options(ctx)
    connection = ctx.open_db()
    try:
        _backstop(ctx, connection)
        if ctx.options.link:
            _link(ctx, connection, options)
        else:
            # Mnemosyne's plain recall (the Hermes plugin's) never follows these edges but pays
            # for every one of them (docs/jobs/memory-maintain.md, "Orphan linking and the agent's recall").
            ctx.result.stats["linking"] = {"mode": "off"}
            ctx.warn(
                "orphan-linking-off",
                "orphan linking is off (memory_maintain.link: false)",
                severity="info",
            )
    finally:
        connection.close()
    ctx.count("canonical_closed", 0)
    ctx.count("canonical_promoted", 0)
    ctx.count("edges_created", 0)
    return ctx.result
