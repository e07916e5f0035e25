"""The evening batch's sleep steps, between the summary repair and the topic map.

1. ``reinforcement``: what changed since the last sleep (``observe``), restatements confirmed and
   linked, proven contradictions closed (``reinforcement``);
2. ``importance``: the user's own statements raised past the Hermes plugin's importance cut
   (``importance``);
   (then ``graduation``, in ``dream_steps`` since it may ask the model: the owner's statements
   made global rows every later conversation receives);
3. ``prominence``: prominence, utility and band of every memory (``decay``);
4. ``forgetting``: tonight's archive candidates stamped ``valid_until`` (``forgetting``);
5. ``edges``: our edges strengthened and downscaled (``edges``).

They share one `SleepRun`, built by the first of them. A real run (the live database, or the recall
guard's trial copy) works on the job's own files; a dry run works on private copies (``scratch``)
made once and removed when the batch ends, so its counts are those of the real run.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from mnemo_ops.core import state
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import Severity
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.foundation.clock import local_now
from mnemo_ops.jobs.evening_batch.consolidation.batch import BatchState
from mnemo_ops.jobs.evening_batch.sleep import (
    decay,
    edges,
    forgetting,
    importance,
    observe,
    reinforcement,
    scratch,
)
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.jobs.evening_batch.sleep.night import last_sleep, night_of, to_local
from mnemo_ops.settings.sections import SleepOptions

DISABLED = False


def suite_path(settings) -> Path:
    """The user's eval suite: ``retrieval_eval.suite``, else ``<state_dir>/eval/suite.jsonl``."""
    configured = settings.retrieval_eval.suite
    if configured:
        return Path(configured).expanduser()
    return settings.state_dir / "eval" / "suite.jsonl"


def _eval_answers(ctx: JobContext, options: SleepOptions) -> frozenset[str] | None:
    """The memory ids the eval suite names as answers; None when it exists but cannot be read."""
    if not options.protect_eval_answers:
        return frozenset()
    path = suite_path(ctx.settings)
    if not path.is_file():
        return frozenset()
    try:
        suite = load_suite(path)
    except Exception as error:  # a broken suite: nothing can be known to be safe to forget
        ctx.warn(
            "sleep-eval-suite-unreadable",
            f"the eval suite {path} cannot be read ({getattr(error, 'message', error)}); "
            "nothing is archived tonight",
            Severity.WARNING,
            fix=f"mnemo-ops eval run --suite {path}",
        )
        return None
    return frozenset(memory_id for case in suite.cases for memory_id in case.relevant)


def sleep_run(ctx: JobContext, batch: BatchState) -> SleepRun | None:
    """The run's shared `SleepRun` (built once per batch); None when the sleep stages are off."""
    if batch.sleep is not None:
        return batch.sleep or None
    options = ctx.settings.sleep
    if not options.enabled:
        batch.sleep = DISABLED
        ctx.result.stats["sleep"] = {"enabled": False}
        ctx.warn(
            "sleep-stages-off", "the sleep stages are off (sleep.enabled: false)", Severity.INFO
        )
        return None
    now = local_now()
    ledger = state.open_state_readonly(ctx.settings.state_db_path)
    try:
        previous = last_sleep(ledger)
    finally:
        if ledger is not None:
            ledger.close()
    since = to_local(previous) if previous is not None else now - timedelta(days=1)
    answers = _eval_answers(ctx, options)
    if answers is None:
        options = _without_forgetting(options)
        answers = frozenset()
    if ctx.dry_run:
        copies = scratch.make(ctx.settings.db_path, ctx.settings.state_db_path)
        batch.cleanups.append(copies.remove)
        db_path, state_db_path, before_write = copies.db_path, copies.state_db_path, _nothing
        hermes_home, private_home = copies.folder / "hermes", copies.folder
    else:
        db_path, state_db_path = ctx.settings.db_path, ctx.settings.state_db_path
        before_write = ctx.before_write
        hermes_home, private_home = ctx.settings.hermes_home, None
    night = night_of(now)
    run = SleepRun(
        db_path=db_path,
        state_db_path=state_db_path,
        options=options,
        night=night,
        since=since,
        owner=ctx.settings.owner,
        count=ctx.count,
        before_write=before_write,
        eval_answers=answers,
        withheld=ctx.withheld,
        multi_valued_predicates=tuple(ctx.settings.monthly_maintenance.multi_valued_predicates),
        hermes_home=hermes_home,
        private_home=private_home,
    )
    ctx.result.stats["sleep"] = run.stats
    run.stats.update(
        {
            "night": night.key,
            "reference": night.reference_text,
            "active_since": since.isoformat(timespec="seconds"),
            "on_copies": ctx.dry_run,
        }
    )
    batch.sleep = run
    return run


def _nothing() -> None:
    """A dry run's copies need no checkpoint."""


def _without_forgetting(options: SleepOptions) -> SleepOptions:
    return options.model_copy(update={"forgetting": False})


def reinforcement_step(ctx: JobContext, batch: BatchState) -> None:
    """See what changed, confirm restatements, close proven contradictions."""
    run = sleep_run(ctx, batch)
    if run is None:
        return
    seen = observe.observe(run)
    confirmed = reinforcement.confirm_restatements(run)
    closed = reinforcement.close_contradictions(run)
    run.stats["observed"] = seen.to_stats()
    run.stats["reinforcement"] = {**confirmed, "contradictions": closed}


def importance_step(ctx: JobContext, batch: BatchState) -> None:
    """Raise the importance of the user's statements that proved worth keeping (reversible)."""
    _stage_with_switch(
        ctx,
        batch,
        "importance",
        "importance_raised",
        lambda options: options.importance,
        importance.raise_importance,
    )


def prominence_step(ctx: JobContext, batch: BatchState) -> None:
    """Prominence, utility and band of every memory at the night's reference moment."""
    run = sleep_run(ctx, batch)
    if run is None:
        return
    run.stats["prominence"] = decay.recompute(run)


def forgetting_step(ctx: JobContext, batch: BatchState) -> None:
    """Archive tonight's candidates (never deleted; ``mnemo-ops forgotten restore`` undoes it)."""
    _stage_with_switch(
        ctx,
        batch,
        "forgetting",
        "memories_archived",
        lambda options: options.forgetting,
        forgetting.forget,
    )


def _stage_with_switch(
    ctx: JobContext,
    batch: BatchState,
    name: str,
    counter: str,
    switch: Callable[[SleepOptions], bool],
    work: Callable[[SleepRun], dict],
) -> None:
    """Run a stage that its `sleep.` switch can turn off; turned off, its `counter` reads 0 (so
    monitoring still sees the key)."""
    run = sleep_run(ctx, batch)
    if run is None:
        return
    if not switch(run.options):
        run.stats[name] = {"enabled": False}
        ctx.count(counter, 0)
        return
    run.stats[name] = work(run)


def edges_step(ctx: JobContext, batch: BatchState) -> None:
    """Strengthen and downscale our edges, once a night."""
    run = sleep_run(ctx, batch)
    if run is None:
        return
    run.edge_pass = edges.nightly_update(run)
    run.stats["edges"] = run.edge_pass.to_stats()
