"""Monitoring hooks: plain modules with one signature, ``notify(settings, result, phase) -> problem``.

The runner calls every hook in `HOOKS` at the start and at the end of each real run (never in a dry
run). A hook returns None, or a one-line problem that becomes an info warning with the hook's
``WARNING_CODE``: monitoring must never fail the job it watches.
"""

from mnemo_ops.core.monitoring import healthchecks, prometheus, syslog

HOOKS = (healthchecks, prometheus, syslog)
"""In the order the runner calls them."""
