"""Optional monitoring: healthchecks-style pings and a Prometheus textfile per job.

Neither may fail a job: a ping that cannot be delivered becomes an info warning. Both are skipped in
dry runs (the runner does not call them).
"""

from __future__ import annotations

import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from mnemo_ops.core.results import JobResult

PING_TIMEOUT_S = 10


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
    if result.status in ("ok", "dry-run"):
        return ""
    if result.status == "failed":
        return "/fail"
    return f"/{result.exit_code}"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def write_prometheus(directory: str | Path | None, result: JobResult) -> None:
    """Write ``mnemo_ops_<job>.prom`` into the node-exporter textfile directory (temp file + rename)."""
    if not directory:
        return
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    job = _label(result.job)
    lines = [
        "# HELP mnemo_ops_last_run_timestamp_seconds When the job last finished.",
        "# TYPE mnemo_ops_last_run_timestamp_seconds gauge",
        f'mnemo_ops_last_run_timestamp_seconds{{job="{job}",status="{result.status}"}} '
        f"{result.finished_at.timestamp() if result.finished_at else 0:.0f}",
        "# HELP mnemo_ops_last_duration_seconds How long the last run took.",
        "# TYPE mnemo_ops_last_duration_seconds gauge",
        f'mnemo_ops_last_duration_seconds{{job="{job}"}} {result.duration_s}',
        "# HELP mnemo_ops_last_exit_code Exit code of the last run.",
        "# TYPE mnemo_ops_last_exit_code gauge",
        f'mnemo_ops_last_exit_code{{job="{job}"}} {result.exit_code}',
        "# HELP mnemo_ops_last_changes Writes made by the last run, per kind.",
        "# TYPE mnemo_ops_last_changes gauge",
    ]
    lines += [f'mnemo_ops_last_changes{{job="{job}",change="{_label(name)}"}} {count}'
              for name, count in sorted(result.changes.items())]
    target = directory / f"mnemo_ops_{result.job.replace('-', '_')}.prom"
    previous_success = None
    if result.status != "ok" and target.exists():
        for line in target.read_text(encoding="utf-8").splitlines():
            if line.startswith("mnemo_ops_last_success_timestamp_seconds"):
                previous_success = line
    lines += [
        "# HELP mnemo_ops_last_success_timestamp_seconds When the job last succeeded.",
        "# TYPE mnemo_ops_last_success_timestamp_seconds gauge",
    ]
    if result.status == "ok" and result.finished_at:
        lines.append(f'mnemo_ops_last_success_timestamp_seconds{{job="{job}"}} {result.finished_at.timestamp():.0f}')
    elif previous_success:
        lines.append(previous_success)
    handle, temp_name = tempfile.mkstemp(dir=directory, prefix=".mnemo_ops_", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write("\n".join(lines) + "\n")
    os.chmod(temp_name, 0o644)  # node_exporter runs as another user and must read it
    os.replace(temp_name, target)
