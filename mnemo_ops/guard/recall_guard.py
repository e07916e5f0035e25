"""The runner's recall guard: try the job's change on a trial copy, and let it reach the live database
only when recall stays within tolerance.

Steps, for a real run of a job whose manifest says ``guard: recall`` (dry runs change nothing and are
not guarded):

1. Fingerprint what the change depends on; a change refused with the same fingerprint is not tried
   again (``--force`` tries it anyway).
2. Copy the database (one read snapshot, as files: ``database.snapshot``), state.db and, when the
   job writes them, the memory blocks into ``<state_dir>/guard/trial-<stamp>/``; the job's state
   is read there under the live database's name (``Settings.live_db_path``).
3. Refresh the probe set from the copy (kept in the live state.db), and copy the quiet trial copy
   once more as the "before" state (a reflink where the filesystem has them).
4. Run the job on the trial copy, exactly as it would run (no checkpoint, no monitoring), while a
   worker process measures the first sample of probes (``guard.first_sample``) on the "before"
   copy; then measure the sample on the changed copy. Both are measured in place: they are the
   guard's own copies, so nothing is snapshotted again.
   The first measurements also judge each suite case in its place (the memory blocks of each side
   counted as received) and measure Mnemosyne's own recall over every session
   (``measure.EverySession``).
5. Decide (``verdict``) on the sample when it settles the verdict, else measure the other probes on
   both copies and decide on all of them; record the decision (``history``), remove the copies. A
   refused change fails the run (exit 1) with the figures, and the live database is never touched.

``stats.guard.seconds_by_phase`` says where the trial's seconds went (``copy``, ``probes``,
``job_on_copy``, ``measure_before``, ``measure_after``, ``verdict``; the measurements overlap the
job and each other, so the phases add up to more than the trial's wall time, ``seconds``).

A change refused only because it makes the agent's recall cost too much (recall held), by a job whose
manifest names a ``costly_option`` (memory-maintain's ``link``), is tried once more with that option
off for this run: when the rest is accepted, it runs live without the costly part, which waits for
a later run (each run tries it again, so it lands once its cost falls, e.g. when Mnemosyne stops
scanning every edge per candidate: docs/upstream-mnemosyne-graph-bonus-scan.md).

A run killed at any point leaves the live files as they were; the next run removes the old copy.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult, Severity
from mnemo_ops.database.snapshot import snapshot_database
from mnemo_ops.evaluation.engines.mnemosyne import COST_SAMPLE, VectorsUnavailable
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.foundation import interrupts
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.foundation.private_files import ensure_private_dir
from mnemo_ops.guard import crowding, history, losses, probes
from mnemo_ops.guard.measure import combine, measure
from mnemo_ops.guard.verdict import decide, settled_by_sample
from mnemo_ops.settings import Settings

GUARD_DIR = "guard"
TRIAL_PREFIX = "trial-"
SPACE_MARGIN = 1.5
"""Free space wanted for a trial, as a multiple of the database, its WAL and state.db together."""
WITHHOLD_ROUNDS = 3
"""Tries after the first that hold back the origins of rows crowding the agent's lines out: each
try frees room that tonight's next candidates fill, and they can crowd in turn."""
NOT_NEEDED = "not-needed"
"""The verdict of a run whose job found, before the trial, that it has nothing to do."""
REFUSAL_FIX = (
    "read docs/recall-guard.md, 'When the recall guard refuses'; mnemo-ops run JOB --force retries"
)


@dataclasses.dataclass
class Trial:
    """The copies a trial runs on, and the settings that point the job at them."""

    folder: Path
    settings: Settings

    @property
    def db_path(self) -> Path:
        """The trial copy of the memory database."""
        return self.settings.db_path

    def remove(self) -> None:
        """Remove the copies (they hold the user's memories: nothing stays behind)."""
        shutil.rmtree(self.folder, ignore_errors=True)


def mark_not_needed(ctx: JobContext, reason: str) -> None:
    """Called by a job's preflight that found nothing to do: the guard then makes no trial (the job
    changes nothing, so there is nothing to measure) and the job sees the mark and returns.

    The mark is ``ctx.not_needed``; ``stats.guard`` only records it for the output."""
    ctx.not_needed = reason
    ctx.result.stats["guard"] = {"verdict": NOT_NEEDED, "reason": reason}


def is_marked_not_needed(ctx: JobContext) -> bool:
    """True when the run's preflight called `mark_not_needed` (``ctx.not_needed`` holds its reason)."""
    return ctx.not_needed is not None


def guard_folder(settings: Settings) -> Path:
    """``<state_dir>/guard``: where trials are made (0700)."""
    return settings.state_dir / GUARD_DIR


def remove_stale_trials(settings: Settings) -> int:
    """Remove trial copies a killed run left behind (the writer lock says no trial runs now)."""
    folder = guard_folder(settings)
    removed = 0
    if folder.is_dir() and not folder.is_symlink():
        for entry in folder.iterdir():
            if entry.name.startswith(TRIAL_PREFIX) and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
    return removed


def _needed_bytes(settings: Settings) -> int:
    total = 0
    for path in (
        settings.db_path,
        Path(f"{settings.db_path}-wal"),
        settings.state_db_path,
    ):
        if path.exists():
            total += path.stat().st_size
    return int(total * SPACE_MARGIN)


def _copy_state(source: Path, target: Path) -> None:
    """Copy state.db (ours; rollback journal) through SQLite's backup API."""
    if not source.exists():
        return
    reader = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    writer = sqlite3.connect(target)
    try:
        reader.backup(writer)
    finally:
        writer.close()
        reader.close()


def make_trial(settings: Settings, copy_blocks: bool) -> Trial:
    """Copy the database, state.db and (when the job writes them) the memory blocks for a trial."""
    folder = ensure_private_dir(guard_folder(settings))
    free = shutil.disk_usage(folder).free
    needed = _needed_bytes(settings)
    if free < needed:
        raise MnemoOpsError(
            f"the recall guard needs {needed // (1 << 20)} MiB free in {folder} for its trial copy, "
            f"{free // (1 << 20)} MiB are; nothing was changed"
        )
    trial_folder = ensure_private_dir(folder / f"{TRIAL_PREFIX}{utc_now():%Y%m%dT%H%M%S%fZ}")
    try:
        db_path = snapshot_database(settings.db_path, trial_folder / "data")
    except apsw.Error as error:
        shutil.rmtree(trial_folder, ignore_errors=True)
        raise MnemoOpsError(
            f"the recall guard could not copy {settings.db_path} for its trial ({error}); nothing "
            "was changed; mnemo-ops run monthly-maintenance checks the file and names the fix"
        ) from None
    state_dir = ensure_private_dir(trial_folder / "state")
    _copy_state(settings.state_db_path, state_dir / "state.db")
    blocks = settings.memory_blocks_dir
    if copy_blocks:
        blocks = trial_folder / "memory_blocks"
        if settings.memory_blocks_dir.is_dir() and not settings.memory_blocks_dir.is_symlink():
            shutil.copytree(settings.memory_blocks_dir, blocks, symlinks=True)
        else:
            ensure_private_dir(blocks)
    # The job on the trial sees the user's eval suite where the live run sees it (its default path
    # is inside the state dir, which the trial replaces): a sleep stage protects the suite's answers.
    suite = settings.state_dir / "eval" / "suite.jsonl"
    if not settings.retrieval_eval.suite and suite.is_file():
        settings = settings.updated(retrieval_eval={"suite": str(suite)})
    trial_settings = dataclasses.replace(
        settings,
        db_path=db_path,
        state_dir=state_dir,
        memory_blocks_dir=blocks,
        live_db_path=settings.db_path,
    )
    return Trial(folder=trial_folder, settings=trial_settings)


def _suite(settings: Settings):
    """The user's eval suite, when the guard should measure it and it exists."""
    if not settings.guard.eval_suite:
        return None
    configured = settings.retrieval_eval.suite
    path = (
        Path(configured).expanduser() if configured else settings.state_dir / "eval" / "suite.jsonl"
    )
    return load_suite(path) if path.is_file() else None


def _evidence_ids(suite) -> set[str]:
    """The memory ids the user's eval suite names as answers (none without a suite)."""
    if suite is None:
        return set()
    return {memory_id for case in suite.cases for memory_id in case.relevant}


def _live_ids(db_path: Path, memory_ids: list[str]) -> set[str]:
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return probes.live_ids(connection, memory_ids)
    finally:
        connection.close()


class PhaseClock:
    """Seconds spent in each phase of a trial (a phase may be entered more than once)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str):
        """Add the time spent inside the block to phase `name`."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def add(self, name: str, seconds: float) -> None:
        """Add `seconds` to phase `name`."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def to_stats(self) -> dict[str, float]:
        """The phases, rounded for reports."""
        return {name: round(value, 2) for name, value in self.seconds.items()}


def _measure_timed(
    clock: PhaseClock,
    phase: str,
    settings: Settings,
    db_path: Path,
    probe_set,
    suite,
    cost_sample: int | None = None,
    blocks_dir: Path | None = None,
    every_session: bool = False,
):
    """Recall on one of the guard's copies, in place (both are the guard's own, thrown away
    afterwards, so nothing is snapshotted again), its time added to `phase`; the suite's cases
    count the memory blocks in `blocks_dir` as received (the copy's, when the job writes them)."""
    started = time.monotonic()
    try:
        return measure(
            settings,
            db_path,
            probe_set,
            suite,
            in_place=True,
            cost_sample=cost_sample,
            blocks_dir=blocks_dir,
            every_session=every_session,
        )
    finally:
        clock.add(phase, time.monotonic() - started)


def _measure_both(
    settings: Settings,
    before_db: Path,
    after_db: Path,
    probe_set,
    suite,
    clock: PhaseClock,
    cost_sample: int | None = None,
):
    """Recall on the copy as it was and on the changed copy, at the same time (two worker
    processes); ``measure_before``/``measure_after`` get each side's own time (they overlap)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        before = pool.submit(
            _measure_timed,
            clock,
            "measure_before",
            settings,
            before_db,
            probe_set,
            suite,
            cost_sample,
        )
        after = _measure_timed(
            clock, "measure_after", settings, after_db, probe_set, suite, cost_sample
        )
        return before.result(), after


class RecallGuard:
    """``RunHooks.guards["recall"]``: the trial described in the module docstring."""

    name = "recall"

    def trial(self, ctx: JobContext, job: Callable[[JobContext], Any]) -> bool:
        """Try `job` on a trial copy; return True when the real run may go ahead.

        Records its figures in ``ctx.result.stats["guard"]`` and, on a refusal, fails the result.
        """
        settings = ctx.settings
        if is_marked_not_needed(ctx):
            return True
        if not settings.guard.enabled:
            ctx.result.stats["guard"] = {"verdict": "off"}
            ctx.warn(
                "recall-guard-off", "the recall guard is off (guard.enabled: false)", Severity.INFO
            )
            return True
        started = time.monotonic()
        remove_stale_trials(settings)
        live = ctx.open_db(readonly=True)
        try:
            fingerprint = history.fingerprint(
                ctx.job, settings.config.model_dump(mode="json", by_alias=True), live
            )
        finally:
            live.close()
        state_db = ctx.open_state()
        try:
            previous = history.latest(state_db, ctx.job)
            if (
                previous is not None
                and previous["verdict"] in ("refused", "not-retried")
                and previous["fingerprint"] == fingerprint
                and not ctx.force
            ):
                return self._not_retried(ctx, state_db, previous, fingerprint)
            return self._try(ctx, job, state_db, fingerprint, started)
        finally:
            state_db.close()

    def _try(self, ctx: JobContext, job, state_db, fingerprint: str, started: float) -> bool:
        settings = ctx.settings
        clock = PhaseClock()
        shown = ctx.progress.spinner
        with clock.phase("copy"), shown("recall guard: copying the database for a trial"):
            trial = make_trial(settings, copy_blocks="memory_blocks" in ctx.manifest.writes)
        try:
            with clock.phase("probes"), shown("recall guard: choosing the probes"):
                connection = database.open_memory_db(trial.db_path, readonly=True)
                try:
                    refreshed = probes.refresh(connection, state_db, settings.guard.probes)
                finally:
                    connection.close()
            with clock.phase("copy"), shown("recall guard: keeping the database as it was"):
                # The database as it was, for the "before" measurement: a file copy of the trial
                # copy, which nothing else has open (a reflink where the filesystem has them).
                before_db = snapshot_database(trial.db_path, trial.folder / "before")
            suite = _suite(settings)
            try:
                sample, rest = probes.spread_sample(
                    refreshed.probes,
                    settings.guard.first_sample,
                    probes.answered(state_db),
                    leading=COST_SAMPLE,
                )
                with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                    # The first sample is measured on the "before" copy while the job runs on the
                    # trial copy (a worker process beside this one: the two overlap in time).
                    # The live blocks are the "before" ones: the job changes only the trial's.
                    before_first = pool.submit(
                        _measure_timed,
                        clock,
                        "measure_before",
                        settings,
                        before_db,
                        sample,
                        suite,
                        every_session=True,
                    )
                    with clock.phase("job_on_copy"):
                        trial_result = self._run_on_copy(ctx, job, trial)
                    with shown("recall guard: measuring recall before and after"):
                        if any(trial_result.changes.values()):
                            after_first = _measure_timed(
                                clock,
                                "measure_after",
                                settings,
                                trial.db_path,
                                sample,
                                suite,
                                blocks_dir=trial.settings.memory_blocks_dir,
                                every_session=True,
                            )
                        before_first = before_first.result()
                if not any(trial_result.changes.values()):
                    # Nothing written: recall cannot have changed, and the measurement is not used.
                    return self._unchanged(
                        ctx, state_db, fingerprint, refreshed, trial_result, started, clock
                    )
                with shown("recall guard: the verdict"):
                    verdict, before, after, sampling = self._decide_by_sample(
                        settings,
                        (sample, rest),
                        (before_first, after_first),
                        before_db,
                        trial.db_path,
                        clock,
                    )
                    with clock.phase("verdict"):
                        lost = losses.lost_facts(before_db, trial.db_path, _evidence_ids(suite))
                if lost:
                    verdict.problems.append(losses.problem(lost))
                    verdict.accepted = False
                crowded: dict[str, list[str]] = {}
                if not (verdict.accepted or lost) and ctx.manifest.withholds_crowders:
                    # Read before the copies go: the rows the change wrote that took the lines.
                    with clock.phase("verdict"):
                        crowded = crowding.crowders(
                            before_db, trial.db_path, crowding.lost_lines(before, after)
                        )
            except VectorsUnavailable as error:
                # Not recorded in the guard's history: the change was never judged, and a
                # fixed model must not meet "refused, nothing changed since" next time.
                self._refuse_unmeasured(ctx, trial_result, error, started)
                return False
        finally:
            trial.remove()
        figures = verdict.to_stats()
        figures.update(
            {
                "lost_facts": {"count": len(lost), "rows": lost[: losses.SHOWN]},
                "profile": before.profile,
                "cutoff": before.cutoff,
                "probe_set": refreshed.to_stats(),
                "sampling": sampling,
                "trial": {
                    "status": str(trial_result.status),
                    "error": trial_result.error,
                    "changes": trial_result.changes,
                    # What the job saw on the copy (e.g. where linking resumed), to compare
                    # with the live run's own stats.
                    "stats": trial_result.stats,
                },
                "seconds": round(time.monotonic() - started, 2),
                "seconds_by_phase": clock.to_stats(),
            }
        )
        if before.dense is not None:
            figures["vectors"] = {"before": before.vector_stats(), "after": after.vector_stats()}
        ctx.result.stats["guard"] = figures
        # What the live database will answer: the changed copy's when accepted, else as it was.
        if not (before.error or after.error):
            probes.record_answers(state_db, (after if verdict.accepted else before).ranks)
        history.record(
            state_db,
            ctx.job,
            isoformat(ctx.result.started_at),
            figures["verdict"],
            fingerprint,
            before.profile,
            figures,
        )
        if verdict.accepted:
            return True
        if verdict.refused_for_cost_only and self._defer_costly_part(ctx, figures):
            return self._try(ctx, job, state_db, fingerprint, started)
        if self._withhold_crowders(ctx, figures, crowded):
            return self._try(ctx, job, state_db, fingerprint, started)
        self._refuse(ctx, figures)
        return False

    def _decide_by_sample(
        self, settings: Settings, split, first, before_db: Path, after_db: Path, clock
    ):
        """Decide on the first sample (measured before and after: `first`), and measure the rest
        of the probes only when the sample does not settle the verdict
        (``verdict.settled_by_sample``); return the verdict, both measurements and the sampling
        figures."""
        (sample, rest), (before, after) = split, first
        probe_set = sample + rest
        live_after = _live_ids(after_db, [probe.memory_id for probe in probe_set])
        with clock.phase("verdict"):
            verdict = decide(sample, before, after, live_after, settings.guard)
            settled = settled_by_sample(
                verdict, len(sample), len(probe_set), COST_SAMPLE, settings.guard, before.profile
            )
        if not settled.settled:
            before_rest, after_rest = _measure_both(
                settings, before_db, after_db, rest, None, clock, cost_sample=0
            )
            before, after = combine(before, before_rest), combine(after, after_rest)
            with clock.phase("verdict"):
                verdict = decide(probe_set, before, after, live_after, settings.guard)
        sampling = {
            "first_sample": len(sample),
            "measured": len(before.ranks),
            "probes": len(probe_set),
            "settled_by_sample": settled.settled and len(sample) < len(probe_set),
            "reason": settled.reason,
        }
        return verdict, before, after, sampling

    def _defer_costly_part(self, ctx: JobContext, figures: dict[str, Any]) -> bool:
        """Turn the manifest's costly option off for this run, when it is on; True if it was."""
        name = ctx.manifest.costly_option
        if not name or not getattr(ctx.options, name):
            return False
        ctx.settings, ctx.options, ctx.run_options = ctx.settings.check_run_options(
            ctx.job, {name: False}
        )
        ctx.result.stats["guard_deferred"] = {
            "option": name,
            "problems": figures["problems"],
            "cost": figures.get("cost"),
        }
        ctx.warn(
            "guard-deferred-costly-part",
            f"{ctx.job} without {name} this run: with it, {'; '.join(figures['problems'])}; "
            "the rest was tried alone (docs/recall-guard.md, 'The agent's cost')",
            Severity.WARNING,
        )
        return True

    def _withhold_crowders(
        self, ctx: JobContext, figures: dict[str, Any], crowded: dict[str, list[str]]
    ) -> bool:
        """Hold back, for this run, the origins of the rows that took the agent's lines; True when
        there is something new to hold back and a round left (``WITHHOLD_ROUNDS``)."""
        origins = {origin for found in crowded.values() for origin in found} - ctx.withheld
        earlier = ctx.result.stats.get("guard_withheld") or {}
        rounds = int(earlier.get("rounds", 0))
        if not origins or rounds >= WITHHOLD_ROUNDS:
            return False
        ctx.withheld = ctx.withheld | origins
        rows = sorted(set(earlier.get("rows", [])) | set(crowded))
        ctx.result.stats["guard_withheld"] = {
            "rounds": rounds + 1,
            "sources": sorted(ctx.withheld),
            "rows": rows[: crowding.SHOWN],
            "rows_count": len(rows),
            "problems": [*earlier.get("problems", []), *figures["problems"]],
        }
        ctx.warn(
            "guard-withheld-crowding",
            f"{ctx.job}: {len(crowded)} new row(s) took lines the agent received evidence in "
            f"before ({'; '.join(figures['problems'][:2])}); tried again deriving nothing from "
            f"their {len(origins)} source row(s) (docs/recall-guard.md, 'Rows that crowd')",
            Severity.INFO,
        )
        return True

    def _unchanged(
        self, ctx, state_db, fingerprint, refreshed, trial_result, started, clock
    ) -> bool:
        figures = {
            "verdict": "ok",
            "unchanged": True,
            "problems": [],
            "probe_set": refreshed.to_stats(),
            "trial": {
                "status": str(trial_result.status),
                "error": trial_result.error,
                "changes": trial_result.changes,
            },
            "seconds": round(time.monotonic() - started, 2),
            "seconds_by_phase": clock.to_stats(),
        }
        ctx.result.stats["guard"] = figures
        history.record(
            state_db, ctx.job, isoformat(ctx.result.started_at), "ok", fingerprint, "", figures
        )
        return True

    def _run_on_copy(self, ctx: JobContext, job, trial: Trial) -> JobResult:
        """The job on the trial copy: its own result, no checkpoint, no monitoring, no ledger row."""
        result = JobResult(job=ctx.job, db=str(trial.db_path))
        trial_ctx = JobContext(
            settings=trial.settings,
            manifest=ctx.manifest,
            dry_run=False,
            result=result,
            force=ctx.force,
            options=ctx.options,
            run_options=ctx.run_options,
            withheld=ctx.withheld,
            # The job's own stages, shown as the trial's: the real run shows them again after.
            progress=ctx.progress.within("recall guard trial"),
        )
        try:
            job(trial_ctx)
        except interrupts.Interrupted:
            # The ledger names the stage the trial stopped in, not only that it was a trial.
            ctx.stage = f"recall-guard trial, {trial_ctx.stage}"
            raise
        except (
            Exception
        ) as error:  # judged by its effect on recall; the real run reports its own failure
            message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
            result.fail(message)
        return result.finish()

    def _refuse_unmeasured(self, ctx: JobContext, trial_result, error, started: float) -> None:
        """The trial's recall could not use the vectors the agent's recall uses: refuse, say why."""
        ctx.result.stats["guard"] = {
            "verdict": "refused",
            "problems": [error.message],
            "trial": {
                "status": str(trial_result.status),
                "error": trial_result.error,
                "changes": trial_result.changes,
            },
            "seconds": round(time.monotonic() - started, 2),
        }
        ctx.warn(
            "recall-guard-no-vectors",
            error.message,
            Severity.ERROR,
            fix="make the embedding model the agent uses load in this environment, then run "
            f"mnemo-ops run {ctx.job} again",
        )
        ctx.result.fail(
            f"recall guard could not measure: {error.message}; the live database was not changed"
        )

    def _refuse(self, ctx: JobContext, figures: dict[str, Any]) -> None:
        broken = "; ".join(
            f"{probe['query']!r} (memory {probe['memory_id']}, session {probe['session']})"
            for probe in figures["newly_failing"][:5]
        )
        ctx.warn(
            "recall-guard-refused",
            "; ".join(figures["problems"]) + (f"; first broken probes: {broken}" if broken else ""),
            Severity.ERROR,
            fix=REFUSAL_FIX.replace("JOB", ctx.job),
        )
        before, after = figures["before"], figures["after"]
        summary = ", ".join(
            f"{name} {before[name]:.3f} -> {after.get(name, 0):.3f}" for name in before
        )
        ctx.result.fail(
            f"recall guard refused the change ({summary}); the live database was not changed"
        )

    def _not_retried(
        self, ctx: JobContext, state_db, previous: dict[str, Any], fingerprint: str
    ) -> bool:
        figures = dict(previous["figures"])
        figures["verdict"] = "not-retried"
        figures["refused_at"] = previous["figures"].get("refused_at") or previous["run_at"]
        ctx.result.stats["guard"] = figures
        history.record(
            state_db,
            ctx.job,
            isoformat(ctx.result.started_at),
            "not-retried",
            fingerprint,
            previous.get("profile") or "",
            figures,
        )
        ctx.warn(
            "recall-guard-not-retried",
            f"the change was refused on {figures['refused_at']} and nothing it depends on has changed "
            "since (config, Mnemosyne version, memories); not tried again",
            Severity.ERROR,
            fix=REFUSAL_FIX.replace("JOB", ctx.job),
        )
        ctx.result.fail(
            f"recall guard: refused on {figures['refused_at']} ({'; '.join(figures.get('problems', []))}); "
            "not retried: nothing changed since"
        )
        return False
