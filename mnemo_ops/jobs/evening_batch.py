"""evening-batch: episodic consolidation, then the topic map and the seed map, then freshness checks.

The steps run in order. A failing step is recorded with its error and the later steps still run;
the job then fails (exit 1) with every step's error collected, as borgmatic does, so monitoring sees
it. The sleep stages of DESIGN section 5 (decay, forgetting, Hebbian/downscaling, NREM, REM) slot in
as further steps between consolidation and the topic map.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

from mnemo_ops.consolidation import episodic
from mnemo_ops.core.clock import isoformat, utc_now
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.errors import JobTimeout, MnemoOpsError
from mnemo_ops.core.results import JobResult
from mnemo_ops.topics import freshness, report, seeds, store
from mnemo_ops.topics.changes import diff_since_map
from mnemo_ops.topics.clustering import (
    MapChanges,
    MapOptions,
    TermExtractor,
    TopicMap,
    build_full,
    update_incremental,
)
from mnemo_ops.topics.memories import LiveMemory, canonical_backed_keys, load_live_memories


@dataclasses.dataclass
class BatchState:
    """What steps hand on to later steps within one run."""

    topic_map: TopicMap | None = None
    changes: MapChanges | None = None
    memories: dict[str, LiveMemory] | None = None


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the batch: a name and a function of (context, batch state)."""

    name: str
    function: Callable[[JobContext, BatchState], None]


def map_options(ctx: JobContext) -> MapOptions:
    """The topic-map tuning from the config file."""
    return MapOptions(
        min_topic_size=int(ctx.options["min_topic_size"]),
        terms_per_memory=int(ctx.options["terms_per_memory"]),
        max_topic_share=float(ctx.options["max_topic_share"]),
        label_similarity=float(ctx.options["label_similarity"]),
    )


# --- step 1: consolidation -------------------------------------------------------------------------


def consolidation_step(ctx: JobContext, batch: BatchState) -> None:
    """Mnemosyne's own ``sleep_all_sessions`` (with ``reclaim_orphans`` first), counts into `changes`."""
    stale_seconds = int(ctx.options["reclaim_stale_seconds"])
    connection = ctx.open_db(readonly=True)
    try:
        pending = episodic.pending_work(connection, stale_seconds)
    finally:
        connection.close()
    ctx.result.stats["consolidation"] = {"cutoff": episodic.sleep_cutoff(), **pending}
    if not pending["eligible"] and not pending["orphan_claims"]:
        ctx.count("items_consolidated", 0)
        ctx.count("summaries_created", 0)
        return
    if not ctx.dry_run:
        ctx.before_write()
    summary = episodic.run_sleep(
        ctx.settings.db_path,
        ctx.settings.hermes_home,
        dry_run=ctx.dry_run,
        model=str(ctx.options["consolidation_model"]),
        reclaim_stale_seconds=stale_seconds,
        timeout_s=ctx.manifest.timeout,
    )
    for name in (
        "items_consolidated",
        "summaries_created",
        "claims_reclaimed",
        "conflicts_resolved",
        "episodic_degraded",
    ):
        ctx.count(name, int(summary.get(name, 0) or 0))
    ctx.result.stats["consolidation"].update(
        {
            key: summary.get(key)
            for key in (
                "status",
                "model",
                "methods",
                "sessions_scanned",
                "sessions_consolidated",
                "llm_used",
                "model_refresh",
            )
        }
    )
    if summary.get("errors"):
        details = "; ".join(
            f"{item.get('session_id')}: {item.get('error')}" for item in summary["errors"]
        )
        raise MnemoOpsError(
            f"Mnemosyne sleep failed for {len(summary['errors'])} session(s): {details}"
        )


# --- step 2: topic map -----------------------------------------------------------------------------


def topic_map_step(ctx: JobContext, batch: BatchState) -> None:
    """Cluster live memories by salient terms; incremental unless ``--rebuild`` or too much changed."""
    options = map_options(ctx)
    with _open_state(ctx) as db:
        connection = ctx.open_db(readonly=True)
        try:
            rebuild = ctx.options["rebuild"]
            diff = diff_since_map(connection, ctx.settings.state_db_path)
            previous = store.load_map(db, with_members=rebuild) if diff is not None else None
            extractor = TermExtractor(connection)
            if rebuild or previous is None or diff.share > float(ctx.options["stale_fraction"]):
                if previous is not None and not rebuild:
                    previous = store.load_map(
                        db, with_members=True
                    )  # to count what the rebuild changes
                memories = load_live_memories(connection)
                batch.memories = memories
                with ctx.progress.bar("topic map: salient terms", total=len(memories)) as bar:
                    topic_map, changes = build_full(
                        memories, extractor, options, previous, progress=bar
                    )
            else:
                topic_map, changes = update_incremental(previous, diff, extractor, options)
        finally:
            connection.close()
        batch.topic_map, batch.changes = topic_map, changes
        ctx.result.stats["topic_map"] = {
            "mode": changes.mode,
            "live_memories": changes.live_memories,
            "changed_memories": changes.changed_memories,
            "removed_memories": changes.removed_memories,
            "topics": len(topic_map.topics),
            "unclustered": sum(1 for label in topic_map.assignments.values() if label is None),
        }
        nothing_new = (
            changes.mode == "incremental" and not changes.changed_keys and not changes.removed_keys
        )
        ctx.count("topics_created", len(changes.created))
        ctx.count("topics_updated", len(changes.updated))
        ctx.count("topics_removed", len(changes.removed))
        ctx.count(
            "memories_mapped",
            0 if nothing_new else len(changes.changed_keys) + len(changes.removed_keys),
        )
        if nothing_new or ctx.dry_run:
            return
        store.save_map(db, topic_map, changes, options.label_terms, isoformat(utc_now()))
        _render(ctx, db)


# --- step 3: seed map ------------------------------------------------------------------------------


def seed_map_step(ctx: JobContext, batch: BatchState) -> None:
    """Per topic its strongest memories: canonical-backed first, then importance, recall count, recency."""
    with _open_state(ctx) as db:
        connection = ctx.open_db(readonly=True)
        try:
            assignments = _current_assignments(db, batch)
            if assignments is None:
                ctx.warn(
                    "seed-map-skipped", "no topic map to build the seed map on", severity="info"
                )
                return
            memories = batch.memories or load_live_memories(connection)
            backed = canonical_backed_keys(connection, memories)
        finally:
            connection.close()
        fresh = seeds.build_seed_map(
            assignments, memories, backed, int(ctx.options["seeds_per_topic"])
        )
        changed, removed = seeds.seed_changes(store.load_seeds(db), fresh)
        ctx.result.stats["seed_map"] = {"topics": len(fresh), "canonical_backed": len(backed)}
        ctx.count("seed_topics_updated", len(changed))
        ctx.count("seed_topics_removed", len(removed))
        never_built = store.load_build(db, store.SEED_MAP) is None
        if ctx.dry_run or (not changed and not removed and not never_built):
            return
        store.save_seeds(db, fresh, changed, removed, len(memories), isoformat(utc_now()))
        _render(ctx, db)


def _current_assignments(db, batch: BatchState) -> dict[str, str | None] | None:
    """Memory key -> topic of the map as this run left it (in a dry run: stored map plus computed update)."""
    if batch.topic_map is not None and batch.changes is not None and batch.changes.mode == "full":
        return batch.topic_map.assignments
    if store.load_build(db, store.TOPIC_MAP) is None:
        return None
    assignments = store.load_assignments(db)
    if (
        batch.topic_map is not None and batch.changes is not None
    ):  # a dry run did not store its update
        for key in batch.changes.removed_keys:
            assignments.pop(key, None)
        assignments.update(
            {key: batch.topic_map.assignments.get(key) for key in batch.changes.changed_keys}
        )
    return assignments


# --- step 4: freshness -----------------------------------------------------------------------------


def freshness_step(ctx: JobContext, batch: BatchState) -> None:
    """Warn about stale maps (e.g. after a failed step) and memory-block entries of superseded facts."""
    with _open_state(ctx) as db:
        connection = ctx.open_db(readonly=True)
        try:
            findings, figures = freshness.map_staleness(
                diff_since_map(connection, ctx.settings.state_db_path),
                store.load_build(db, store.TOPIC_MAP),
                store.load_build(db, store.SEED_MAP),
                float(ctx.options["stale_fraction"]),
            )
            if ctx.dry_run and batch.topic_map is not None:
                # A dry run computed the maps without storing them: the real run would leave them fresh.
                findings = []
            findings += freshness.stale_block_entries(
                connection,
                ctx.settings.memory_blocks_dir,
                ctx.settings.owner,
                float(ctx.options["block_match_similarity"]),
            )
        finally:
            connection.close()
    ctx.result.stats["freshness"] = figures
    for finding in findings:
        ctx.warn(finding.code, finding.message, severity=finding.severity, fix=finding.fix)


def _render(ctx: JobContext, db) -> None:
    if report.write_report(ctx.settings.reports_dir, report.render_markdown(report.maps_data(db))):
        ctx.count("reports_written", 1)


@contextlib.contextmanager
def _open_state(ctx: JobContext) -> Iterator[Any]:
    """state.db for the step (read-only, maybe None, in a dry run), closed whatever happens."""
    db = ctx.open_state()
    if db is not None and not ctx.dry_run:
        store.ensure_tables(db)
    try:
        yield db
    finally:
        if db is not None:
            db.conn.close()


STEPS: tuple[Step, ...] = (
    Step("consolidation", consolidation_step),
    # The sleep stages of DESIGN section 5 go here, each its own Step, so they see the new episodic rows
    # and the maps below see what they changed.
    Step("topic-map", topic_map_step),
    Step("seed-map", seed_map_step),
    Step("freshness", freshness_step),
)


def run_steps(ctx: JobContext, steps: tuple[Step, ...] = STEPS) -> JobResult:
    """Run `steps` in order, collecting failures; fail the result (exit 1) if any step failed."""
    batch = BatchState()
    outcomes: list[dict[str, Any]] = []
    errors: list[str] = []
    for step in steps:
        started = time.monotonic()
        outcome: dict[str, Any] = {"name": step.name, "status": "ok", "error": None}
        try:
            step.function(ctx, batch)
        except JobTimeout:
            outcome.update(status="failed", error="timed out")
            outcomes.append(outcome)
            ctx.result.stats["steps"] = outcomes
            raise
        except Exception as error:  # collected, not raised: the later steps still run
            message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
            outcome.update(status="failed", error=message)
            errors.append(f"{step.name}: {message}")
            ctx.warn("step-failed", f"step {step.name} failed: {message}", severity="error")
        outcome["duration_s"] = round(time.monotonic() - started, 3)
        outcomes.append(outcome)
    ctx.result.stats["steps"] = outcomes
    if errors:
        ctx.result.fail(f"{len(errors)} of {len(steps)} steps failed: " + "; ".join(errors))
    return ctx.result


def run(ctx: JobContext) -> JobResult:
    """Run the evening batch (see the module docstring)."""
    return run_steps(ctx)
