"""A Prometheus textfile per job for node_exporter's textfile collector (temp file + rename).

Written into ``monitoring.prometheus_textfile_dir`` when the config names one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mnemo_ops.core.results import JobResult, Status
from mnemo_ops.settings import Settings

WARNING_CODE = "prometheus-write-failed"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def write_textfile(directory: str | Path | None, result: JobResult) -> None:
    """Write ``mnemo_ops_<job>.prom`` into the node-exporter textfile directory (temp file + rename)."""
    if not directory:
        return
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    job = _label(result.job)
    finished = result.finished_at.timestamp() if result.finished_at else 0
    lines = [
        "# HELP mnemo_ops_last_run_timestamp_seconds When the job last finished.",
        "# TYPE mnemo_ops_last_run_timestamp_seconds gauge",
        f'mnemo_ops_last_run_timestamp_seconds{{job="{job}",status="{result.status}"}} {finished:.0f}',
        "# HELP mnemo_ops_last_duration_seconds How long the last run took.",
        "# TYPE mnemo_ops_last_duration_seconds gauge",
        f'mnemo_ops_last_duration_seconds{{job="{job}"}} {result.duration_s}',
        "# HELP mnemo_ops_last_exit_code Exit code of the last run.",
        "# TYPE mnemo_ops_last_exit_code gauge",
        f'mnemo_ops_last_exit_code{{job="{job}"}} {result.exit_code}',
        "# HELP mnemo_ops_last_changes Writes made by the last run, per kind.",
        "# TYPE mnemo_ops_last_changes gauge",
    ]
    lines += [
        f'mnemo_ops_last_changes{{job="{job}",change="{_label(name)}"}} {count}'
        for name, count in sorted(result.changes.items())
    ]
    target = directory / f"mnemo_ops_{result.job.replace('-', '_')}.prom"
    previous_success = None
    if result.status != Status.OK and target.exists():
        for line in target.read_text(encoding="utf-8").splitlines():
            if line.startswith("mnemo_ops_last_success_timestamp_seconds"):
                previous_success = line
    lines += [
        "# HELP mnemo_ops_last_success_timestamp_seconds When the job last succeeded.",
        "# TYPE mnemo_ops_last_success_timestamp_seconds gauge",
    ]
    if result.status == Status.OK and result.finished_at:
        lines.append(
            f'mnemo_ops_last_success_timestamp_seconds{{job="{job}"}} {result.finished_at.timestamp():.0f}'
        )
    elif previous_success:
        lines.append(previous_success)
    handle, temp_name = tempfile.mkstemp(dir=directory, prefix=".mnemo_ops_", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write("\n".join(lines) + "\n")
    os.chmod(temp_name, 0o644)  # node_exporter runs as another user and must read it
    os.replace(temp_name, target)


def notify(settings: Settings, result: JobResult, phase: str) -> str | None:
    """Write the job's textfile when it finishes (nothing at the start)."""
    if phase != "finish":
        return None
    try:
        write_textfile(settings.monitoring.prometheus_textfile_dir, result)
    except OSError as error:
        return f"could not write the Prometheus textfile: {error}"
    return None
