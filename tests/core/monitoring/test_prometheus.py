"""The Prometheus textfile: the metric names node_exporter collects, replaced by one rename."""

from __future__ import annotations

import os
import stat
from datetime import timedelta

from mnemo_ops.core.monitoring import prometheus
from mnemo_ops.core.results import JobResult
from mnemo_ops.settings import load_settings

METRICS = (
    "mnemo_ops_last_run_timestamp_seconds",
    "mnemo_ops_last_duration_seconds",
    "mnemo_ops_last_exit_code",
    "mnemo_ops_last_changes",
    "mnemo_ops_last_success_timestamp_seconds",
)


def finished(status: str = "ok") -> JobResult:
    """A finished bridge-drain result of `status` that counted two kinds of writes."""
    result = JobResult(job="bridge-drain")
    result.count("items_ingested", 3)
    result.count("files_drained")
    if status == "failed":
        result.fail("queue folder unreadable")
    result.finish()
    result.finished_at = result.started_at + timedelta(seconds=2.5)
    return result


def metric_lines(text: str) -> dict[str, list[str]]:
    """Sample lines by metric name (HELP/TYPE comments left out)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            found.setdefault(line.split("{", 1)[0], []).append(line)
    return found


def test_the_textfile_holds_every_metric_with_its_help_and_type(tmp_path):
    result = finished()
    prometheus.write_textfile(tmp_path, result)
    path = tmp_path / "mnemo_ops_bridge_drain.prom"
    text = path.read_text(encoding="utf-8")
    for name in METRICS:
        assert f"# HELP {name} " in text and f"# TYPE {name} gauge" in text
    samples = metric_lines(text)
    assert set(samples) == set(METRICS)
    assert samples["mnemo_ops_last_exit_code"] == ['mnemo_ops_last_exit_code{job="bridge-drain"} 0']
    assert samples["mnemo_ops_last_duration_seconds"] == [
        'mnemo_ops_last_duration_seconds{job="bridge-drain"} 2.5'
    ]
    assert samples["mnemo_ops_last_changes"] == [
        'mnemo_ops_last_changes{job="bridge-drain",change="files_drained"} 1',
        'mnemo_ops_last_changes{job="bridge-drain",change="items_ingested"} 3',
    ]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # node_exporter runs as another user
    assert [entry.name for entry in tmp_path.iterdir()] == [path.name]  # no temp file left


def test_the_file_is_replaced_by_a_rename_and_a_failure_keeps_the_last_success(tmp_path):
    prometheus.write_textfile(tmp_path, finished("ok"))
    path = tmp_path / "mnemo_ops_bridge_drain.prom"
    before = path.read_text(encoding="utf-8")
    [success] = metric_lines(before)["mnemo_ops_last_success_timestamp_seconds"]
    with path.open(encoding="utf-8") as reader:  # a collector in the middle of reading it
        old_inode = os.fstat(reader.fileno()).st_ino
        prometheus.write_textfile(tmp_path, finished("failed"))
        assert reader.read() == before  # the old file stays whole for its reader
    assert path.stat().st_ino != old_inode  # a new file was renamed over it, never rewritten
    after = metric_lines(path.read_text(encoding="utf-8"))
    assert after["mnemo_ops_last_exit_code"] == ['mnemo_ops_last_exit_code{job="bridge-drain"} 1']
    assert after["mnemo_ops_last_run_timestamp_seconds"][0].startswith(
        'mnemo_ops_last_run_timestamp_seconds{job="bridge-drain",status="failed"}'
    )
    assert after["mnemo_ops_last_success_timestamp_seconds"] == [success]


def test_notify_writes_only_at_the_finish_and_reports_a_write_error(tmp_path):
    folder = tmp_path / "textfiles"
    config = tmp_path / "config.yaml"
    config.write_text(f"monitoring:\n  prometheus_textfile_dir: {folder}\n", encoding="utf-8")
    settings = load_settings(db=tmp_path / "m.db", state_dir=tmp_path / "s", config=config)
    assert prometheus.notify(settings, finished(), "start") is None and not folder.exists()
    assert prometheus.notify(settings, finished(), "finish") is None
    assert (folder / "mnemo_ops_bridge_drain.prom").exists()
    # The configured folder is a file now (a typo, a broken mount): the write fails, not the job.
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("", encoding="utf-8")
    config.write_text(f"monitoring:\n  prometheus_textfile_dir: {blocked}\n", encoding="utf-8")
    settings = load_settings(db=tmp_path / "m.db", state_dir=tmp_path / "s", config=config)
    problem = prometheus.notify(settings, finished(), "finish")
    assert problem is not None and problem.startswith("could not write the Prometheus textfile")
