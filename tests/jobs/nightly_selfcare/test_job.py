"""nightly-selfcare end to end: dry-run purity, a simulated week (freezegun), staging, and secrets.

The week runs the real job through the real runner (lock, ledger) on the sample home, day by day
with the clock frozen at the job's 13:00 slot; the other jobs' runs are ledger rows written through
the real ledger code, and their checkpoints are manifest folders in the documented layout.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from mnemo_ops.core import state
from mnemo_ops.jobs import run_job
from mnemo_ops.jobs.nightly_selfcare import report, row_count_history
from tests.jobs.nightly_selfcare.helpers import (
    age_file,
    install_in_hermes,
    record_healthy_day,
    settings_for,
    write_checkpoint,
    write_config,
)
from tests.purity import assert_unchanged, snapshot

DAY0 = datetime(2026, 12, 1, 13, 0, tzinfo=UTC)
ROWS_PER_DAY = 5


def add_memories(sample, day: int, count: int = ROWS_PER_DAY) -> None:
    """New working-memory rows, as the live agent would write them during the day."""
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.executemany(
            "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance) "
            "VALUES (?, ?, 'conversation', ?, 'week', 0.5)",
            [
                (
                    uuid.uuid4().hex[:16],
                    f"day {day} note {index} about the garden",
                    (DAY0 + timedelta(days=day)).isoformat(),
                )
                for index in range(count)
            ],
        )
    connection.close()


def full_snapshot(sample) -> dict:
    return snapshot(
        sample.db_path,
        sample.state_dir,
        sample.memory_blocks_dir,
        extra_dirs=(sample.directory / "home", sample.hermes_home / "logs"),
    )


def plant_expired(sample, now: datetime) -> dict:
    settings = settings_for(sample)
    paths = {
        "queue": settings.queue_dir / "cur" / "processed.json",
        "report": settings.reports_dir / "2026-01-01.md",
        "log": sample.hermes_home / "logs" / "gateway.log",
    }
    ages = {"queue": 31, "report": 120, "log": 40}
    for key, path in paths.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{key} content\n", encoding="utf-8")
        age_file(path, now - timedelta(days=ages[key]))
    return paths


@pytest.mark.heavy
def test_dry_run_reports_real_counts_and_changes_nothing(sample, cli, tmp_path):
    paths = plant_expired(sample, datetime.now(UTC))
    state.open_state(sample.state_dir / "state.db").close()
    before = full_snapshot(sample)
    completed = cli("--json", "run", "nightly-selfcare", "--dry-run")
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["status"] == "dry-run"
    assert result["changes"]["files_staged"] == 3
    assert result["changes"]["reports_written"] == 1
    assert result["changes"]["row_counts_recorded"] == 6
    assert sorted(result["stats"]["staging"]["files"]) == sorted(
        str(path) for path in paths.values()
    )
    assert_unchanged(before, full_snapshot(sample))
    # The real run then makes exactly those changes.
    real = json.loads(cli("--json", "run", "nightly-selfcare").stdout)
    assert real["status"] == "ok" and real["changes"] == result["changes"]
    assert not any(path.exists() for path in paths.values())
    assert os.path.exists(real["stats"]["report"]["path"])
    # A second run with nothing new: nothing staged, no row counts rewritten.
    again = json.loads(cli("--json", "run", "nightly-selfcare").stdout)
    assert again["changes"]["files_staged"] == 0 and again["changes"]["row_counts_recorded"] == 0


@pytest.mark.heavy
def test_a_manifest_left_behind_by_a_killed_run_is_rewritten_by_the_next(sample, cli):
    # A run killed after its last move but before the day's index was written leaves entries the
    # manifest does not list; with nothing new to stage, the next run must still bring it up to date.
    plant_expired(sample, datetime.now(UTC))
    first = json.loads(cli("--json", "run", "nightly-selfcare").stdout)
    assert first["changes"]["files_staged"] == 3
    settings = settings_for(sample)
    (day,) = [path for path in settings.quarantine_dir.iterdir() if path.is_dir()]
    manifest = day / "manifest.json"
    listed = json.loads(manifest.read_text())
    assert len(listed["entries"]) == 3
    # The index as a run killed before it would leave it: one entry short, then none at all.
    manifest.write_text(json.dumps({**listed, "entries": listed["entries"][:2]}))
    before = full_snapshot(sample)
    dry = json.loads(cli("--json", "run", "nightly-selfcare", "--dry-run").stdout)
    assert dry["changes"]["quarantine_manifests_repaired"] == 1
    assert_unchanged(before, full_snapshot(sample))
    real = json.loads(cli("--json", "run", "nightly-selfcare").stdout)
    assert real["changes"]["quarantine_manifests_repaired"] == 1
    assert json.loads(manifest.read_text()) == listed
    manifest.unlink()
    cli("--json", "run", "nightly-selfcare")
    assert json.loads(manifest.read_text()) == listed
    again = json.loads(cli("--json", "run", "nightly-selfcare").stdout)
    assert again["changes"]["quarantine_manifests_repaired"] == 0


def run_day(settings, day: int, hour: int = 13, minute: int = 0):
    with freeze_time(DAY0 + timedelta(days=day, hours=hour - 13, minutes=minute)):
        return run_job(settings, "nightly-selfcare", show_progress=False)


def report_at(settings, moment: datetime) -> report.Report:
    with freeze_time(moment):
        return report.build_report(settings)


def warning_codes(built: report.Report) -> dict[str, str]:
    return {warning["code"]: warning["severity"] for warning in built.warnings}


def test_a_simulated_week(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path))
    install_in_hermes(settings, DAY0 - timedelta(days=1))  # scheduled before the week starts
    cur = settings.queue_dir / "cur"
    processed = cur / "processed-early.json"
    processed.write_text('{"content": "done"}', encoding="utf-8")
    age_file(processed, DAY0 - timedelta(days=25, hours=1))  # 30 days old on day 5

    results, reports = {}, {}
    for day in range(8):
        morning = DAY0 + timedelta(days=day, hours=-11)  # 02:00
        add_memories(sample, day)
        if day not in (5, 6, 7):  # the backup stops working after day 4
            write_checkpoint(settings, morning)
        skip = ("backup",) if day in (5, 6, 7) else ()
        failed = ("bridge-drain",) if day == 3 else ()
        record_healthy_day(
            settings, DAY0 + timedelta(days=day, minutes=-10), skip=skip, failed=failed
        )
        if day == 6:  # nightly-selfcare did not run on day 6; the user asks for the report at 14:30
            reports[day] = report_at(settings, DAY0 + timedelta(days=day, hours=1, minutes=30))
            continue
        results[day] = run_day(settings, day)
        assert results[day].status == "ok", results[day].error
        assert processed.exists() == (day < 5)
        reports[day] = report_at(settings, DAY0 + timedelta(days=day, minutes=5))

    # Day 3: bridge-drain failed -> an error in that day's report; the next good run clears it.
    day3 = reports[3]
    assert warning_codes(day3)["job-failing"] == "error" and day3.exit_code == 1
    assert day3.run_counts["failed"] == 1
    day4 = reports[4]
    assert "job-failing" not in warning_codes(day4)
    assert day4.run_counts["failed"] == 0 and day4.backups["newest_age_hours"] == 11.1

    # Day 6: no backup since day 4 02:00 (59 h) and nightly-selfcare missed its slot.
    day6 = reports[6]
    assert warning_codes(day6)["backup-stale"] == "warning"
    overdue = {row["job"] for row in day6.overdue}
    assert "nightly-selfcare" in overdue
    assert "backup" in overdue
    assert warning_codes(day6)["job-overdue"] == "warning"

    # Day 7: the backup is 83 h old -> error; the job's own result carries it too.
    assert {w.code: w.severity for w in results[7].warnings}["backup-stale"] == "error"
    day7 = reports[7]
    assert day7.exit_code == 1
    assert "nightly-selfcare" not in {row["job"] for row in day7.overdue}
    # Runs in the last 24 h: the other jobs of day 7 (backup skipped) and nightly-selfcare.
    others = len(
        [
            job
            for job in state.last_runs(state.open_state_readonly(settings.state_db_path))
            if job not in ("nightly-selfcare", "backup")
        ]
    )
    assert day7.run_counts == {"ok": others + 1, "failed": 0, "skipped": 0, "interrupted": 0}

    # Memory growth: day 7 against day 0's record, 7 days x 5 rows later.
    assert day7.growth["baseline_day"] == "2026-12-01"
    assert day7.growth["tables"]["working_memory"]["change"] == 7 * ROWS_PER_DAY
    assert day7.growth["tables"]["graph_edges"]["change"] == 0
    ledger = state.open_state_readonly(settings.state_db_path)
    days = [
        row[0]
        for row in ledger.execute(
            f"SELECT DISTINCT day FROM {row_count_history.TABLE} ORDER BY day"
        )
    ]
    assert days == [
        "2026-12-01",
        "2026-12-02",
        "2026-12-03",
        "2026-12-04",
        "2026-12-05",
        "2026-12-06",
        "2026-12-08",
    ]
    nightly_rows = ledger.execute(
        "SELECT count(*) FROM runs WHERE job = 'nightly-selfcare'"
    ).fetchone()[0]
    assert nightly_rows == 7

    # The staged queue file (day 5) is listed in quarantine with its original path.
    entries = [
        entry
        for entry in json.loads(
            (settings.quarantine_dir / "2026-12-06" / "manifest.json").read_text()
        )["entries"]
    ]
    assert [entry["original_path"] for entry in entries] == [str(processed)]
    assert reports[5].quarantine == {
        "staged_in_period": 1,
        "bytes_in_period": 19,
        "staged_total": 1,
    }
    assert (
        reports[7].quarantine["staged_in_period"] == 0
        and reports[7].quarantine["staged_total"] == 1
    )
    # Each day's report file exists, 0600.
    written = sorted(path.name for path in settings.reports_dir.glob("2026-12-*.md"))
    assert written == [
        "2026-12-01.md",
        "2026-12-02.md",
        "2026-12-03.md",
        "2026-12-04.md",
        "2026-12-05.md",
        "2026-12-06.md",
        "2026-12-08.md",
    ]
    assert oct(os.stat(settings.reports_dir / "2026-12-08.md").st_mode & 0o777) == "0o600"
    day7_markdown = (settings.reports_dir / "2026-12-08.md").read_text()
    assert "backup-stale" in day7_markdown and "| working_memory | 75 | +35 |" in day7_markdown


SECRETS = (
    "sk-or-v1-PLANTED-DOTENV-SECRET-7f3a",
    "eyJPLANTED.AUTHJSON.ACCESS-TOKEN-91c2",
    "PLANTED-REFRESH-TOKEN-55d0",
    "PLANTED-BROKEN-LINE-SECRET-0b7e",
)


def plant_secrets(sample) -> None:
    home = sample.hermes_home
    auth = {
        "version": 1,
        "active_provider": "nous",
        "providers": {
            "nous": {
                "access_token": SECRETS[1],
                "refresh_token": SECRETS[2],
                "expires_at": "2020-01-01T00:00:00Z",
                "agent_key": SECRETS[1] + "-agent",
                "agent_key_expires_at": "2020-01-01T00:00:00Z",
            },
            "old": {"api_key": SECRETS[0] + "-old", "expires_at": "2021-06-01T00:00:00Z"},
        },
    }
    (home / "auth.json").write_text(json.dumps(auth), encoding="utf-8")
    os.chmod(home / "auth.json", 0o644)
    (home / ".env").write_text(
        f"OPENROUTER_API_KEY={SECRETS[0]}\n{SECRETS[3]}\nTOKEN_EXPIRES_AT=2020-02-02\n",
        encoding="utf-8",
    )
    os.chmod(home / ".env", 0o640)


@pytest.mark.heavy
def test_planted_secrets_never_appear_anywhere(sample, cli):
    plant_secrets(sample)
    outputs = []
    for args in (
        ("run", "nightly-selfcare"),
        ("-v", "run", "nightly-selfcare"),
        ("--json", "run", "nightly-selfcare"),
        ("-q", "run", "nightly-selfcare"),
        ("report",),
        ("report", "--format", "markdown"),
        ("report", "--format", "json"),
        ("--json", "report"),
        ("jobs",),
        ("status",),
        ("--json", "quarantine", "list"),
    ):
        completed = cli(*args)
        assert completed.returncode in (0, 1), (args, completed.stderr)
        outputs += [completed.stdout, completed.stderr]
    findings = json.loads(cli("--json", "run", "nightly-selfcare").stdout)["warnings"]
    codes = {warning["code"] for warning in findings}
    assert {
        "auth-file-permissions",
        "auth-expired",
        "auth-file-unparseable",
        "auth-token-refresh-due",
    } <= codes
    stored = b""
    for path in sample.state_dir.rglob("*"):
        if path.is_file():
            stored += path.read_bytes()
    ledger_json = "".join(
        row[0]
        for row in sqlite3.connect(sample.state_dir / "state.db").execute(
            "SELECT result_json FROM runs"
        )
    )
    assert "auth-expired" in ledger_json  # the finding is recorded, its secret is not
    assert b"auth-file-permissions" in stored
    for secret in SECRETS:
        fragment = secret[8:24]  # any sizeable piece of it
        for text in outputs:
            assert fragment not in text
        assert fragment.encode() not in stored
        assert fragment not in ledger_json


def test_day_one_after_the_first_backup_nothing_is_overdue(sample, cli):
    """Issue 28, item 3: a fresh install was told it was late (8 job-overdue warnings)."""
    assert cli("run", "backup").returncode == 0
    completed = cli("--json", "run", "nightly-selfcare")
    assert completed.returncode == 0, completed.stderr
    found = [warning["code"] for warning in json.loads(completed.stdout)["warnings"]]
    assert "job-overdue" not in found and found.count("job-not-installed") == 1
    reported = cli("--json", "report")
    data = json.loads(reported.stdout)
    assert data["overdue"] == []
    assert [w["code"] for w in data["warnings"]].count("job-not-installed") == 1
    text = cli("report").stdout
    assert "missed its" not in text and "Overdue jobs: none" in text
