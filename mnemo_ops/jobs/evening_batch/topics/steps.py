"""The evening batch's map steps: the topic map, the seed map, and the freshness checks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from mnemo_ops.core.context import JobContext
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.jobs.evening_batch.consolidation.batch import BatchState
from mnemo_ops.jobs.evening_batch.topics import freshness, report, seeds, store
from mnemo_ops.jobs.evening_batch.topics.changes import diff_since_map
from mnemo_ops.jobs.evening_batch.topics.clustering import (
    MapOptions,
    TermExtractor,
    build_full,
    update_incremental,
)
from mnemo_ops.jobs.evening_batch.topics.memories import canonical_backed_keys, load_live_memories


def map_options(ctx: JobContext) -> MapOptions:
    """The topic-map tuning from the config file."""
    return MapOptions(
        min_topic_size=ctx.options.min_topic_size,
        terms_per_memory=ctx.options.terms_per_memory,
        max_topic_share=ctx.options.max_topic_share,
        label_similarity=ctx.options.label_similarity,
    )


# --- step 3: topic map -----------------------------------------------------------------------------


def topic_map_step(ctx: JobContext, batch: BatchState) -> None:
    """Cluster live memories by salient terms; incremental unless ``--rebuild`` or too much changed."""
    options = map_options(ctx)
    with _open_state(ctx) as db:
        connection = ctx.open_db(readonly=True)
        try:
            rebuild = ctx.options.rebuild
            diff = diff_since_map(connection, ctx.settings.state_db_path)
            previous = store.load_map(db, with_members=rebuild) if diff is not None else None
            extractor = TermExtractor(connection)
            if rebuild or previous is None or diff.share > ctx.options.stale_fraction:
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


# --- step 4: seed map ------------------------------------------------------------------------------


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
        fresh = seeds.build_seed_map(assignments, memories, backed, ctx.options.seeds_per_topic)
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


# --- step 5: freshness -----------------------------------------------------------------------------


def freshness_step(ctx: JobContext, batch: BatchState) -> None:
    """Warn about stale maps (e.g. after a failed step) and memory-block entries of superseded facts."""
    with _open_state(ctx) as db:
        connection = ctx.open_db(readonly=True)
        try:
            findings, figures = freshness.map_staleness(
                diff_since_map(connection, ctx.settings.state_db_path),
                store.load_build(db, store.TOPIC_MAP),
                store.load_build(db, store.SEED_MAP),
                ctx.options.stale_fraction,
            )
            if ctx.dry_run and batch.topic_map is not None:
                # A dry run computed the maps without storing them: the real run would leave them fresh.
                findings = []
            findings += freshness.stale_block_entries(
                connection,
                ctx.settings.memory_blocks_dir,
                ctx.settings.owner,
                ctx.options.block_match_similarity,
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
