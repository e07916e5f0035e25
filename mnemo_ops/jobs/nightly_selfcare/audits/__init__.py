"""The nightly-selfcare audits: one module per area, each ``audit(settings, now) -> AuditOutcome``.

An audit only reads. Each finding is a `JobWarning` with a stable code (prefixed by the audit's
area, see `CODE_PREFIXES`), a severity and, where a command fixes it, that command. The morning
report re-runs the cheap audits that depend on the clock (jobs, backups) and uses the prefixes to
replace the stale findings of the last nightly-selfcare run with fresh ones.
"""

from __future__ import annotations

from datetime import datetime

from mnemo_ops.jobs.nightly_selfcare.audits import (
    auth_files,
    backups,
    database_health,
    jobs,
    memory_blocks,
    skills,
)
from mnemo_ops.jobs.nightly_selfcare.audits.outcome import AuditOutcome
from mnemo_ops.settings import Settings

MODULES = {
    "memory_blocks": memory_blocks,
    "skills": skills,
    "auth_files": auth_files,
    "backups": backups,
    "jobs": jobs,
    "database_health": database_health,
}
AUDIT_MODULES = tuple(MODULES)
"""In the order nightly-selfcare runs them."""


def load_audit(name: str):
    """The module of audit `name` (one of AUDIT_MODULES)."""
    return MODULES[name]


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
        outcome.warn(
            "audit-crashed", "error", f"the {name} audit failed: {type(error).__name__}{detail}"
        )
        return outcome
