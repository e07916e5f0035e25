"""The morning report's three formats, from a `Report` built by hand (no database needed)."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta

import pytest

from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.jobs.nightly_selfcare.report import Report
from mnemo_ops.jobs.nightly_selfcare.report_render import (
    FORMATS,
    render,
    report_path,
    write_report_file,
)
from mnemo_ops.settings import load_settings

GENERATED = datetime(2026, 11, 30, 6, 15, tzinfo=UTC)


def a_report(warnings: list[dict]) -> Report:
    """A report of one failed run with `warnings`, a verified checkpoint and one growing table."""
    return Report(
        generated_at=GENERATED,
        since=GENERATED - timedelta(hours=24),
        db="/srv/memory/mnemosyne.db",
        runs=[
            {
                "job": "bridge-drain",
                "status": "failed",
                "started_at": "2026-11-30T05:00:00+00:00",
                "duration_s": 1.0,
                "warnings": 0,
                "error": "queue | unreadable",
            }
        ],
        jobs=[],
        overdue=[],
        warnings=warnings,
        backups={
            "newest_verified": {"name": "daily-20261130T030000Z"},
            "newest_age_hours": 3.25,
            "checkpoints": 4,
            "failed": [],
        },
        eval_trend=[],
        growth={
            "source": "database",
            "baseline_day": "2026-11-23",
            "tables": {"working_memory": {"now": 1200, "week_ago": 1000, "change": 200}},
            "problem": None,
        },
    )


def test_a_healthy_report_says_nothing_needs_you_in_every_format():
    healthy = a_report([])
    text = render(healthy, "text")
    assert text.splitlines()[1] == "OK: nothing needs you"
    assert "newest verified daily-20261130T030000Z (3.2 h ago)" in text
    assert "working_memory" in text and "+200" in text
    assert render(healthy, "markdown").startswith("# mnemo-ops morning report, 2026-11-30\n")
    data = json.loads(render(healthy, "json"))
    assert data["needs_attention"] is False and data["exit_code"] == 0
    assert set(FORMATS) == {"text", "markdown", "json"}


def test_an_error_heads_every_format_and_markdown_cells_stay_in_their_column():
    failing = a_report(
        [
            {
                "job": "report",
                "code": "job-failing",
                "severity": "error",
                "message": "bridge-drain failed | twice",
                "fix": "mnemo-ops -v run bridge-drain",
            }
        ]
    )
    text = render(failing, "text")
    assert text.splitlines()[1] == "ACTION NEEDED: 1 error"
    assert "           fix: mnemo-ops -v run bridge-drain" in text
    markdown = render(failing, "markdown")
    assert "**ACTION NEEDED: 1 error**" in markdown
    # A "|" inside a message is escaped, so the table keeps its four columns.
    assert "| error | `job-failing` | bridge-drain failed \\| twice | `mnemo-ops -v run" in markdown
    assert (
        "| bridge-drain | failed | 2026-11-30T05:00:00+00:00 | queue \\| unreadable |" in markdown
    )
    assert json.loads(render(failing, "json"))["warnings_by_severity"]["error"] == 1


def test_an_unknown_format_is_a_usage_error():
    with pytest.raises(UsageError, match="--format must be one of text, markdown, json"):
        render(a_report([]), "html")


def test_the_report_file_is_the_markdown_written_private(tmp_path):
    settings = load_settings(db=tmp_path / "mnemosyne.db", state_dir=tmp_path / "state", environ={})
    built = a_report([])
    path = write_report_file(settings, built)
    assert path == report_path(settings, built) == settings.reports_dir / "2026-11-30.md"
    assert path.read_text(encoding="utf-8") == render(built, "markdown")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.reports_dir.stat().st_mode) == 0o700


def test_a_guarded_run_whose_trial_changed_nothing_says_so():
    """Issue 28, item 7: the report showed ``memory-maintain: ok (...; )`` with empty metrics."""
    built = a_report([])
    built.guard = {
        "verdicts": [
            {
                "job": "memory-maintain",
                "run_at": "2026-11-30T05:30:00+00:00",
                "verdict": "ok",
                "before": {},
                "after": {},
                "problems": [],
                "unchanged": True,
            },
            {
                "job": "evening-batch",
                "run_at": "2026-11-29T21:00:00+00:00",
                "verdict": "ok",
                "before": {"recall@5": 0.625},
                "after": {"recall@5": 0.625},
                "problems": [],
            },
        ],
        "trend": [],
    }
    text = render(built, "text")
    assert "memory-maintain: ok (2026-11-30T05:30:00+00:00; the trial changed nothing)" in text
    assert "recall@5 0.625 -> 0.625)" in text
    assert "; )" not in text and "; )" not in render(built, "markdown")
