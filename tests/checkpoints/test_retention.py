"""Retention's decisions from plain facts: kinds by time, counts, rollback points, the newest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mnemo_ops.checkpoints import retention
from mnemo_ops.checkpoints.retention import Checkpoint, Limits, RunUse

START = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
LIMITS = Limits(daily=7, manual=3, pre_write=7, failed=7)


def made(kind: str, minutes: float, job: str | None = None, **extra) -> Checkpoint:
    """A verified checkpoint made `minutes` after START (named as the catalog names it)."""
    moment = START + timedelta(minutes=minutes)
    prefix = f"pre-{job}" if kind == retention.PRE_WRITE else kind
    return Checkpoint(
        name=f"{prefix}-{moment:%Y%m%dT%H%M%SZ}",
        kind=kind,
        created_at=moment,
        verified=extra.pop("verified", True),
        job=job,
        **extra,
    )


def test_eight_backups_in_a_minute_keep_the_pre_write_checkpoint_and_the_day_s_daily():
    pre_write = made(retention.PRE_WRITE, 0, job="memory-maintain")
    backups = [made(retention.DAILY, 1 + index / 10) for index in range(8)]
    runs = [RunUse("memory-maintain", START - timedelta(seconds=5), True, pre_write.name)]
    plan = retention.plan([pre_write, *backups], runs, LIMITS)
    kept = {decision.name for decision in plan.decisions if decision.keep}
    assert pre_write.name in kept
    assert backups[0].name in kept  # the day's daily
    assert plan.decision(backups[0].name).role == retention.DAILY
    # The seven later ones of the same day count as manual: the newest three stay.
    assert [plan.decision(item.name).role for item in backups[1:]] == [retention.MANUAL] * 7
    assert plan.removals() == [item.name for item in backups[1:5]]
    assert plan.decision(pre_write.name).rollback_for == ("memory-maintain",)


def test_a_reused_daily_is_the_job_s_rollback_point_until_its_next_successful_run():
    # memory-maintain reused a daily made a minute before it (backup.reuse_minutes): that daily is
    # the checkpoint a rollback needs, whatever its kind.
    reused = made(retention.DAILY, 0)
    later_days = [made(retention.DAILY, 60 * 24 * day) for day in range(1, 9)]
    runs = [RunUse("memory-maintain", START + timedelta(minutes=1), True, reused.name)]
    plan = retention.plan([reused, *later_days], runs, LIMITS)
    assert plan.decision(reused.name).keep and not plan.decision(reused.name).within_count
    assert plan.removals() == [later_days[0].name]  # beyond seven, and no one's rollback point
    # Once memory-maintain has run successfully from a newer checkpoint, the old one goes.
    newer = made(retention.PRE_WRITE, 60 * 24 * 8 + 30, job="memory-maintain")
    runs.append(
        RunUse("memory-maintain", newer.created_at - timedelta(seconds=2), True, newer.name)
    )
    plan = retention.plan([reused, *later_days, newer], runs, LIMITS)
    assert reused.name in plan.removals()
    assert plan.decision(newer.name).rollback_for == ("memory-maintain",)


def test_a_failing_job_keeps_the_checkpoint_before_its_first_failure_and_its_latest():
    success = made(retention.PRE_WRITE, 0, job="evening-batch")
    runs = [RunUse("evening-batch", START - timedelta(seconds=1), True, success.name)]
    failures = []
    for day in range(1, 12):
        checkpoint = made(retention.PRE_WRITE, 60 * 24 * day, job="evening-batch")
        failures.append(checkpoint)
        runs.append(RunUse("evening-batch", checkpoint.created_at, False, checkpoint.name))
    plan = retention.plan([success, *failures], runs, LIMITS)
    kept = [decision.name for decision in plan.decisions if decision.keep]
    # The last success's, the one before the first failure, and the newest seven by count.
    assert kept == [success.name, failures[0].name, *(item.name for item in failures[-7:])]


def test_the_newest_verified_checkpoint_is_never_removed_and_failed_ones_never_count():
    good = made(retention.MANUAL, 0)
    failed = [made(retention.DAILY, minutes, verified=False, failed=True) for minutes in (5, 6, 7)]
    plan = retention.plan([good, *failed], [], Limits(daily=1, manual=1, pre_write=1, failed=2))
    assert plan.decision(good.name).keep and plan.decision(good.name).newest
    assert plan.removals() == [failed[0].name]
    # Even with every count at one and a newer one of another kind, the newest of all stays.
    newest = made(retention.PRE_WRITE, 10, job="monthly-maintenance")
    older = made(retention.PRE_WRITE, 9, job="monthly-maintenance")
    runs = [RunUse("monthly-maintenance", newest.created_at, True, newest.name)]
    plan = retention.plan([good, older, newest], runs, Limits(1, 1, 1, 1))
    assert plan.removals() == [older.name]


def test_a_backup_is_the_day_s_daily_only_when_its_utc_day_has_none():
    assert retention.kind_for_backup([], START) == retention.DAILY
    daily = made(retention.DAILY, 0)
    assert retention.kind_for_backup([daily], START + timedelta(minutes=1)) == retention.MANUAL
    assert retention.kind_for_backup([daily], START + timedelta(hours=4)) == retention.DAILY
    failed = made(retention.DAILY, 0, verified=False, failed=True)
    assert retention.kind_for_backup([failed], START + timedelta(minutes=1)) == retention.DAILY


def test_the_plan_says_why_each_stays_and_when_it_expires():
    pre_write = made(retention.PRE_WRITE, 0, job="memory-maintain")
    daily = made(retention.DAILY, 1)
    manual = made(retention.DAILY, 2)
    runs = [RunUse("memory-maintain", START, True, pre_write.name)]
    plan = retention.plan([pre_write, daily, manual], runs, LIMITS)
    described = {decision.name: decision.to_dict() for decision in plan.decisions}
    assert described[daily.name]["reasons"] == ["daily of 2026-11-30, 1 of 7"]
    assert described[daily.name]["expires"] == "after 7 more daily backups"
    assert described[manual.name]["counts_as"] == "manual"
    assert "the newest verified checkpoint" in described[manual.name]["reasons"]
    assert described[pre_write.name]["expires"] == (
        "after 7 more pre-write checkpoints, and after memory-maintain's next successful run"
    )
