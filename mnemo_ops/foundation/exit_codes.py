"""Process exit codes, documented in the README ("Exit codes") and docs/contracts.md."""

OK = 0
"""The command or job succeeded (warnings allowed)."""

FAILED = 1
"""The job failed, the eval regressed below its baseline, or the report holds an error."""

USAGE = 2
"""Usage or configuration error, or a missing / unreadable / non-Mnemosyne database."""

TEMPFAIL = 75
"""Skipped: another mnemo-ops writer holds the lock (EX_TEMPFAIL, so cron does not alarm)."""

INTERRUPTED_SIGINT = 130
"""Interrupted by SIGINT (Ctrl-C): stopped at a safe point and recorded (128 + 2, as a shell says)."""

INTERRUPTED_SIGTERM = 143
"""Interrupted by SIGTERM (cron, systemd, Kubernetes stopping it): stopped at a safe point and
recorded (128 + 15)."""
