"""The report tells the current state: a warning that a later run no longer raises shows once as
resolved (with when), and no longer counts towards the headline or the exit code. Real runs of the
real jobs on a sample home written by the real Mnemosyne."""

from __future__ import annotations

import json
from datetime import timedelta

from mnemo_ops.foundation.clock import utc_now
from mnemo_ops.jobs.nightly_selfcare import report
from tests.jobs.nightly_selfcare.helpers import record_run, settings_for, write_config

ENTRY_SEPARATOR = "\n§\n"


def fill_user_block(sample, share: float) -> None:
    """USER.md filled to `share` of Hermes' default limit (1,375 characters)."""
    entry = "Prefers short answers and metric units in every reply."
    count = max(1, int(1375 * share) // (len(entry) + len(ENTRY_SEPARATOR)))
    (sample.memory_blocks_dir / "USER.md").write_text(ENTRY_SEPARATOR.join([entry] * count))


def report_json(cli) -> tuple[int, dict]:
    completed = cli("--json", "report", "--no-write")
    return completed.returncode, json.loads(completed.stdout)


def test_a_warning_fixed_by_a_later_run_shows_as_resolved(sample, cli):
    assert cli("run", "backup").returncode == 0  # a fresh checkpoint: no backup finding
    fill_user_block(sample, 0.9)
    warned = cli("run", "nightly-selfcare")
    assert warned.returncode == 0, warned.stdout + warned.stderr
    code, before = report_json(cli)
    assert "memory-block-near-limit" in {w["code"] for w in before["warnings"]}
    assert before["needs_attention"] and before["resolved"] == []

    fill_user_block(sample, 0.3)  # the user (or memory-block-migrate) made room
    assert cli("run", "nightly-selfcare").returncode == 0
    code, after = report_json(cli)
    assert code == 0
    assert "memory-block-near-limit" not in {w["code"] for w in after["warnings"]}
    resolved = [entry for entry in after["resolved"] if entry["code"] == "memory-block-near-limit"]
    assert len(resolved) == 1  # once, not once per earlier run
    assert resolved[0]["job"] == "nightly-selfcare" and resolved[0]["severity"] == "warning"
    assert resolved[0]["raised_at"] < resolved[0]["resolved_at"]
    assert resolved[0]["resolved_by"].startswith("nightly-selfcare run at ")
    assert not after["needs_attention"] and after["warnings_by_severity"]["warning"] == 0

    text = cli("report", "--no-write")
    assert "OK: nothing needs you" in text.stdout
    assert "RESOLVED memory-block-near-limit (nightly-selfcare, was warning)" in text.stdout
    markdown = cli("report", "--format", "markdown", "--no-write").stdout
    assert "## Resolved in the period" in markdown

    # A day later it is history: resolved before the period, it is not shown again.
    later = report.build_report(
        settings_for(sample, None), since=timedelta(hours=1), now=utc_now() + timedelta(days=1)
    )
    assert "memory-block-near-limit" not in {entry["code"] for entry in later.resolved}


def test_only_a_successful_run_resolves_and_a_new_raise_reopens(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path))
    now = utc_now()
    problem = [("fts-repaired", "warning", "fts_working was rebuilt")]
    record_run(settings, "monthly-maintenance", "ok", now - timedelta(minutes=5), warnings=problem)
    # A failed run may have stopped before the check: its silence resolves nothing.
    record_run(settings, "monthly-maintenance", "failed", now - timedelta(minutes=4), error="x")
    built = report.build_report(settings)
    assert "fts-repaired" in {w["code"] for w in built.warnings}
    assert built.resolved == []
    record_run(settings, "monthly-maintenance", "ok", now - timedelta(minutes=3))
    built = report.build_report(settings)
    assert "fts-repaired" not in {w["code"] for w in built.warnings}
    assert [entry["code"] for entry in built.resolved] == ["fts-repaired"]
    # Raised again: open again, and no longer listed as resolved.
    record_run(settings, "monthly-maintenance", "ok", now - timedelta(minutes=2), warnings=problem)
    built = report.build_report(settings)
    assert "fts-repaired" in {w["code"] for w in built.warnings}
    assert built.resolved == []


def test_a_clock_finding_gone_on_the_fresh_check_is_resolved_now(sample, cli):
    # nightly-selfcare recorded backup-missing (an error); the backup ran since.
    assert cli("run", "nightly-selfcare").returncode == 0
    code, before = report_json(cli)
    assert code == 1 and "backup-missing" in {w["code"] for w in before["warnings"]}
    assert cli("run", "backup").returncode == 0
    code, after = report_json(cli)
    assert code == 0 and "backup-missing" not in {w["code"] for w in after["warnings"]}
    assert [(e["code"], e["resolved_by"]) for e in after["resolved"]] == [
        ("backup-missing", "checked now")
    ]


def test_an_interrupted_run_shows_until_the_next_ok_run_then_once_as_resolved(sample, tmp_path):
    from mnemo_ops.core import state
    from mnemo_ops.core.results import JobResult

    settings = settings_for(sample, write_config(tmp_path))
    now = utc_now()
    # The ledger row the runner writes for a run stopped by SIGTERM in its linking stage.
    stopped = JobResult(job="memory-maintain", started_at=now - timedelta(minutes=10))
    stopped.interrupt("SIGTERM", 143, "orphan-linking")
    stopped.finished_at = now - timedelta(minutes=9)
    ledger = state.open_state(settings.state_db_path)
    state.record_run(ledger, stopped)
    ledger.close()

    built = report.build_report(settings)
    assert built.run_counts["interrupted"] == 1
    shown = [w for w in built.warnings if w["code"] == "run-interrupted"]
    assert len(shown) == 1 and shown[0]["severity"] == "warning"
    assert "SIGTERM during orphan-linking" in shown[0]["message"]

    # The job's next ok run resolves it: shown once as resolved.
    record_run(settings, "memory-maintain", "ok", now - timedelta(minutes=5))
    built = report.build_report(settings)
    assert "run-interrupted" not in {w["code"] for w in built.warnings}
    assert [entry["code"] for entry in built.resolved] == ["run-interrupted"]
    # A day later it is history, not shown again.
    later = report.build_report(settings, since=timedelta(hours=1), now=now + timedelta(days=1))
    assert "run-interrupted" not in {w["code"] for w in later.warnings}
    assert "run-interrupted" not in {entry["code"] for entry in later.resolved}
