"""The nightly-selfcare audits: one module per area, each ``audit(settings, now) -> AuditOutcome``.

An audit only reads. Each finding is a `JobWarning` with a stable code (prefixed by the audit's
area, see `CODE_PREFIXES`), a severity and, where a command fixes it, that command. The morning
report re-runs the cheap audits that depend on the clock (jobs, backups) and uses the prefixes to
replace the stale findings of the last nightly-selfcare run with fresh ones.
"""

from __future__ import annotations

import dataclasses
import importlib
from datetime import datetime
from typing import Any

from mnemo_ops.core.results import JobWarning
from mnemo_ops.settings import Settings

AUDIT_MODULES = ("memory_blocks", "skills", "auth_files", "backups", "jobs", "database_health")
"""In the order nightly-selfcare runs them."""


@dataclasses.dataclass
class AuditOutcome:
    """What one audit found: warnings with stable codes, and numbers for the result's stats."""

    name: str
    warnings: list[JobWarning] = dataclasses.field(default_factory=list)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)

    def warn(self, code: str, severity: str, message: str, fix: str | None = None) -> None:
        """Record one finding."""
        self.warnings.append(JobWarning(code=code, severity=severity, message=message, fix=fix))


def load_audit(name: str):
    """The module of audit `name` (one of AUDIT_MODULES)."""
    return importlib.import_module(f"mnemo_ops.audits.{name}")


def code_prefixes(name: str) -> tuple[str, ...]:
    """The code prefixes audit `name` owns (so a fresh run can replace its older findings)."""
    return tuple(load_audit(name).CODE_PREFIXES)


def run_audit(name: str, settings: Settings, now: datetime) -> AuditOutcome:
    """Run one audit; an unexpected crash becomes an error finding instead of hiding the others."""
    module = load_audit(name)
    try:
        return module.audit(settings, now)
    except Exception as error:  # one broken audit must not stop the rest of the night's checks
        # An exception's text may quote what was being parsed: never show it for files holding secrets.
        detail = "" if getattr(module, "HANDLES_SECRETS", False) else f": {error}"
        outcome = AuditOutcome(name)
        outcome.warn("audit-crashed", "error", f"the {name} audit failed: {type(error).__name__}{detail}")
        return outcome
