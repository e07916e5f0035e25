"""What one audit returns: its findings (warnings with stable codes) and numbers for the stats."""

from __future__ import annotations

import dataclasses
from typing import Any

from mnemo_ops.core.results import JobWarning


@dataclasses.dataclass
class AuditOutcome:
    """What one audit found: warnings with stable codes, and numbers for the result's stats."""

    name: str
    warnings: list[JobWarning] = dataclasses.field(default_factory=list)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)

    def warn(self, code: str, severity: str, message: str, fix: str | None = None) -> None:
        """Record one finding."""
        self.warnings.append(JobWarning(code=code, severity=severity, message=message, fix=fix))
