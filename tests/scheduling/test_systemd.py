"""systemd units: rendered from the manifests, verified (systemd-analyze verify when installed, else
parsed), OnCalendar equal to the cron expression, install/uninstall leaving other units alone."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter

from mnemo_ops.core.manifests import load_manifests
from mnemo_ops.scheduling import calendar, systemd
from tests.conftest import run_cli

HAVE_ANALYZE = shutil.which("systemd-analyze") is not None

# Every manifest schedule plus overrides a user may write; each must elapse exactly when croniter fires.
OVERRIDES = [
    "*/5 * * * *",
    "15 */4 * * *",
    "0 9-17 * * mon-fri",
    "0 0 1,15 * 1",
    "30 3 1 */3 *",
    "0 22-2 * * *",
    "5/15 * * * *",
    "0 0 * * */2",
    "0 12 * jan,jul 7",
    "10,20,40 1-5,9 2-9/3 * *",
    "@weekly",
    "@hourly",
    "@monthly",
    "0 0 29 2 *",
    "0 0 * * fri-tue/2",  # a wrapping range with a step, as croniter reads it
    "0 0 */1 * */1",  # both day fields start with '*': cron daemons and croniter both require both
]
REFUSED = [
    "0 0 L * *",
    "0 0 15W * *",
    "0 0 ? * 1",
    "H 0 * * *",
    "0 0 */2 * 1",
    "0 0 1 * */1",
    "0 0 1-31 * 1,*/2",  # croniter requires both day fields, cron daemons either
    "0 5-5 * * *",  # croniter reads the whole cycle, cron daemons hour 5
    "0 0 * * 1#2",
    "@reboot",
    "0 0 * * * *",
]


def schedules() -> list[str]:
    """The manifest schedules and the overrides."""
    return sorted({m.schedule for m in load_manifests().values()}) + OVERRIDES


def implemented() -> list[str]:
    """The implemented jobs."""
    return [name for name, manifest in load_manifests().items() if manifest.implemented]


def croniter_times(expression: str, start: datetime, count: int) -> list[str]:
    """The first `count` fire times after `start` (UTC), as systemd prints them."""
    iterator = croniter(expression, start)
    return [iterator.get_next(datetime).strftime("%a %Y-%m-%d %H:%M:%S") for _ in range(count)]


def systemd_times(values: list[str], start: datetime, count: int) -> list[str]:
    """The first `count` elapses of a timer with these OnCalendar lines (their union), by systemd."""
    found: set[str] = set()
    for value in values:
        output = subprocess.run(
            [
                "systemd-analyze",
                "calendar",
                f"--iterations={count}",
                f"--base-time={start:%Y-%m-%d %H:%M:%S} UTC",
                value,
            ],
            capture_output=True,
            text=True,
            env={"TZ": "UTC", "PATH": "/usr/bin:/bin"},
            check=True,
        ).stdout
        found |= set(re.findall(r"(?:Next elapse|Iter\. #\d+): (\w{3} [\d-]+ [\d:]+) UTC", output))
    return sorted(found, key=lambda text: text[4:])[:count]


@pytest.mark.skipif(not HAVE_ANALYZE, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("expression", schedules())
def test_on_calendar_elapses_exactly_when_cron_fires(expression):
    start = datetime(2026, 2, 27, 23, 50, tzinfo=UTC)  # across a month end and a leap-free February
    values = calendar.on_calendar(expression, "test")
    by_systemd = systemd_times(values, start, 60)
    # systemd's calendar ends in 2199: a February 29 schedule has fewer elapses before that.
    count = len(by_systemd) if expression == "0 0 29 2 *" else 60
    assert count >= 30 and by_systemd == croniter_times(expression, start, count)


@pytest.mark.parametrize("expression", schedules())
def test_expanded_fields_agree_with_croniter(expression):
    """Without systemd: the expanded value sets, combined as OnCalendar combines them (cron's
    either-day rule as two lines), give croniter's fire times."""
    fields = calendar.parse(expression, "test")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    produced: list[str] = []
    day = start
    while len(produced) < 200 and day.year < 2040:
        weekday = (day.weekday() + 1) % 7  # cron: Sunday = 0
        in_month = day.day in fields.days_of_month
        in_week = weekday in fields.days_of_week
        if fields.day_of_month_restricted and fields.day_of_week_restricted:
            matches = in_month or in_week
        else:
            matches = in_month and in_week
        if matches and day.month in fields.months:
            produced += [
                day.replace(hour=hour, minute=minute).strftime("%a %Y-%m-%d %H:%M:%S")
                for hour in sorted(fields.hours)
                for minute in sorted(fields.minutes)
            ]
        day += timedelta(days=1)
    produced = [moment for moment in produced if moment[4:] > "2026-01-01 00:00:00"][:200]
    assert produced and produced == croniter_times(expression, start, len(produced))


@pytest.mark.parametrize("expression", REFUSED)
def test_untranslatable_expressions_are_refused_naming_the_job(expression):
    with pytest.raises(calendar.UntranslatableSchedule, match=r"^backup: cannot translate"):
        calendar.on_calendar(expression, "backup")


def test_a_config_override_that_cannot_be_translated_exits_2_naming_the_job(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text('jobs:\n  bridge-drain:\n    schedule: "0 0 */2 * 1"\n')
    result = run_cli(
        None, "--config", str(config), "systemd", "render", env={"HOME": str(tmp_path)}
    )
    assert result.returncode == 2 and result.stderr.startswith("mnemo-ops: error: bridge-drain:")
    assert result.stderr.count("\n") == 1


@pytest.mark.skipif(shutil.which("systemd-escape") is None, reason="systemd-escape missing")
@pytest.mark.parametrize("path", ["/srv/agents/dana/.hermes", "/home/a b/.hé", "/x//y/", "/"])
def test_escape_path_matches_systemd_escape(path):
    expected = subprocess.run(
        ["systemd-escape", "--path", path], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert systemd.escape_path(path) == expected
    if path != "/":
        assert systemd.unescape_path(expected) == "/" + "/".join(p for p in path.split("/") if p)


def _render(tmp_path, *args, env=None):
    result = run_cli(
        None, "--json", "systemd", "render", *args, env={"HOME": str(tmp_path), **(env or {})}
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["units"]


def test_rendered_units_pass_the_verifier(tmp_path):
    units = _render(tmp_path)
    assert sorted(units) == sorted(
        f"mnemo-ops-{job}{suffix}"
        for job in implemented()
        for suffix in (".service", ".timer", "@.service", "@.timer")
    )
    folder = tmp_path / "units"
    folder.mkdir()
    for name, text in units.items():
        # A template is verified as one of its instances (the verifier refuses a bare template).
        (folder / name.replace("@.", "@srv-agents-dana-.hermes.")).write_text(text)
    for name, text in units.items():
        sections = systemd.parse_unit(text)
        if name.endswith(".service"):
            service = dict(sections["Service"])
            assert service["Type"] == "oneshot" and service["SuccessExitStatus"] == "75"
            assert " -q run " in service["ExecStart"]
            heavy = name.split("@")[0].removesuffix(".service").removeprefix("mnemo-ops-")
            if heavy in ("backup", "evening-batch", "monthly-maintenance", "memory-maintain"):
                assert service["IOSchedulingClass"] == "idle" and service["Nice"] == "10"
            environment = [value for key, value in sections["Service"] if key == "Environment"]
            if "@" in name:
                # The instance names the home: the install's own home is never carried into it.
                assert environment[0] == "HERMES_HOME=%f" and "--db" not in service["ExecStart"]
                assert not any("HERMES_HOME=" in value for value in environment[1:])
                assert not any("MNEMOSYNE_DATA_DIR=" in value for value in environment)
            else:
                assert "--db" in service["ExecStart"]
                assert environment[0].startswith('"HERMES_HOME=')
        else:
            timer = dict(sections["Timer"])
            assert timer["Persistent"] == "true" and timer["RandomizedDelaySec"] == "300"
            assert sections["Install"] == [("WantedBy", "timers.target")]
            assert all(
                key in ("OnCalendar", "Persistent", "RandomizedDelaySec")
                for key, _ in sections["Timer"]
            )
    if HAVE_ANALYZE:
        verified = subprocess.run(
            ["systemd-analyze", "verify", *sorted(str(path) for path in folder.iterdir())],
            capture_output=True,
            text=True,
        )
        # Any unknown key or bad value is reported on stderr, even when the exit code is 0.
        assert verified.returncode == 0 and verified.stderr == "", verified.stderr


def test_the_verifier_would_catch_a_wrong_unit(tmp_path):
    """The check above is not a formality: a misspelt key and a bad calendar value fail it."""
    if not HAVE_ANALYZE:
        with pytest.raises(ValueError):
            systemd.parse_unit("[Timer]\nthis is not a setting\n")
        return
    timer = _render(tmp_path)["mnemo-ops-backup.timer"].replace("Persistent=", "Persistant=")
    timer = timer.replace("OnCalendar=*-*-* 02:00:00", "OnCalendar=*-*-* 25:00:00")
    path = tmp_path / "mnemo-ops-backup.timer"
    path.write_text(timer)
    verified = subprocess.run(
        ["systemd-analyze", "verify", str(path)], capture_output=True, text=True
    )
    assert "Persistant" in verified.stderr and "25:00:00" in verified.stderr


@pytest.fixture
def fake_systemctl(tmp_path):
    """A stand-in for systemctl that records its calls (no systemd runs in the test machine) and,
    like the real one, links enabled timers into timers.target.wants/."""
    log = tmp_path / "systemctl.log"
    program = tmp_path / "fake-systemctl"
    program.write_text(
        f"""#!{sys.executable}
import json, pathlib, sys
args = sys.argv[1:]
with open({str(log)!r}, "a") as out:
    out.write(json.dumps(args) + "\\n")
"""
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return log, {"MNEMO_OPS_SYSTEMCTL": str(program), "HOME": str(tmp_path)}


def _calls(log) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_install_is_idempotent_and_leaves_foreign_units_byte_identical(tmp_path, fake_systemctl):
    log, env = fake_systemctl
    folder = tmp_path / "units"
    folder.mkdir()
    foreign = {
        "nginx.service": b"[Service]\nExecStart=/usr/sbin/nginx\n",
        "mnemo-ops-notes.timer": b"[Timer]\nOnCalendar=daily\n",  # our prefix, not our marker
        "backup-home.timer": b"[Timer]\nOnCalendar=weekly\n",
    }
    for name, data in foreign.items():
        (folder / name).write_bytes(data)
    (folder / "timers.target.wants").mkdir()
    (folder / "timers.target.wants" / "backup-home.timer").symlink_to("../backup-home.timer")

    dry = run_cli(
        None,
        "--json",
        "systemd",
        "install",
        "--user",
        "--unit-dir",
        str(folder),
        "--dry-run",
        env=env,
    )
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["dry_run"] is True and not _calls(log)
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        [*foreign, "timers.target.wants"]
    )

    first = run_cli(
        None, "--json", "systemd", "install", "--user", "--unit-dir", str(folder), env=env
    )
    assert first.returncode == 0, first.stderr
    written = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    assert len(written) == len(foreign) + 4 * len(implemented())
    assert all(written[name] == data for name, data in foreign.items())
    calls = _calls(log)
    # First a read-only question (is there a user manager to talk to?), then the changes.
    assert calls[0] == ["--user", "show-environment"]
    assert calls[1] == ["--user", "daemon-reload"]
    assert calls[2][:3] == ["--user", "enable", "--now"]
    assert sorted(calls[2][3:]) == sorted(f"mnemo-ops-{job}.timer" for job in implemented())

    second = json.loads(
        run_cli(
            None, "--json", "systemd", "install", "--user", "--unit-dir", str(folder), env=env
        ).stdout
    )
    assert second["changed"] is False
    assert {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()} == written

    # Enabled timers (the links systemctl would make), then uninstall disables and removes ours only.
    wants = folder / "timers.target.wants"
    (wants / "mnemo-ops-backup.timer").symlink_to("../mnemo-ops-backup.timer")
    (wants / "mnemo-ops-backup@srv-a-.hermes.timer").symlink_to("../mnemo-ops-backup@.timer")
    removed = run_cli(
        None, "--json", "systemd", "uninstall", "--user", "--unit-dir", str(folder), env=env
    )
    assert removed.returncode == 0, removed.stderr
    disable = _calls(log)[-2]
    assert disable[:3] == ["--user", "disable", "--now"]
    assert sorted(disable[3:]) == ["mnemo-ops-backup.timer", "mnemo-ops-backup@srv-a-.hermes.timer"]
    assert {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()} == foreign
    assert (wants / "backup-home.timer").is_symlink()


def test_without_a_user_bus_install_writes_nothing_and_names_no_systemctl(tmp_path):
    """Issue 28, item 6: 36 units were written, then a bus error that did not say --no-systemctl."""
    program = tmp_path / "no-bus-systemctl"
    program.write_text("#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n")
    program.chmod(0o755)
    folder = tmp_path / "units"
    env = {"MNEMO_OPS_SYSTEMCTL": str(program), "HOME": str(tmp_path)}
    result = run_cli(None, "systemd", "install", "--user", "--unit-dir", str(folder), env=env)
    assert result.returncode == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("mnemo-ops: error")]
    assert "Failed to connect to bus" in line and "nothing was written" in line
    assert "--no-systemctl" in line
    assert not folder.exists() or list(folder.iterdir()) == []
    written = run_cli(
        None, "systemd", "install", "--user", "--unit-dir", str(folder), "--no-systemctl", env=env
    )
    assert written.returncode == 0 and len(list(folder.iterdir())) == 4 * len(implemented())


def test_install_refuses_a_unit_of_that_name_that_is_not_ours(tmp_path, fake_systemctl):
    log, env = fake_systemctl
    folder = tmp_path / "units"
    folder.mkdir()
    (folder / "mnemo-ops-backup.service").write_text("[Service]\nExecStart=/bin/true\n")
    result = run_cli(None, "systemd", "install", "--unit-dir", str(folder), env=env)
    assert result.returncode == 1 and "not managed by mnemo-ops" in result.stderr
    assert [path.name for path in folder.iterdir()] == ["mnemo-ops-backup.service"]
    assert not _calls(log)


def test_install_for_other_homes_enables_template_instances(tmp_path, fake_systemctl):
    log, env = fake_systemctl
    folder = tmp_path / "units"
    result = run_cli(
        None, "systemd", "install", "--unit-dir", str(folder), "--no-systemctl",
        "--home", "/srv/agents/dana/.hermes", env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        f"mnemo-ops-{job}@.{kind}" for job in implemented() for kind in ("service", "timer")
    )
    assert not _calls(log)
    result = run_cli(
        None, "--json", "systemd", "install", "--unit-dir", str(folder),
        "--home", "/srv/agents/dana/.hermes", "--home", "/srv/agents/eli/.hermes", env=env,
    )  # fmt: skip
    enable = next(call for call in _calls(log) if "enable" in call)
    assert "mnemo-ops-backup@srv-agents-eli-.hermes.timer" in enable
    assert len(enable) == 2 + 2 * len(implemented())


def test_a_symlinked_unit_or_unit_folder_is_never_followed(tmp_path, fake_systemctl):
    log, env = fake_systemctl
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.service").write_text("[Service]\nExecStart=/bin/true\n")
    folder = tmp_path / "units"
    folder.mkdir()
    (folder / "mnemo-ops-backup.timer").symlink_to(elsewhere / "keep.service")
    result = run_cli(None, "systemd", "install", "--unit-dir", str(folder), env=env)
    assert result.returncode == 1 and "symlink" in result.stderr
    linked = tmp_path / "linked-units"
    linked.symlink_to(elsewhere)
    result = run_cli(None, "systemd", "install", "--unit-dir", str(linked), env=env)
    assert result.returncode == 1 and "symlink" in result.stderr
    assert [path.name for path in elsewhere.iterdir()] == ["keep.service"] and not _calls(log)
