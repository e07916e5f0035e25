"""The result object every job returns, and its JSON form (docs/contracts.md, "Results")."""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime
from typing import Any

from mnemo_ops.foundation import exit_codes
from mnemo_ops.foundation.clock import isoformat, utc_now


class Severity(enum.StrEnum):
    """How much a finding needs a human, lowest first (the order is the ranking)."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for info up to 3 for critical."""
        return list(Severity).index(self)


class Status(enum.StrEnum):
    """How a run ended."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    DRY_RUN = "dry-run"
    INTERRUPTED = "interrupted"
    """Stopped at a safe point by SIGINT or SIGTERM (exit 130 or 143); ``stats.interrupted`` says
    which signal and in which stage."""


def severity_rank(value: str) -> int:
    """The rank of a severity given as text (ValueError for an unknown one)."""
    return Severity(value).rank


@dataclasses.dataclass
class JobWarning:
    """One finding: a stable code, a severity and a human message (optionally the fixing command)."""

    code: str
    severity: Severity
    message: str
    fix: str | None = None

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)  # ValueError for an unknown severity

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: code, severity, message (and fix when there is one)."""
        data: dict[str, Any] = {
            "code": self.code,
            "severity": str(self.severity),
            "message": self.message,
        }
        if self.fix:
            data["fix"] = self.fix
        return data


@dataclasses.dataclass
class JobResult:
    """What a job did (or, in a dry run, would do): counts of writes, stats, warnings, error."""

    job: str
    dry_run: bool = False
    status: Status = Status.OK
    started_at: datetime = dataclasses.field(default_factory=utc_now)
    finished_at: datetime | None = None
    db: str | None = None
    checkpoint: str | None = None
    changes: dict[str, int] = dataclasses.field(default_factory=dict)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    warnings: list[JobWarning] = dataclasses.field(default_factory=list)
    error: str | None = None
    exit_code_override: int | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "status":
            value = Status(value)  # ValueError for a status the contract does not know
        super().__setattr__(name, value)

    def warn(
        self, code: str, message: str, severity: str = Severity.WARNING, fix: str | None = None
    ) -> JobWarning:
        """Record a finding and return it."""
        warning = JobWarning(code=code, severity=severity, message=message, fix=fix)
        self.warnings.append(warning)
        return warning

    def count(self, name: str, amount: int = 1) -> None:
        """Add `amount` to the change counter `name` (created at zero)."""
        self.changes[name] = self.changes.get(name, 0) + amount

    def fail(self, message: str) -> None:
        """Mark the result failed with a one-line error message."""
        self.status = Status.FAILED
        self.error = message

    def interrupt(self, signal_name: str, exit_code: int, stage: str) -> None:
        """Mark the result interrupted by `signal_name` while in `stage`, exiting `exit_code`.

        A warning (``run-interrupted``) goes with it, so the morning report shows the stop until a
        later successful run of the job no longer raises it."""
        self.status = Status.INTERRUPTED
        self.exit_code_override = exit_code
        self.stats["interrupted"] = {"signal": signal_name, "stage": stage}
        self.error = (
            f"interrupted by {signal_name} during {stage}: stopped at a safe point, what was "
            "not committed was rolled back"
        )
        self.warn(
            "run-interrupted",
            f"{self.job} was interrupted by {signal_name} during {stage}; the next run goes on",
            severity=Severity.WARNING,
            fix=f"mnemo-ops run {self.job}",
        )

    def finish(self) -> JobResult:
        """Stamp the finish time and settle the status of a dry run; return self."""
        self.finished_at = utc_now()
        if self.dry_run and self.status == Status.OK:
            self.status = Status.DRY_RUN
        return self

    @property
    def duration_s(self) -> float:
        """Seconds between start and finish (0 while unfinished)."""
        if self.finished_at is None:
            return 0.0
        return round((self.finished_at - self.started_at).total_seconds(), 3)

    @property
    def worst_severity(self) -> Severity | None:
        """The highest severity among the warnings, or None when there are none."""
        if not self.warnings:
            return None
        return max((warning.severity for warning in self.warnings), key=lambda s: s.rank)

    @property
    def exit_code(self) -> int:
        """The process exit code this result maps to (README, "Exit codes")."""
        if self.exit_code_override is not None:
            return self.exit_code_override
        if self.status == Status.FAILED:
            return exit_codes.FAILED
        if self.status == Status.SKIPPED:
            return exit_codes.TEMPFAIL
        if self.status == Status.INTERRUPTED:  # no signal known: say SIGTERM, the stop asked of us
            return exit_codes.INTERRUPTED_SIGTERM
        return exit_codes.OK

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON contract (docs/contracts.md, "Results")."""
        return {
            "job": self.job,
            "status": str(self.status),
            "dry_run": self.dry_run,
            "started_at": isoformat(self.started_at),
            "finished_at": isoformat(self.finished_at),
            "duration_s": self.duration_s,
            "db": self.db,
            "checkpoint": self.checkpoint,
            "changes": dict(self.changes),
            "stats": self.stats,
            "warnings": [warning.to_dict() for warning in self.warnings],
            "error": self.error,
        }
