"""Healthchecks pings to a real local HTTP server: the paths of a run, and a ping that fails never
fails the job."""

from __future__ import annotations

import http.server
import threading

import pytest

from mnemo_ops.core.monitoring import healthchecks
from mnemo_ops.core.results import JobResult
from mnemo_ops.jobs import run_job
from mnemo_ops.settings import load_settings


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records each POST (path, body) on its server; answers 500 under ``/broken``, 200 elsewhere."""

    def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
        self.server.received.append((self.path, body))
        self.send_response(500 if self.path.startswith("/broken") else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *arguments) -> None:  # noqa: A002 (the base's name)
        """Quiet: the test reads what was received, not the log."""


@pytest.fixture
def server():
    """A local HTTP server on a free port; yields its base URL and the list of what it received."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    httpd.received = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.received
    finally:
        httpd.shutdown()
        httpd.server_close()


def settings_pinging(sample, tmp_path, job: str, url: str):
    """The sample's settings with ``jobs.<job>.ping_url`` set to `url`."""
    config = tmp_path / "config.yaml"
    config.write_text(f"jobs:\n  {job}:\n    ping_url: {url}\n", encoding="utf-8")
    return load_settings(
        db=sample.db_path, state_dir=sample.state_dir, config=config, environ=sample.environ()
    )


def test_a_real_run_pings_start_then_success(sample, tmp_path, server):
    base, received = server
    settings = settings_pinging(sample, tmp_path, "backup", f"{base}/ping/backup-uuid/")
    result = run_job(settings, "backup", show_progress=False)
    assert result.status == "ok"
    assert [path for path, _ in received] == ["/ping/backup-uuid/start", "/ping/backup-uuid"]
    assert not [warning for warning in result.warnings if warning.code == "ping-failed"]


def test_each_outcome_has_its_path_and_a_failure_sends_its_error(sample, tmp_path, server):
    base, received = server
    settings = settings_pinging(sample, tmp_path, "bridge-drain", f"{base}/ping/drain")
    failed = JobResult(job="bridge-drain")
    failed.fail("queue folder unreadable")
    skipped = JobResult(job="bridge-drain", status="skipped")
    for result, phase in ((failed, "start"), (failed, "finish"), (skipped, "finish")):
        assert healthchecks.notify(settings, result, phase) is None
    assert received == [
        ("/ping/drain/start", ""),
        ("/ping/drain/fail", "queue folder unreadable"),
        ("/ping/drain/75", ""),  # the exit status of a skipped run (lock held)
    ]


def test_a_ping_that_fails_is_an_info_warning_and_the_job_still_succeeds(sample, tmp_path, server):
    base, received = server
    settings = settings_pinging(sample, tmp_path, "backup", f"{base}/broken")
    result = run_job(settings, "backup", show_progress=False)
    assert result.status == "ok" and result.exit_code == 0
    pings = [warning for warning in result.warnings if warning.code == "ping-failed"]
    assert pings and all(warning.severity == "info" for warning in pings)
    assert "500" in pings[0].message
    assert [path for path, _ in received] == ["/broken/start", "/broken"]
    assert healthchecks.ping("ftp://example.invalid/ping") == (
        "ping URL must be http(s): ftp://example.invalid/ping"
    )
