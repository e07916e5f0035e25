"""Healthchecks-style pings (``/start``, success, ``/fail``, ``/<exit status>``) per job.

The URL is the job's ``jobs.<job>.ping_url`` in the config file; without one nothing is sent.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from mnemo_ops.core.results import JobResult, Status
from mnemo_ops.settings import Settings

PING_TIMEOUT_S = 10
WARNING_CODE = "ping-failed"


def ping(url: str | None, suffix: str = "", body: str = "") -> str | None:
    """POST to ``url + suffix`` (healthchecks protocol); return an error text instead of raising."""
    if not url:
        return None
    target = url.rstrip("/") + suffix
    if not target.startswith(("http://", "https://")):
        return f"ping URL must be http(s): {target}"
    request = urllib.request.Request(target, data=body.encode("utf-8")[:10000], method="POST")
    try:
        with urllib.request.urlopen(request, timeout=PING_TIMEOUT_S):  # noqa: S310 (scheme checked above)
            return None
    except (urllib.error.URLError, OSError, ValueError) as error:
        return f"ping to {target} failed: {error}"


def result_suffix(result: JobResult) -> str:
    """The healthchecks suffix for a finished run: "" for success, "/fail", or "/<exit code>"."""
    if result.status in (Status.OK, Status.DRY_RUN):
        return ""
    if result.status == Status.FAILED:
        return "/fail"
    return f"/{result.exit_code}"


def notify(settings: Settings, result: JobResult, phase: str) -> str | None:
    """Ping ``/start`` when the job starts and the outcome when it finishes."""
    url = settings.job(result.job).ping_url
    if phase == "start":
        return ping(url, "/start")
    return ping(url, result_suffix(result), result.error or "")
