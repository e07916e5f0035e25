"""``mnemo-ops report``: formats, the report file, --quiet-if-ok, exit codes, and the library API."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from mnemo_ops.core import state
from mnemo_ops.evaluation import history as eval_history
from mnemo_ops.foundation.clock import utc_now
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.jobs.nightly_selfcare import report, report_render
from tests.jobs.nightly_selfcare.helpers import (
    record_healthy_day,
    record_run,
    settings_for,
    write_checkpoint,
    write_config,
)


@pytest.fixture
def healthy(sample, tmp_path):
    """A sample home where everything ran on time, with a fresh verified checkpoint."""
    config = write_config(tmp_path)
    settings = settings_for(sample, config)
    now = utc_now()
    record_healthy_day(settings, now - timedelta(minutes=5))
    record_run(
        settings,
        "nightly-selfcare",
        "ok",
        now - timedelta(minutes=4),
        warnings=[("skill-folder-missing", "info", "no skills folder")],
    )
    write_checkpoint(settings, now - timedelta(hours=3))
    return settings, config


def test_quiet_if_ok_prints_nothing_when_healthy(healthy, cli):
    settings, config = healthy
    completed = cli("--config", str(config), "report", "--quiet-if-ok")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout == "" and completed.stderr == ""
    written = settings.reports_dir / f"{utc_now():%Y-%m-%d}.md"
    assert written.exists() and oct(written.stat().st_mode & 0o777) == "0o600"
    assert "OK: nothing needs you" in written.read_text()


def test_warning_prints_but_exits_0_and_error_exits_1(healthy, cli):
    settings, config = healthy
    record_run(
        settings,
        "memory-block-migrate",
        "ok",
        utc_now(),
        warnings=[
            ("memory-block-near-limit", "warning", "MEMORY.md holds 1,900 of 2,200 characters")
        ],
    )
    warned = cli("--config", str(config), "report", "--quiet-if-ok")
    assert warned.returncode == 0 and "ATTENTION: 1 warning" in warned.stdout
    assert "memory-block-near-limit" in warned.stdout
    record_run(settings, "bridge-drain", "failed", utc_now(), error="queue folder unreadable")
    failed = cli("--config", str(config), "report", "--quiet-if-ok")
    assert failed.returncode == 1
    assert "ACTION NEEDED" in failed.stdout and "job-failing" in failed.stdout
    assert "fix: mnemo-ops -v run bridge-drain" in failed.stdout


def test_formats_and_json(healthy, cli):
    settings, config = healthy
    markdown = cli("--config", str(config), "report", "--format", "markdown", "--since", "7d")
    assert markdown.returncode == 0
    assert (
        markdown.stdout.startswith("# mnemo-ops morning report")
        and "## Memory growth" in markdown.stdout
    )
    assert "last 7 days" in markdown.stdout
    as_json = cli("--config", str(config), "report", "--format", "json")
    data = json.loads(as_json.stdout)
    assert data["exit_code"] == 0 and data["needs_attention"] is False
    assert data["runs"]["counts"]["ok"] >= 2
    assert data["warnings_by_severity"]["info"] >= 1
    global_json = cli("--config", str(config), "--json", "report")
    assert json.loads(global_json.stdout)["written"].endswith(".md")
    bad = cli("report", "--since", "yesterday")
    assert bad.returncode == 2 and "--since" in bad.stderr and bad.stdout == ""
    bad_format = cli("report", "--format", "html")
    assert bad_format.returncode == 2
    assert "Example" in cli("report", "--help").stdout


def test_no_checkpoint_no_eval_no_history_are_tolerated(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path))
    built = report.build_report(settings)
    assert built.backups["newest_verified"] is None and built.eval_trend == []
    assert (
        built.growth["baseline_day"] is None and built.growth["tables"]["working_memory"]["now"] > 0
    )
    # No scheduler runs the jobs yet: one info line, and nothing is called overdue.
    assert {w["code"] for w in built.warnings} == {"backup-missing", "job-not-installed"}
    assert built.overdue == [] and built.exit_code == 1
    for output_format in report_render.FORMATS:
        assert report_render.render(built, output_format)
    with pytest.raises(UsageError):
        report_render.render(built, "html")


def test_eval_trend_from_eval_history(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path))
    ledger = state.open_state(settings.state_db_path)
    eval_history.HISTORY.ensure(ledger)
    start = datetime(2026, 11, 20, 3, 45, tzinfo=UTC)
    for day in range(9):
        ledger["eval_history"].insert(
            {
                "run_at": (start + timedelta(days=day)).isoformat(),
                "suite": "default",
                "suite_sha256": "x",
                "engine": "mnemosyne",
                "k": 10,
                "regressions": 0,
                "status": "ok",
                "metrics_json": json.dumps({"recall@10": 0.80 + day * 0.01, "mrr@10": 0.5}),
            }
        )
    ledger.close()
    built = report.build_report(settings)
    assert len(built.eval_trend) == report.EVAL_TREND_RUNS
    assert built.eval_trend[-1]["metrics"]["recall@10"] == pytest.approx(0.88)
    text = report_render.render(built, "text")
    assert "recall@10 0.880 (+0.060 over 7 runs)" in text


def _record_misses(settings, days_ago: float, misses: dict, suite: str = "default") -> None:
    ledger = state.open_state(settings.state_db_path)
    eval_history.record(
        ledger,
        run_at=(utc_now() - timedelta(days=days_ago)).isoformat(),
        suite=suite,
        suite_sha256="x",
        engine="mnemosyne",
        k=10,
        metrics={"recall@10": 0.8},
        regressions=0,
        status="ok",
        misses=misses,
    )
    ledger.close()


def test_the_report_names_the_weeks_largest_category_of_misses(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path))
    assert report.build_report(settings).eval_misses == {}
    suite = str(settings.state_dir / "eval" / "suite.jsonl")

    def misses(garden: int, travel: int) -> dict:
        return {
            "garden": {"cases": 12, "missed": garden, "examples": [f"g{n}" for n in range(garden)]},
            "travel": {"cases": 12, "missed": travel, "examples": [f"t{n}" for n in range(travel)]},
        }

    _record_misses(settings, 20, misses(0, 12), suite)  # older than the week: not counted
    _record_misses(settings, 3, misses(3, 1), suite)
    _record_misses(settings, 2, misses(2, 1), suite)
    _record_misses(settings, 1, misses(4, 2), suite)
    built = report.build_report(settings)
    largest = built.eval_misses["largest"]
    assert (largest["category"], largest["missed"], largest["runs"]) == ("garden", 9, 3)
    assert (largest["latest_missed"], largest["cases"]) == (4, 12)
    assert built.eval_misses["explain"] == "mnemo-ops eval explain --only misses"
    for output_format in ("text", "markdown"):
        text = report_render.render(built, output_format)
        assert "largest category of misses in the last 7 days: garden" in text
        assert "4 of 12 in the latest: g0, g1, g2" in text
        assert "why: mnemo-ops eval explain --only misses" in text
    assert report.build_report(settings).to_dict()["eval_misses"]["largest"]["category"] == "garden"
    # The newest run's suite decides; another suite's runs name their own suite in the pointer.
    _record_misses(settings, 0.5, misses(0, 5), "/elsewhere/suite.jsonl")
    other = report.build_report(settings).eval_misses
    assert other["largest"]["category"] == "travel" and other["runs"] == 1
    assert other["explain"] == "mnemo-ops eval explain --only misses --suite /elsewhere/suite.jsonl"


def test_the_report_says_when_no_case_missed(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path))
    _record_misses(settings, 1, {"fact": {"cases": 3, "missed": 0, "examples": []}})
    text = report_render.render(report.build_report(settings), "text")
    assert "Eval misses: no case missed in the 1 run(s) of the last 7 days" in text


def test_open_warnings_come_from_the_latest_completed_run_of_each_job(healthy):
    settings, _ = healthy
    now = utc_now()
    record_run(
        settings,
        "monthly-maintenance",
        "ok",
        now - timedelta(minutes=3),
        warnings=[("fts-repaired", "warning", "fts_working was rebuilt")],
    )
    record_run(settings, "monthly-maintenance", "skipped", now - timedelta(minutes=2))
    built = report.build_report(settings)
    assert ("monthly-maintenance", "fts-repaired") in {
        (w["job"], w["code"]) for w in built.warnings
    }
    record_run(settings, "monthly-maintenance", "ok", now - timedelta(minutes=1))
    assert "fts-repaired" not in {w["code"] for w in report.build_report(settings).warnings}
    # Clock-dependent findings recorded by an older nightly run are replaced by fresh ones.
    record_run(
        settings,
        "nightly-selfcare",
        "ok",
        now,
        warnings=[("backup-missing", "error", "stale finding")],
    )
    assert "backup-missing" not in {w["code"] for w in report.build_report(settings).warnings}


@pytest.mark.parametrize("text, hours", [("24h", 24), ("90m", 1.5), ("7d", 168), ("2w", 336)])
def test_parse_period(text, hours):
    assert report.parse_period(text) == timedelta(hours=hours)


def test_report_reads_state_without_writing_it(healthy):
    settings, _ = healthy
    before = settings.state_db_path.read_bytes()
    report.build_report(settings)
    assert settings.state_db_path.read_bytes() == before
    assert not os.path.exists(f"{settings.state_db_path}-journal")
    assert (
        sqlite3.connect(settings.state_db_path).execute("SELECT count(*) FROM runs").fetchone()[0]
        > 0
    )


def test_a_missing_database_is_critical(sample, tmp_path, cli):
    settings = settings_for(sample, write_config(tmp_path))
    record_run(
        settings,
        "nightly-selfcare",
        "ok",
        utc_now(),
        warnings=[("skill-folder-missing", "info", "none")],
    )
    for suffix in ("", "-wal", "-shm"):
        os.unlink(f"{sample.db_path}{suffix}") if os.path.exists(
            f"{sample.db_path}{suffix}"
        ) else None
    built = report.build_report(settings)
    assert (
        built.warnings[0]["code"] == "db-unreadable" and built.warnings[0]["severity"] == "critical"
    )
    assert built.exit_code == 1
    # The command says it in one line and exits 2, as every command does for a missing database.
    completed = cli("report", "--no-write")
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.startswith("mnemo-ops: error: database not found")
