"""The gate gates (issue 40): one place for the suite and the baseline, no suite fails, ``eval init``
builds a starter suite from the user's own memory, and a typo is not a run.

The real CLI on the sample home written by Mnemosyne; the ledger and the report read from the real
state.db; Mnemosyne's own recall on a snapshot."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.jobs.retrieval_eval.test_job import close_memory, parse, write_config
from tests.purity import assert_unchanged, sample_snapshot


def ledger(sample) -> list[dict]:
    """The run ledger's rows (none when state.db or its table is not there yet)."""
    path = sample.state_dir / "state.db"
    if not path.exists():
        return []
    connection = sqlite3.connect(path)
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "runs" not in tables:
            return []
        return [json.loads(row[0]) for row in connection.execute("SELECT result_json FROM runs")]
    finally:
        connection.close()


def row_session(sample, memory_id: str) -> str:
    connection = sqlite3.connect(sample.db_path)
    try:
        return connection.execute(
            "SELECT session_id FROM working_memory WHERE id = ?", (memory_id,)
        ).fetchone()[0]
    finally:
        connection.close()


def user_row(sample, memory_id: str) -> str:
    connection = sqlite3.connect(sample.db_path)
    try:
        return connection.execute(
            "SELECT content FROM working_memory WHERE id = ?", (memory_id,)
        ).fetchone()[0]
    finally:
        connection.close()


@pytest.mark.heavy
def test_no_suite_fails_then_eval_init_passes_then_lost_recall_fails(cli, sample):
    suite = sample.state_dir / "eval" / "suite.jsonl"
    baseline = sample.state_dir / "eval" / "baseline.json"

    missing = cli("eval", "run")
    assert missing.returncode == 1
    assert f"no eval suite at {suite}" in missing.stderr and "eval init" in missing.stderr
    # A gate without a suite is a failed run the morning report shows, not a pass.
    [row] = ledger(sample)
    assert row["status"] == "failed" and str(suite) in row["error"]

    made = cli("--json", "eval", "init")
    assert made.returncode == 0, made.stderr
    summary = parse(made)
    assert summary["suite"] == str(suite) and summary["baseline"] == str(baseline)
    assert suite.is_file() and baseline.is_file()
    assert oct(suite.stat().st_mode & 0o777) == "0o600"
    held_out = json.loads((sample.state_dir / "eval" / "suite.jsonl.meta.json").read_text())
    assert held_out["held_out"] is True and held_out["origin"] == "mnemo-ops eval init"
    assert json.loads(baseline.read_text())["suite_sha256"] == held_out["suite_sha256"]
    cases = [json.loads(line) for line in suite.read_text().splitlines()]
    assert len(cases) >= 3 and cases == summary["cases"]
    for case in cases:
        # Each answer is one of the user's own rows; the fact it names is held back from the query.
        content = user_row(sample, case["relevant"][0])
        assert case["answer"] in content
        assert case["answer"].lower() not in case["query"].split()
        # Asked in the conversation it was said in: the plugin recalls only inside that session.
        assert case["session"] == row_session(sample, case["relevant"][0])

    passed = cli("--json", "eval", "run")
    assert passed.returncode == 0, passed.stderr
    result = parse(passed)
    assert result["stats"]["suite"] == str(suite) and result["stats"]["baseline"] == str(baseline)
    assert result["stats"]["held_out"]["held_out"] is True
    scheduled = cli("--json", "run", "retrieval-eval")
    assert scheduled.returncode == 0, scheduled.stderr

    # A change that loses one suite answer (its row closed, as a bad consolidation might) fails.
    lost = next(case for case in cases if case["category"] == "number")
    close_memory(sample, user_row(sample, lost["relevant"][0]))
    failed = cli("--json", "eval", "run")
    assert failed.returncode == 1, failed.stderr
    assert lost["id"] in {case["id"] for case in parse(failed)["stats"]["regressions"]}
    assert ledger(sample)[-1]["status"] == "failed"


def test_no_suite_is_allowed_only_when_asked(cli, sample, tmp_path):
    flag = cli("--json", "eval", "run", "--allow-no-suite")
    assert flag.returncode == 0, flag.stderr
    [warning] = parse(flag)["warnings"]
    assert warning["code"] == "no-eval-suite" and "eval init" in warning["fix"]
    config = write_config(tmp_path, "retrieval_eval:\n  allow_no_suite: true\n")
    assert cli("--config", config, "run", "retrieval-eval").returncode == 0
    assert [row["status"] for row in ledger(sample)] == ["ok", "ok"]


def test_eval_baseline_writes_where_the_scheduled_eval_reads(cli, sample, tmp_path):
    assert cli("eval", "init").returncode == 0
    baseline = sample.state_dir / "eval" / "baseline.json"
    baseline.unlink()
    assert cli("--json", "eval", "baseline").returncode == 0
    assert baseline.is_file()
    # The config names other places: init, baseline and run all follow it.
    elsewhere = tmp_path / "elsewhere"
    config = write_config(
        tmp_path,
        f"retrieval_eval:\n  suite: {elsewhere / 's.jsonl'}\n  baseline: {elsewhere / 'b.json'}\n",
    )
    assert cli("--config", config, "eval", "init").returncode == 0
    assert (elsewhere / "s.jsonl").is_file() and (elsewhere / "b.json").is_file()
    assert cli("--config", config, "run", "retrieval-eval").returncode == 0


def test_eval_init_dry_run_writes_nothing(cli, sample):
    before = sample_snapshot(sample)
    dry = cli("--json", "eval", "init", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    summary = parse(dry)
    assert summary["dry_run"] is True and summary["cases"]
    assert summary["baseline_run"]["status"] == "dry-run"
    assert summary["baseline_run"]["changes"] == {"baselines_written": 1}
    assert_unchanged(before, sample_snapshot(sample))
    text = cli("eval", "init", "--dry-run")
    assert text.returncode == 0 and "would write" in text.stdout
    assert_unchanged(before, sample_snapshot(sample))


def test_eval_init_keeps_an_existing_suite_unless_forced(cli, sample):
    assert cli("eval", "init").returncode == 0
    suite = sample.state_dir / "eval" / "suite.jsonl"
    suite.write_text('{"id": "mine", "query": "my own", "expect": ["own"]}\n')
    kept = cli("eval", "init")
    assert kept.returncode == 2 and f"{suite}: already there" in kept.stderr
    assert "mine" in suite.read_text()
    assert cli("eval", "init", "--force").returncode == 0
    assert "mine" not in suite.read_text()


@pytest.mark.heavy
def test_a_typo_is_not_a_run_and_the_report_stays_clean(cli, sample, tmp_path):
    """Usage errors exit 2 with one line naming the file and record nothing; a real failure is
    recorded and the report shows it."""
    typos = [
        ("eval", "run", "--suite", str(tmp_path / "no-such.jsonl")),
        ("eval", "baseline", "--suite", str(tmp_path / "no-such.jsonl")),
        ("run", "retrieval-eval", "-o", f"suite={tmp_path / 'no-such.jsonl'}"),
        ("eval", "run", "--baseline", str(tmp_path / "no-such.json")),
        ("eval", "run", "--python", str(tmp_path / "no-such-python")),
        ("run", "backup", "-o", "nonsense=1"),
        ("run", "no-such-job"),
    ]
    for args in typos:
        typo = cli(*args)
        assert typo.returncode == 2, (args, typo.stderr)
        assert len(typo.stderr.strip().splitlines()) == 1, typo.stderr
    assert "no-such.jsonl: suite file not found" in cli(*typos[0]).stderr
    assert ledger(sample) == []
    report = parse(cli("--json", "report"))
    assert report["runs"]["counts"]["failed"] == 0

    real = cli("eval", "run")  # no suite at its place: a run that started and failed
    assert real.returncode == 1
    [row] = ledger(sample)
    assert row["status"] == "failed"
    report = parse(cli("--json", "report"))
    assert report["runs"]["counts"]["failed"] == 1
    [item] = [item for item in report["runs"]["items"] if item["job"] == "retrieval-eval"]
    assert "no eval suite" in item["error"]
