"""One self-reflection run: the week's sessions -> lessons -> a plan -> the writes (see the package)."""

from __future__ import annotations

from typing import Any

from mnemo_ops.core.context import JobContext
from mnemo_ops.foundation.clock import isoformat, local_now, utc_now
from mnemo_ops.jobs.self_reflection import extractor, plan, prompting, week
from mnemo_ops.jobs.self_reflection.apply import apply_plan
from mnemo_ops.jobs.self_reflection.lessons import KINDS, Lesson
from mnemo_ops.jobs.self_reflection.sessions import Gathered, Session, gather, make_window
from mnemo_ops.models import ModelLayer

COUNTS = (
    "lessons_stored",
    "lessons_reinforced",
    "lessons_superseded",
    "canonical_created",
    "canonical_updated",
)
LISTED = 60


def _count_all(ctx: JobContext, counts: dict[str, int]) -> None:
    for name in COUNTS:
        ctx.count(name, counts.get(name, 0))


def _sub_sessions(sessions: list[Session], refs: set[str]) -> list[Session]:
    """The sessions cut down to the turns in `refs` (for the fallback on what a model did not see)."""
    result = []
    for session in sessions:
        turns = [turn for turn in session.turns if turn.ref in refs]
        if turns:
            result.append(Session(session.session_id, turns, session.last_activity))
    return result


def find_lessons(
    ctx: JobContext, gathered: Gathered, layer: ModelLayer
) -> tuple[list[Lesson], dict[str, Any]]:
    """The lessons of the due sessions: the model's where it answered, the extractor's elsewhere."""
    options = ctx.options
    notes: dict[str, Any] = {"batches": 0, "answered": 0, "skipped": {}, "assessment": {}}
    if not layer.use_model:
        lessons, report = extractor.extract(gathered.sessions)
        notes["extractor"] = report.to_stats()
        return lessons, notes
    lessons: list[Lesson] = []
    fallback_refs: set[str] = set()
    assessment: dict[str, list[str]] = {"went_well": [], "went_badly": [], "do_differently": []}
    for batch in prompting.batches(
        gathered.sessions, options.max_session_chars, options.batch_chars
    ):
        notes["batches"] += 1
        answer = layer.ask(prompting.request_for(batch))
        if answer.ok:
            notes["answered"] += 1
            lessons += prompting.lessons_of(answer.value, batch, answer.method)
            for name in assessment:
                assessment[name] += getattr(answer.value, name)[:5]
            fallback_refs |= set(answer.withheld)
            continue
        notes["skipped"][answer.reason] = notes["skipped"].get(answer.reason, 0) + 1
        if answer.reason == "dry-run":
            fallback_refs |= set(answer.withheld)
        else:
            fallback_refs |= set(batch.turns)
    if fallback_refs:
        found, report = extractor.extract(_sub_sessions(gathered.sessions, fallback_refs))
        lessons += found
        notes["extractor"] = {"statements_not_sent": len(fallback_refs), **report.to_stats()}
    notes["assessment"] = {name: items[:10] for name, items in assessment.items()}
    return lessons, notes


def already_done(ctx: JobContext) -> str | None:
    """Why a run has nothing to do (this ISO week's lessons were drawn already), or None."""
    if ctx.force:
        return None
    state_db = ctx.open_state()
    try:
        previous = week.run_this_week(state_db, week.iso_week(local_now()))
    finally:
        if state_db is not None:
            state_db.close()
    return (
        None if previous is None else f"this week's lessons were drawn on {previous['started_at']}"
    )


def run_reflection(ctx: JobContext) -> None:
    """The job's whole run (``jobs/self_reflection.run`` calls it)."""
    now = local_now()
    this_week = week.iso_week(now)
    state_db = ctx.open_state()
    try:
        previous = week.run_this_week(state_db, this_week)
        if previous is not None and not ctx.force:
            ctx.result.stats["reflection"] = {
                "week": this_week,
                "covered_until": previous.get("covered_until"),
                "already_done": previous["started_at"],
            }
            ctx.warn(
                "self-reflection-done-this-week",
                f"the lessons of {this_week} were drawn on {previous['started_at']}; nothing to do "
                "(--force draws them again, without duplicating any)",
                severity="info",
            )
            _count_all(ctx, {})
            return
        _reflect(ctx, state_db, now, this_week)
    finally:
        if state_db is not None:
            state_db.close()


def _reflect(ctx: JobContext, state_db, now, this_week: str) -> None:
    options = ctx.options
    settings = ctx.settings
    window = make_window(
        now,
        options.window_days,
        options.idle_hours,
        week.covered_until_before(state_db, this_week),
    )
    layer = ModelLayer.open(
        settings,
        state_db,
        job=ctx.job,
        dry_run=ctx.dry_run,
        use_model=options.use_model,
        warn=lambda code, message: ctx.warn(code, message, fix="llm models"),
    )
    hermes_state = settings.hermes_home / "state.db" if options.hermes_sessions else None
    connection = ctx.open_db()
    try:
        gathered = gather(connection, hermes_state, window, options.include_summaries)
        if hermes_state is not None and gathered.hermes.get("problem") not in (None, "not found"):
            ctx.warn(
                "hermes-sessions-unreadable",
                f"Hermes' session store {hermes_state} was not read: {gathered.hermes['problem']}",
                severity="info",
            )
        found, notes = find_lessons(ctx, gathered, layer)
        for lesson in found:  # a lesson is stored text: never with a secret in it
            lesson.body = layer.redactor.redact(lesson.body).text
        lessons = plan.merge(found, options.similarity)[: options.max_lessons]
        now_text = now.isoformat()
        stored = plan.stored_lessons(connection, now_text)
        facts = plan.current_facts(connection, settings.owner)
    finally:
        connection.close()
    the_plan = plan.make_plan(lessons, stored, facts, options.similarity, this_week, now_text)
    by_kind = {kind: sum(1 for lesson in lessons if lesson.kind == kind) for kind in KINDS}
    stats: dict[str, Any] = {
        "week": this_week,
        "covered_until": window.cutoff.isoformat(),
        "window": {
            "turns_from": window.start.isoformat(),
            "sessions_idle_after": window.due_after.isoformat(),
            "sessions_idle_before": window.cutoff.isoformat(),
        },
        "owner": settings.owner,
        "method": layer.method,
        "input": gathered.to_stats(),
        "lessons_found": by_kind,
        "lessons_unchanged": the_plan.unchanged,
        "lessons": the_plan.listing[:LISTED],
        **notes,
    }
    ctx.result.stats["reflection"] = stats
    if layer.use_model:
        ctx.result.stats["model"] = layer.stats()
    ctx.result.stats["listing"] = {
        "title": "lessons" if not ctx.dry_run else "lessons it would store",
        "lines": [
            f"{entry['action']:<10} {entry['kind']:<12} {entry['slot']}: {entry['body']}"
            for entry in the_plan.listing[:LISTED]
        ],
    }
    if not lessons:
        ctx.warn(
            "self-reflection-nothing-learned",
            f"no lesson found in {len(gathered.sessions)} session(s) of {this_week} "
            f"({len(gathered.deferred)} still active, left for next week)",
            severity="info",
        )
    if ctx.dry_run:
        _count_all(ctx, the_plan.counts)
        return
    if the_plan.actions:
        ctx.before_write()
        session_id = f"mnemo-ops-reflection-{this_week}-{utc_now():%Y%m%dT%H%M%SZ}"
        outcomes = apply_plan(
            settings.db_path,
            settings.hermes_home,
            settings.owner,
            session_id,
            the_plan.actions,
            timeout_s=ctx.manifest.timeout,
        )
        stats["writes"] = {"session_id": session_id, "actions": len(outcomes)}
        filtered = sum(1 for outcome in outcomes if outcome.get("filtered"))
        if filtered:
            ctx.warn(
                "self-reflection-filtered",
                f"Mnemosyne's write filter refused {filtered} lesson(s)",
                severity="info",
            )
            the_plan.counts["lessons_stored"] -= filtered
    stats["finished_at"] = isoformat(utc_now())
    _count_all(ctx, the_plan.counts)
