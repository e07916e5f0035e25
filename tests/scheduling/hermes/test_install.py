"""Hermes cron: jobs.json under Hermes' lock, foreign entries byte for byte, one script per job.

Everything goes through the real CLI in a subprocess, the real flock on ``cron/.jobs.lock`` held by
a real second process, and the installed scripts run as Hermes runs them (bash, cwd = their folder,
stdout captured).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo_ops.core.manifests import load_manifests
from mnemo_ops.scheduling.hermes.entries import CONFIG_PAUSE_REASON
from mnemo_ops.scheduling.hermes.install import installed_entries
from mnemo_ops.scheduling.hermes.jobs_file import parse_jobs_text
from mnemo_ops.scheduling.hermes.paths import HermesPaths, job_of_entry
from mnemo_ops.scheduling.hermes.scripts import script_command
from tests.conftest import run_cli
from tests.scheduling.hermes.helpers import FOREIGN


def implemented() -> list[str]:
    """The jobs `cron render` renders (the implemented ones)."""
    return [name for name, manifest in load_manifests().items() if manifest.implemented]


@pytest.fixture
def home(tmp_path):
    """A Hermes home with a jobs.json of foreign entries; returns (paths, env)."""
    hermes = tmp_path / "hermes"
    (hermes / "cron").mkdir(parents=True)
    (hermes / "scripts").mkdir()
    (hermes / "scripts" / "tidy.sh").write_text("#!/bin/sh\necho tidy\n")
    (hermes / "cron" / "jobs.json").write_text(FOREIGN, encoding="utf-8")
    (tmp_path / "home").mkdir()
    env = {
        "HOME": str(tmp_path / "home"),
        "HERMES_HOME": str(hermes),
        "MNEMOSYNE_DATA_DIR": str(hermes / "mnemosyne" / "data"),
        "HERMES_TIMEZONE": "Europe/Berlin",
    }
    return HermesPaths(hermes), env


def hermes(env, *args, **kwargs) -> subprocess.CompletedProcess:
    """``mnemo-ops ARGS`` in `env`."""
    return run_cli(None, *args, env=env, **kwargs)


def test_install_adds_one_job_per_implemented_job_and_a_second_install_changes_nothing(home):
    paths, env = home
    before = paths.jobs_file.read_bytes()
    mode_before = paths.jobs_file.stat().st_mode & 0o777
    first = hermes(env, "--json", "hermes", "install")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert sorted(change["job"] for change in data["jobs"]) == sorted(implemented())
    assert {change["action"] for change in data["jobs"]} == {"add"}

    installed = paths.jobs_file.read_text(encoding="utf-8")
    document = parse_jobs_text(paths.jobs_file, installed)
    ours = [entry for entry in document.entries if job_of_entry(entry)]
    assert [job_of_entry(entry) for entry in ours] == implemented()
    # The foreign entries keep their exact text and their place, ahead of ours.
    original = parse_jobs_text(paths.jobs_file, before.decode())
    for index in range(len(original.entries)):
        assert document.entry_text(index) == original.entry_text(index)
    manifests = load_manifests()
    for entry in ours:
        job = job_of_entry(entry)
        assert len(entry["id"]) == 12 and int(entry["id"], 16) >= 0
        assert entry["no_agent"] is True and entry["script"] == f"mnemo-ops/{job}.sh"
        assert entry["schedule"] == {
            "kind": "cron",
            "expr": manifests[job].schedule,
            "display": manifests[job].schedule,
        }
        assert entry["enabled"] is True and entry["state"] == "scheduled"
        assert entry["deliver"] == "local" and entry["repeat"] == {"times": None, "completed": 0}
        assert entry["next_run_at"].endswith(("+01:00", "+02:00"))  # HERMES_TIMEZONE
        assert (paths.scripts_dir / entry["script"]).is_file()
    assert (paths.scripts_dir / "tidy.sh").read_text() == "#!/bin/sh\necho tidy\n"
    # The file keeps its mode (Hermes' own, here the umask's 0644), as every Hermes writer does.
    assert oct(paths.jobs_file.stat().st_mode & 0o777) == oct(mode_before)

    stamp = paths.jobs_file.stat().st_mtime_ns
    second = hermes(env, "--json", "hermes", "install")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["changed"] is False
    assert paths.jobs_file.read_text(encoding="utf-8") == installed
    assert paths.jobs_file.stat().st_mtime_ns == stamp  # not even rewritten

    removed = hermes(env, "hermes", "uninstall")
    assert removed.returncode == 0, removed.stderr
    assert paths.jobs_file.read_bytes() == before  # exactly the earlier file, updated_at included
    assert not paths.our_scripts_dir.exists()
    assert (paths.scripts_dir / "tidy.sh").exists()


def test_dry_runs_write_nothing_not_even_the_lock_file(home):
    paths, env = home
    before = paths.jobs_file.read_bytes()
    dry = hermes(env, "hermes", "install", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert '+      "name": "mnemo-ops backup",' in dry.stdout
    assert paths.jobs_file.read_bytes() == before
    assert not paths.our_scripts_dir.exists() and not paths.lock_file.exists()
    assert hermes(env, "hermes", "install").returncode == 0
    installed = paths.jobs_file.read_bytes()
    dry = json.loads(hermes(env, "--json", "hermes", "uninstall", "--dry-run").stdout)
    assert dry["dry_run"] is True and {c["action"] for c in dry["jobs"]} == {"remove"}
    assert paths.jobs_file.read_bytes() == installed and paths.our_scripts_dir.is_dir()


def test_hermes_state_on_our_entries_survives_a_reinstall_and_a_schedule_change(home, tmp_path):
    paths, env = home
    assert hermes(env, "hermes", "install").returncode == 0
    # Hermes runs the job and records it (a rewrite in its own format, as its writers do).
    data = json.loads(paths.jobs_file.read_text())
    backup = next(
        e for e in data["jobs"] if isinstance(e, dict) and e.get("name") == "mnemo-ops backup"
    )
    backup.update(
        last_run_at="2026-11-30T02:00:05+01:00",
        last_status="ok",
        next_run_at="2026-12-01T02:00:00+01:00",
    )
    backup_id = backup["id"]
    paths.jobs_file.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    config = tmp_path / "config.yaml"
    config.write_text('jobs:\n  backup:\n    schedule: "0 4 * * *"\n')
    result = json.loads(hermes(env, "--json", "--config", str(config), "hermes", "install").stdout)
    assert {c["job"]: c["action"] for c in result["jobs"]}["backup"] == "update"
    data = json.loads(paths.jobs_file.read_text())
    backup = next(
        e for e in data["jobs"] if isinstance(e, dict) and e.get("name") == "mnemo-ops backup"
    )
    assert backup["id"] == backup_id and backup["last_status"] == "ok"
    assert backup["schedule"]["expr"] == "0 4 * * *"
    assert (
        backup["next_run_at"].startswith(tuple(f"2026-{m}" for m in ("11", "12")))
        or backup["next_run_at"] > "2026"
    )
    assert "T04:00:00" in backup["next_run_at"]  # recomputed for the new schedule
    script = paths.script_path("backup").read_text()
    assert f"--config {config}" in script


def test_a_job_disabled_in_config_is_paused_and_a_users_own_pause_is_kept(home, tmp_path):
    paths, env = home
    config = tmp_path / "config.yaml"
    config.write_text("jobs:\n  bridge-drain:\n    enabled: false\n")
    assert hermes(env, "--config", str(config), "hermes", "install").returncode == 0
    entries = installed_entries(paths)
    assert entries["bridge-drain"]["enabled"] is False
    assert entries["bridge-drain"]["paused_reason"] == CONFIG_PAUSE_REASON
    # The user pauses backup in Hermes; enabling bridge-drain again in the config lifts only ours.
    data = json.loads(paths.jobs_file.read_text())
    for entry in data["jobs"]:
        if isinstance(entry, dict) and entry.get("name") == "mnemo-ops backup":
            entry.update(enabled=False, state="paused", paused_reason="on holiday")
    paths.jobs_file.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    assert hermes(env, "hermes", "install").returncode == 0
    entries = installed_entries(paths)
    assert entries["bridge-drain"]["enabled"] is True and entries["bridge-drain"]["next_run_at"]
    assert (
        entries["backup"]["enabled"] is False and entries["backup"]["paused_reason"] == "on holiday"
    )


@pytest.mark.parametrize(
    "content",
    ['{"jobs": [ {"id": "x", } ], "updated_at": null}', "[]", '{"jobs": {"a": {}}}', "\xff\xfe"],
)
def test_a_malformed_jobs_file_is_reported_and_never_overwritten(home, content):
    paths, env = home
    paths.jobs_file.write_bytes(content.encode("latin-1"))
    before = paths.jobs_file.read_bytes()
    commands = [("hermes", "install")]
    if content.startswith('{"jobs": ['):
        commands += [("hermes", "uninstall"), ("hermes", "status")]
    for args in commands:
        result = hermes(env, *args)
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "nothing was written" in result.stderr
        assert str(paths.jobs_file) in result.stderr and "Traceback" not in result.stderr
        assert paths.jobs_file.read_bytes() == before
    assert not paths.our_scripts_dir.exists()  # not even the scripts went in


def test_a_symlinked_jobs_file_or_a_foreign_script_at_our_path_is_refused(home, tmp_path):
    paths, env = home
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(FOREIGN)
    paths.jobs_file.unlink()
    paths.jobs_file.symlink_to(elsewhere)
    result = hermes(env, "hermes", "install")
    assert result.returncode == 1 and "symlink" in result.stderr
    assert elsewhere.read_text() == FOREIGN and paths.jobs_file.is_symlink()
    paths.jobs_file.unlink()
    paths.jobs_file.write_text(FOREIGN)
    paths.our_scripts_dir.mkdir()
    paths.script_path("backup").write_text("#!/bin/sh\necho mine\n")
    result = hermes(env, "hermes", "install")
    assert result.returncode == 1 and "was not written by mnemo-ops" in result.stderr
    assert paths.script_path("backup").read_text() == "#!/bin/sh\necho mine\n"
    assert paths.jobs_file.read_text() == FOREIGN


HOLDER = """
import fcntl, json, os, sys, tempfile, time
lock_path, jobs_path, hold_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(lock_path, "a+") as lock:
    fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
    # While it holds the lock, this writer (as Hermes does) adds a job and replaces the file.
    data = json.load(open(jobs_path))
    data["jobs"].append({"id": "feedfacecafe", "name": "added meanwhile", "prompt": "hi",
                         "schedule": {"kind": "cron", "expr": "0 9 * * *"}})
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(jobs_path), prefix=".jobs_", suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=2, ensure_ascii=False)
        out.flush(); os.fsync(out.fileno())
    os.replace(tmp, jobs_path)
    print("held", flush=True)
    time.sleep(hold_s)
"""


def _hold(paths, seconds: float) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(paths.lock_file), str(paths.jobs_file), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_install_waits_for_a_writer_holding_the_lock_and_keeps_its_change(home):
    paths, env = home
    holder = _hold(paths, 2.0)
    started = time.monotonic()
    install = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "--json", "hermes", "install", "--wait", "30"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = install.communicate(timeout=60)
    holder.wait(timeout=10)
    assert install.returncode == 0, err
    assert time.monotonic() - started >= 1.5  # it waited for the holder
    data = json.loads(paths.jobs_file.read_text())
    names = [entry.get("name") for entry in data["jobs"] if isinstance(entry, dict)]
    assert "added meanwhile" in names  # re-read under the lock: the other writer's job is kept
    assert "morning brief" in names and "mnemo-ops backup" in names


def test_install_gives_up_with_75_when_the_lock_stays_held(home):
    paths, env = home
    holder = _hold(paths, 5.0)
    try:
        before = paths.jobs_file.read_bytes()
        result = hermes(env, "hermes", "install", "--wait", "0.5")
        assert result.returncode == 75, result.stderr
        assert ".jobs.lock" in result.stderr and result.stderr.count("\n") == 1
        assert paths.jobs_file.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()


def test_uninstall_of_a_file_rewritten_by_hermes_keeps_every_other_job(home):
    paths, env = home
    assert hermes(env, "hermes", "install").returncode == 0
    data = json.loads(paths.jobs_file.read_text())
    data["updated_at"] = "2026-12-01T00:00:00+01:00"  # Hermes saved it since
    paths.jobs_file.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    assert hermes(env, "hermes", "uninstall").returncode == 0
    after = json.loads(paths.jobs_file.read_text())
    assert [e for e in after["jobs"] if job_of_entry(e)] == []
    assert after["jobs"] == json.loads(FOREIGN)["jobs"]
    assert after["updated_at"] != "2026-12-01T00:00:00+01:00"  # a fresh stamp, not the old one


def test_install_creates_jobs_json_in_a_fresh_home_and_refuses_a_missing_one(tmp_path):
    hermes_home = tmp_path / "fresh"
    env = {"HOME": str(tmp_path), "HERMES_HOME": str(hermes_home)}
    missing = hermes(env, "hermes", "install")
    assert missing.returncode == 2 and "no Hermes home" in missing.stderr
    assert not hermes_home.exists()  # a mistyped HERMES_HOME never grows a stray tree
    hermes_home.mkdir()
    result = hermes(env, "hermes", "install")
    assert result.returncode == 0, result.stderr
    data = json.loads((hermes_home / "cron" / "jobs.json").read_text())
    assert [job_of_entry(e) for e in data["jobs"]] == implemented()
    assert set(data) == {"jobs", "updated_at"}
    assert hermes(env, "hermes", "uninstall").returncode == 0
    # Everything the install made goes again: jobs.json, its lock, scripts/, cron/.
    assert list(hermes_home.iterdir()) == []


def test_uninstall_gives_back_the_hermes_home_as_it_was(tmp_path):
    """Issue 28, item 6: jobs.json stayed 0600 (was 0644), scripts/ and cron/.jobs.lock stayed."""
    hermes_home = tmp_path / "home"
    (hermes_home / "cron").mkdir(parents=True)
    jobs_file = hermes_home / "cron" / "jobs.json"
    # As Hermes writes it: json.dump, no final newline.
    jobs_file.write_text('{\n  "jobs": [],\n  "updated_at": "2026-11-01T00:00:00+00:00"\n}')
    jobs_file.chmod(0o644)
    before = {path: path.read_bytes() for path in hermes_home.rglob("*") if path.is_file()}
    tree = sorted(hermes_home.rglob("*"))
    env = {"HOME": str(tmp_path), "HERMES_HOME": str(hermes_home)}
    dry = hermes(env, "hermes", "install", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    # The diff ends its last line, as diff -u does, before the summary that follows it.
    assert "\n\\ No newline at end of file\n" in dry.stdout
    assert all(
        line.startswith(("---", "+++", "@@", " ", "+", "-", "\\"))
        or "jobs.json:" in line
        or "scripts/mnemo-ops:" in line
        or "would change" in line
        for line in dry.stdout.splitlines()
    ), dry.stdout
    assert hermes(env, "hermes", "install").returncode == 0
    assert hermes(env, "hermes", "uninstall").returncode == 0
    assert sorted(hermes_home.rglob("*")) == tree
    assert {path: path.read_bytes() for path in hermes_home.rglob("*") if path.is_file()} == before
    assert jobs_file.stat().st_mode & 0o777 == 0o644


def test_status_and_render(home):
    paths, env = home
    status = json.loads(hermes(env, "--json", "hermes", "status").stdout)
    assert status["foreign_jobs"] == 3 and not any(row["installed"] for row in status["jobs"])
    installed = hermes(env, "--json", "hermes", "install", "--deliver", "telegram:99")
    assert installed.returncode == 0
    if "monthly-maintenance" in implemented():  # 7200 s against Hermes' 3600 s script timeout
        assert any("monthly-maintenance" in w for w in json.loads(installed.stdout)["warnings"])
    (paths.hermes_home / "config.yaml").write_text("cron:\n  script_timeout_seconds: 9000\n")
    assert json.loads(hermes(env, "--json", "hermes", "status").stdout)["warnings"] == []
    # With room for its own timeout, the capped script is out of date until installed again.
    assert hermes(env, "hermes", "install").returncode == 0
    status = json.loads(hermes(env, "--json", "hermes", "status").stdout)
    assert all(row["installed"] and row["up_to_date"] for row in status["jobs"])
    assert {row["deliver"] for row in status["jobs"]} == {"telegram:99"}
    # A later install without --deliver keeps each job's target; the config can set another.
    assert hermes(env, "hermes", "install").returncode == 0
    assert {e["deliver"] for e in installed_entries(paths).values()} == {"telegram:99"}
    config = paths.hermes_home / "mnemo-ops.yaml"
    config.write_text("scheduling:\n  hermes:\n    deliver: origin\n")
    status = json.loads(hermes(env, "--json", "--config", str(config), "hermes", "status").stdout)
    assert not any(row["up_to_date"] for row in status["jobs"])
    assert hermes(env, "--config", str(config), "hermes", "install").returncode == 0
    assert {e["deliver"] for e in installed_entries(paths).values()} == {"origin"}
    rendered = json.loads(hermes(env, "--json", "hermes", "render").stdout)
    assert sorted(rendered["scripts"]) == sorted(
        str(paths.script_path(job)) for job in implemented()
    )
    assert hermes(env, "hermes", "install", "--deliver", "two words").returncode == 2


def _run_as_hermes(paths, job: str) -> subprocess.CompletedProcess:
    """Run `job`'s script as Hermes' scheduler does: bash, cwd = its folder, stdout captured."""
    script = paths.script_path(job)
    return subprocess.run(
        ["bash", str(script)],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"]},  # Hermes' children get little
    )


@pytest.mark.heavy
def test_the_scripts_run_as_hermes_runs_them(sample):
    env = sample.environ()
    result = run_cli(sample, "hermes", "install")
    assert result.returncode == 0, result.stderr
    paths = HermesPaths(sample.hermes_home)

    healthy = _run_as_hermes(paths, "backup")
    assert healthy.returncode == 0 and healthy.stdout == "", healthy

    # Another writer holds the mnemo-ops writer lock: skipped (75), a silent success for Hermes.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from mnemo_ops.core.lock import WriterLock, lock_path_for\n"
            "with WriterLock(lock_path_for(Path(sys.argv[1]), Path(sys.argv[2])), 'test'):\n"
            "    print('held', flush=True); time.sleep(60)\n",
            str(sample.state_dir),
            str(sample.db_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        skipped = _run_as_hermes(paths, "memory-maintain")
        assert skipped.returncode == 0 and skipped.stdout == "", skipped
    finally:
        holder.kill()
        holder.wait()

    # A failing run: one line on stdout (what Hermes delivers as the alert), non-zero exit.
    sample.db_path.rename(sample.db_path.with_suffix(".moved"))
    failing = _run_as_hermes(paths, "backup")
    assert failing.returncode == 2, failing
    assert failing.stdout.count("\n") == 1 and failing.stdout.startswith("mnemo-ops: ")
    assert "database not found" in failing.stdout and failing.stdout.endswith("(exit 2)\n")


@pytest.mark.heavy
def test_the_report_job_delivers_the_report_only_when_something_needs_the_user(sample):
    assert run_cli(sample, "hermes", "install").returncode == 0
    paths = HermesPaths(sample.hermes_home)
    first = _run_as_hermes(paths, "nightly-selfcare")
    # A fresh sample has no backup yet: an error the user must hear about, delivered as an alert.
    assert first.returncode == 1 and "backup-missing" in first.stdout, first
    assert _run_as_hermes(paths, "backup").returncode == 0
    assert run_cli(sample, "run", "nightly-selfcare").returncode in (0, 1)
    config_text = Path(paths.script_path("nightly-selfcare")).read_text()
    assert "--quiet-if-ok" in config_text and "--since 24h" in config_text


def test_a_job_longer_than_hermes_script_timeout_is_capped_in_its_script_with_a_warning(home):
    paths, env = home
    manifests = {name: load_manifests()[name] for name in implemented()}
    longer = sorted(name for name, manifest in manifests.items() if manifest.timeout > 3600)
    assert longer == ["monthly-maintenance"]  # jobs/monthly-maintenance.yaml: 7200 s

    installed = hermes(env, "--json", "hermes", "install")

    assert installed.returncode == 0, installed.stderr
    warnings = json.loads(installed.stdout)["warnings"]
    assert any("monthly-maintenance" in w and "stops it after 3300 s" in w for w in warnings)
    for name in manifests:
        command = script_command(paths, name)
        # Hermes stops a script after 3,600 s: the job stops itself 5 minutes before.
        assert ("--timeout" in command) == (name in longer), command
    assert script_command(paths, "monthly-maintenance")[-2:] == ["--timeout", "3300"]

    (paths.hermes_home / "config.yaml").write_text("cron:\n  script_timeout_seconds: 9000\n")
    assert hermes(env, "hermes", "install").returncode == 0
    assert "--timeout" not in script_command(paths, "monthly-maintenance")


def test_run_timeout_stops_the_job_and_records_it(sample):
    ran = run_cli(sample, "--json", "run", "evening-batch", "--dry-run", "--timeout", "1")

    assert ran.returncode == 1, ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == "failed" and "timed out" in result["error"], result
