"""Which checkpoints retention keeps, and why: decisions only; no file is read or removed here.

The rules (docs/jobs/backup.md, "Retention"), by kind and time:

- **daily**: one per UTC day. The first verified ``run backup`` of a day is that day's daily; the
  newest ``backup.keep`` days' dailies are kept. A later backup on the same day is a manual one.
- **manual**: the extra backups of a day (and, in an older backups folder, a second ``daily-`` of
  the same day); the newest ``backup.manual_keep`` are kept. They never push out a daily.
- **pre-write**: the checkpoint a job takes before its first write; the newest
  ``backup.pre_write_keep`` are kept.
- **rollback points**: whatever its kind, the checkpoint a job's latest successful run started
  from stays until a later successful run of that job started from a newer one; of the
  checkpoints a job made or used since (a run in progress, or failed runs), the oldest and the
  newest stay as well.
- **the newest verified checkpoint** of any kind is never removed.
- **failed** ones (kept aside in ``failed/``) never count for the above; the newest ``backup.keep``
  are kept for inspection. A checkpoint that is neither verified nor failed (an unreadable
  manifest) is never removed by retention: a person looks at it.

`plan` takes plain facts (`Checkpoint`, `RunUse`, `Limits`) and returns a `RetentionPlan`; the
catalog gathers the facts and removes the folders the plan names, so another storage of the same
checkpoints can reuse the decisions as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

DAILY = "daily"
MANUAL = "manual"
PRE_WRITE = "pre-write"
FAILED = "failed"
UNVERIFIED = "unverified"
ROLES = (DAILY, MANUAL, PRE_WRITE, FAILED, UNVERIFIED)
"""What a checkpoint counts as for retention (its kind, or failed / unverified)."""

_COUNTED = {DAILY: "daily backup", MANUAL: "manual backup", PRE_WRITE: "pre-write checkpoint"}


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """What retention needs to know of one checkpoint."""

    name: str
    kind: str
    """As it was made: daily, manual or pre-write."""
    created_at: datetime | None
    verified: bool
    failed: bool = False
    job: str | None = None
    """The job that took a pre-write checkpoint."""


@dataclasses.dataclass(frozen=True)
class RunUse:
    """One real run of a job, from the ledger: when it started, whether it succeeded, and the
    checkpoint it started from (its own pre-write one, or one it reused), if any."""

    job: str
    started_at: datetime
    ok: bool
    checkpoint: str | None


@dataclasses.dataclass(frozen=True)
class Limits:
    """How many of each kind are kept (``backup.keep``, ``manual_keep``, ``pre_write_keep``)."""

    daily: int
    manual: int
    pre_write: int
    failed: int

    def of(self, role: str) -> int | None:
        """The count kept for `role` (None: not kept by count, as for unverified ones)."""
        return {
            DAILY: self.daily,
            MANUAL: self.manual,
            PRE_WRITE: self.pre_write,
            FAILED: self.failed,
        }.get(role)


@dataclasses.dataclass(frozen=True)
class Decision:
    """Retention's verdict on one checkpoint: what it counts as, whether it stays, and why."""

    name: str
    role: str
    keep: bool
    rank: int
    """1 for the newest of its role."""
    limit: int | None
    rollback_for: tuple[str, ...] = ()
    """The jobs this checkpoint is a rollback point of."""
    newest: bool = False
    """The newest verified checkpoint of any kind."""
    day: str | None = None
    """The UTC day of a daily."""

    @property
    def within_count(self) -> bool:
        """True when its role's count alone keeps it."""
        return self.limit is None or self.rank <= self.limit

    def reasons(self) -> list[str]:
        """Why it stays, in words (empty when it goes)."""
        if not self.keep:
            return []
        reasons = []
        if self.role == UNVERIFIED:
            reasons.append("not verified: retention never removes it (inspect it)")
        elif self.within_count:
            label = f"daily of {self.day}" if self.role == DAILY and self.day else self.role
            reasons.append(f"{label}, {self.rank} of {self.limit}")
        reasons += [f"rollback point of {job}" for job in self.rollback_for]
        if self.newest:
            reasons.append("the newest verified checkpoint")
        return reasons

    def expires(self) -> str:
        """When it goes, in words."""
        if not self.keep:
            return "at the next backup or pre-write checkpoint"
        if self.role == UNVERIFIED:
            return "never (by hand)"
        conditions = []
        if self.within_count and self.limit is not None:
            more = self.limit - self.rank + 1
            counted = "failed checkpoint" if self.role == FAILED else _COUNTED[self.role]
            conditions.append(f"after {more} more {counted}{'s' if more != 1 else ''}")
        conditions += [f"after {job}'s next successful run" for job in self.rollback_for]
        if self.newest:
            conditions.append("once a newer checkpoint is verified")
        return ", and ".join(conditions)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``backup list --json``, a checkpoint's ``retention``)."""
        return {
            "counts_as": self.role,
            "keep": self.keep,
            "rank": self.rank,
            "limit": self.limit,
            "rollback_for": list(self.rollback_for),
            "newest": self.newest,
            "reasons": self.reasons(),
            "expires": self.expires(),
        }


@dataclasses.dataclass(frozen=True)
class RetentionPlan:
    """Every checkpoint's decision, oldest first."""

    decisions: tuple[Decision, ...]

    def removals(self) -> list[str]:
        """The names retention removes, oldest first."""
        return [decision.name for decision in self.decisions if not decision.keep]

    def decision(self, name: str) -> Decision | None:
        """The decision on `name`, if it is in the plan."""
        return next((item for item in self.decisions if item.name == name), None)


def _moment(checkpoint: Checkpoint) -> datetime:
    return checkpoint.created_at or datetime.min.replace(tzinfo=UTC)


def _day(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).date().isoformat() if moment else None


def roles(checkpoints: Iterable[Checkpoint]) -> dict[str, str]:
    """What each checkpoint counts as: the first verified daily of a UTC day is that day's daily,
    a later one of the same day counts as manual; failed and unverified ones apart."""
    assigned: dict[str, str] = {}
    days_taken: set[str] = set()
    for checkpoint in sorted(checkpoints, key=lambda item: (_moment(item), item.name)):
        if checkpoint.failed:
            assigned[checkpoint.name] = FAILED
        elif not checkpoint.verified:
            assigned[checkpoint.name] = UNVERIFIED
        elif checkpoint.kind == DAILY:
            day = _day(checkpoint.created_at) or checkpoint.name
            assigned[checkpoint.name] = MANUAL if day in days_taken else DAILY
            days_taken.add(day)
        elif checkpoint.kind == MANUAL:
            assigned[checkpoint.name] = MANUAL
        else:
            assigned[checkpoint.name] = PRE_WRITE
    return assigned


def kind_for_backup(checkpoints: Iterable[Checkpoint], moment: datetime) -> str:
    """The kind a ``run backup`` at `moment` makes: daily when its UTC day has no verified daily
    yet, else manual (so extra backups of a day never push out another day's daily)."""
    day = _day(moment)
    listed = list(checkpoints)
    assigned = roles(listed)
    taken = any(assigned[item.name] == DAILY and _day(item.created_at) == day for item in listed)
    return MANUAL if taken else DAILY


def rollback_points(
    checkpoints: Sequence[Checkpoint], runs: Iterable[RunUse]
) -> dict[str, list[str]]:
    """For each checkpoint name, the jobs it is a rollback point of.

    A job's rollback points: the checkpoint its latest successful run started from, and of the
    checkpoints it took or started from since that run began (a run in progress or runs that
    failed, perhaps part-way through their writes), the oldest and the newest. The oldest undoes
    everything since the last success; keeping every one of a long failing streak could fill the
    disk the agent writes to, so the ones in between are kept by the pre-write count alone.
    """
    present = {checkpoint.name: checkpoint for checkpoint in checkpoints}
    by_job: dict[str, list[RunUse]] = {}
    for run in runs:
        by_job.setdefault(run.job, []).append(run)
    jobs = set(by_job) | {
        checkpoint.job
        for checkpoint in checkpoints
        if checkpoint.kind == PRE_WRITE and checkpoint.job
    }
    points: dict[str, list[str]] = {}
    for job in sorted(jobs):
        runs_of_job = sorted(by_job.get(job, []), key=lambda run: run.started_at)
        successes = [run for run in runs_of_job if run.ok and run.checkpoint]
        latest = successes[-1] if successes else None
        chosen: set[str] = set()
        if latest is not None and latest.checkpoint in present:
            chosen.add(latest.checkpoint)
        since = latest.started_at if latest is not None else None
        used_since = {
            run.checkpoint
            for run in runs_of_job
            if run.checkpoint and (since is None or run.started_at > since)
        }
        candidates = sorted(
            (
                checkpoint
                for checkpoint in checkpoints
                if checkpoint.verified
                and not checkpoint.failed
                and checkpoint.name not in chosen
                and (
                    checkpoint.name in used_since
                    or (
                        checkpoint.kind == PRE_WRITE
                        and checkpoint.job == job
                        and (since is None or _moment(checkpoint) > since)
                    )
                )
            ),
            key=lambda item: (_moment(item), item.name),
        )
        if candidates:
            chosen.update({candidates[0].name, candidates[-1].name})
        for name in chosen:
            points.setdefault(name, []).append(job)
    return points


def plan(
    checkpoints: Sequence[Checkpoint], runs: Iterable[RunUse], limits: Limits
) -> RetentionPlan:
    """Decide, for every checkpoint, whether retention keeps it (see the module's rules)."""
    assigned = roles(checkpoints)
    points = rollback_points(checkpoints, runs)
    ordered = sorted(checkpoints, key=lambda item: (_moment(item), item.name))
    verified = [item for item in ordered if assigned[item.name] in (DAILY, MANUAL, PRE_WRITE)]
    newest = verified[-1].name if verified else None
    ranks: dict[str, int] = {}
    for role in ROLES:
        members = [item for item in reversed(ordered) if assigned[item.name] == role]
        for rank, item in enumerate(members, start=1):
            ranks[item.name] = rank
    decisions = []
    for item in ordered:
        role = assigned[item.name]
        limit = limits.of(role)
        rollback_for = tuple(points.get(item.name, ())) if role != FAILED else ()
        is_newest = item.name == newest
        within = limit is None or ranks[item.name] <= limit
        decisions.append(
            Decision(
                name=item.name,
                role=role,
                keep=within or bool(rollback_for) or is_newest,
                rank=ranks[item.name],
                limit=limit,
                rollback_for=rollback_for,
                newest=is_newest,
                day=_day(item.created_at) if role == DAILY else None,
            )
        )
    return RetentionPlan(tuple(decisions))
