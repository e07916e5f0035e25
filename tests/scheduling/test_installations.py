"""``mnemo-ops jobs`` tells where each job is installed and warns when one is installed twice."""

from __future__ import annotations

import json
import stat
import sys

from mnemo_ops.scheduling import systemd
from tests.conftest import run_cli


def _fake_crontab(tmp_path):
    table = tmp_path / "crontab.txt"
    program = tmp_path / "fake-crontab"
    program.write_text(
        f"""#!{sys.executable}
import sys, pathlib
table = pathlib.Path({str(table)!r})
if sys.argv[1] == "-l":
    if not table.exists():
        sys.stderr.write("no crontab for user\\n"); sys.exit(1)
    sys.stdout.write(table.read_text())
else:
    table.write_text(sys.stdin.read())
"""
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return table, str(program)


def test_jobs_shows_where_each_job_runs_and_warns_when_twice(sample, tmp_path):
    table, program = _fake_crontab(tmp_path)
    env = {"MNEMO_OPS_CRONTAB": program, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    # A hand-written line for another database does not count for this one.
    table.write_text("0 5 * * * /opt/bin/mnemo-ops --db /elsewhere/m.db -q run backup\n")
    listed = json.loads(run_cli(sample, "--json", "jobs", env=env).stdout)
    assert all(row["installed"] == [] for row in listed["jobs"]) and listed["warnings"] == []

    assert run_cli(sample, "cron", "install", env=env).returncode == 0
    assert run_cli(sample, "hermes", "install", env=env).returncode == 0
    units = tmp_path / "xdg" / "systemd" / "user"
    installed = run_cli(sample, "systemd", "install", "--user", "--no-systemctl", env=env)
    assert installed.returncode == 0, installed.stderr
    (units / "timers.target.wants").mkdir()
    (units / "timers.target.wants" / "mnemo-ops-bridge-drain.timer").symlink_to(
        "../mnemo-ops-bridge-drain.timer"
    )
    # A template instance enabled for this sample's Hermes home counts as systemd too.
    instance = systemd.instance_timer("retrieval-eval", sample.hermes_home)
    (units / "timers.target.wants" / instance).symlink_to("../mnemo-ops-retrieval-eval@.timer")

    result = run_cli(sample, "--json", "jobs", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rows = {row["job"]: row for row in data["jobs"]}
    backup = {item["scheduler"]: item["active"] for item in rows["backup"]["installed"]}
    assert backup == {"crontab": True, "hermes": True, "systemd": False}
    drain = {item["scheduler"] for item in rows["bridge-drain"]["installed"] if item["active"]}
    assert drain == {"crontab", "hermes", "systemd"}
    evaluation = {
        item["scheduler"] for item in rows["retrieval-eval"]["installed"] if item["active"]
    }
    assert evaluation == {"crontab", "hermes", "systemd"}
    twice = {warning["job"] for warning in data["warnings"]}
    assert "backup" in twice and "bridge-drain" in twice
    assert all(w["code"] == "job-installed-twice" for w in data["warnings"])

    text = run_cli(sample, "jobs", env=env)
    assert "mnemo-ops: warning: bridge-drain is installed 3 times" in text.stderr
    assert "mnemo-ops hermes uninstall" in text.stderr

    assert run_cli(sample, "hermes", "uninstall", env=env).returncode == 0
    assert run_cli(sample, "cron", "uninstall", env=env).returncode == 0
    data = json.loads(run_cli(sample, "--json", "jobs", env=env).stdout)
    assert [w["job"] for w in data["warnings"]] == []
