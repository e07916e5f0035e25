"""One line per finished run (and per warning) to the local syslog, when ``monitoring.syslog`` is on."""

from __future__ import annotations

import logging
import logging.handlers
import os

from mnemo_ops.core.results import JobResult, Severity, Status
from mnemo_ops.settings import Settings

WARNING_CODE = "syslog-failed"


def _logger() -> logging.Logger:
    logger = logging.getLogger("mnemo_ops.syslog")
    logger.propagate = False
    if not logger.handlers:
        address = "/dev/log" if os.path.exists("/dev/log") else ("localhost", 514)
        handler = logging.handlers.SysLogHandler(address=address)
        handler.setFormatter(logging.Formatter("mnemo-ops[%(process)d]: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    return logger


def notify(settings: Settings, result: JobResult, phase: str) -> str | None:
    """Log the outcome and each warning when the job finishes."""
    if phase != "finish" or not settings.monitoring.syslog:
        return None
    try:
        logger = _logger()
    except OSError as error:
        return f"could not reach syslog: {error}"
    changes = ", ".join(f"{name}={count}" for name, count in result.changes.items()) or "no changes"
    level = logging.ERROR if result.status == Status.FAILED else logging.INFO
    error = f"; error: {result.error}" if result.error else ""
    logger.log(
        level, "%s %s in %.1fs: %s%s", result.job, result.status, result.duration_s, changes, error
    )
    for warning in result.warnings:
        warning_level = logging.INFO if warning.severity == Severity.INFO else logging.WARNING
        logger.log(
            warning_level,
            "%s %s %s: %s",
            result.job,
            warning.severity,
            warning.code,
            warning.message,
        )
    return None
