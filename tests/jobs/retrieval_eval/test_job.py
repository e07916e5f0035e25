"""retrieval-eval end to end: the real CLI in a subprocess, the sample database built by Mnemosyne,
Mnemosyne's own recall on a snapshot, baselines, regressions, history, dry-run purity."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime, timedelta

import pytest

from mnemo_ops.foundation.resources import resource_dir
from mnemo_ops.mnemosyne import versions
from tests.purity import assert_unchanged, sample_snapshot

SAMPLE_SUITE = resource_dir("fixtures") / "eval" / "sample.jsonl"


def parse(process) -> dict:
    """The one JSON object a --json command prints."""
    assert process.stdout.strip(), process.stderr
    return json.loads(process.stdout)


def write_config(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def close_memory(sample, fragment: str) -> None:
    """Close (valid_until in the past) the live working rows whose content holds `fragment`, as a deploy might."""
    connection = sqlite3.connect(sample.db_path)
    with connection:
        changed = connection.execute(
            "UPDATE working_memory SET valid_until = ? WHERE content LIKE ?",
            ((datetime.now() - timedelta(days=1)).isoformat(), f"%{fragment}%"),
        ).rowcount
    connection.close()
    assert changed == 1


def history_rows(sample) -> list[dict]:
    connection = sqlite3.connect(sample.state_dir / "state.db")
    connection.row_factory = sqlite3.Row
    rows = [dict(row) for row in connection.execute("SELECT * FROM eval_history ORDER BY id")]
    connection.close()
    return rows


def test_baseline_then_run_with_mnemosyne_recall(cli, sample, tmp_path):
    """The approximation on both lines (the sample's sessionless cases reach another session's
    memories through it; the plugin's own prefetch is tested in tests/evaluation/engines)."""
    baseline_path = tmp_path / "baseline.json"
    config = tmp_path / "approximate.yaml"
    config.write_text("retrieval_eval:\n  profile: hermes-approximate\n", encoding="utf-8")
    made = cli(
        "--config",
        str(config),
        "--json",
        "eval",
        "baseline",
        "--suite",
        str(SAMPLE_SUITE),
        "--out",
        str(baseline_path),
    )
    assert made.returncode == 0, made.stderr
    baseline = json.loads(baseline_path.read_text())
    assert baseline["suite_sha256"] == parse(made)["stats"]["suite_sha256"]
    assert baseline["engine"]["name"] == "mnemosyne"
    assert baseline["engine"]["version"] == f"mnemosyne-memory {versions.installed_version()}"
    assert baseline["k"] == 10
    assert set(baseline["metrics"]) == {"recall@10", "recall_all@10", "mrr@10", "ndcg@10"}
    assert len(baseline["cases"]) == 16 and all(
        "rank" in case for case in baseline["cases"].values()
    )
    assert baseline["cases"]["server-deploy-day"] == {
        "rank": 1,
        "passed": True,
        "place": "no-session",
        "evidence_received": True,
    }

    before = sample_snapshot(sample)
    ran = cli(
        "--config",
        str(config),
        "--json",
        "eval",
        "run",
        "--suite",
        str(SAMPLE_SUITE),
        "--baseline",
        str(baseline_path),
    )
    assert ran.returncode == 0, ran.stderr
    result = parse(ran)
    stats = result["stats"]
    assert result["status"] == "ok" and stats["regressions"] == [] and stats["metric_drops"] == []
    assert stats["metrics"] == baseline["metrics"]  # same database, same ranks: deterministic
    assert set(stats["per_category"]) == {"fact", "preference", "event", "multi-session"}
    assert stats["per_category"]["fact"]["cases"] == 7
    # Recall ran on a snapshot: the live database, its WAL, its folder and HOME are untouched
    # (only state.db gained history rows).
    after = sample_snapshot(sample)
    for key in ("db", "wal", "beside_db", str(sample.directory / "home")):
        assert before[key] == after[key], key
    connection = sqlite3.connect(sample.db_path)
    assert connection.execute("SELECT sum(recall_count) FROM working_memory").fetchone()[0] == 0
    connection.close()
    rows = history_rows(sample)
    assert [row["status"] for row in rows] == ["ok", "ok"]
    assert json.loads(rows[-1]["metrics_json"]) == stats["metrics"]
    assert (
        rows[-1]["suite_sha256"] == baseline["suite_sha256"] and rows[-1]["engine"] == "mnemosyne"
    )


def test_regression_exits_1_and_names_the_cases(cli, sample, tmp_path):
    baseline_path = tmp_path / "baseline.json"
    assert (
        cli(
            "eval",
            "baseline",
            "--engine",
            "builtin",
            "--suite",
            str(SAMPLE_SUITE),
            "--out",
            str(baseline_path),
        ).returncode
        == 0
    )
    close_memory(sample, "heirloom tomatoes")
    ran = cli(
        "--json",
        "eval",
        "run",
        "--engine",
        "builtin",
        "--suite",
        str(SAMPLE_SUITE),
        "--baseline",
        str(baseline_path),
    )
    assert ran.returncode == 1, ran.stderr
    result = parse(ran)
    assert result["status"] == "failed" and "regressed" in result["error"]
    [regression] = result["stats"]["regressions"]
    assert regression["id"] == "garden-crop"
    assert regression["query"] == "What does Dana grow in the raised beds?"
    assert "heirloom tomatoes" in regression["expected"]
    assert regression["got"] and all(
        "heirloom" not in item["content"] for item in regression["got"]
    )
    assert {drop["metric"] for drop in result["stats"]["metric_drops"]} >= {"recall@10"}
    codes = [warning["code"] for warning in result["warnings"]]
    assert "case-regressed" in codes and "metric-regressed" in codes
    assert history_rows(sample)[-1]["status"] == "regressed"
    # The text form lists the case too, for a person reading CI logs.
    text = cli(
        "eval",
        "run",
        "--engine",
        "builtin",
        "--suite",
        str(SAMPLE_SUITE),
        "--baseline",
        str(baseline_path),
    )
    assert text.returncode == 1 and "garden-crop" in text.stdout and "raised beds" in text.stdout


def test_tolerances_and_allowed_case_regressions_from_config(cli, sample, tmp_path):
    baseline_path = tmp_path / "baseline.json"
    config = write_config(
        tmp_path,
        (
            f"retrieval_eval:\n  engine: builtin\n  suite: {SAMPLE_SUITE}\n  baseline: {baseline_path}\n"
            "  tolerance: 0.1\n  max_case_regressions: 1\n"
        ),
    )
    assert cli("--config", config, "eval", "baseline", "--out", str(baseline_path)).returncode == 0
    close_memory(
        sample, "heirloom tomatoes"
    )  # one case of 16 fails: every metric drops by 1/16 or less
    ran = cli("--config", config, "--json", "run", "retrieval-eval")
    assert ran.returncode == 0, ran.stdout
    assert [case["id"] for case in parse(ran)["stats"]["regressions"]] == ["garden-crop"]
    strict = write_config(
        tmp_path,
        (
            f"retrieval_eval:\n  engine: builtin\n  suite: {SAMPLE_SUITE}\n  baseline: {baseline_path}\n"
            "  tolerance: 0.1\n  tolerances: {recall: 0.01}\n  max_case_regressions: 1\n"
        ),
    )
    failed = cli("--config", strict, "--json", "run", "retrieval-eval")
    assert failed.returncode == 1
    assert [drop["metric"] for drop in parse(failed)["stats"]["metric_drops"]] == ["recall@10"]


def test_changed_suite_exits_2_unless_allowed(cli, tmp_path):
    suite = tmp_path / "suite.jsonl"
    shutil.copyfile(SAMPLE_SUITE, suite)
    baseline_path = tmp_path / "baseline.json"
    assert (
        cli(
            "eval", "baseline", "-e", "builtin", "--suite", str(suite), "--out", str(baseline_path)
        ).returncode
        == 0
    )
    with suite.open("a") as handle:
        handle.write(
            '{"id": "new", "query": "Lisbon hotel terrace", "expect": ["rooftop terrace"]}\n'
        )
    changed = cli(
        "eval", "run", "-e", "builtin", "--suite", str(suite), "--baseline", str(baseline_path)
    )
    assert changed.returncode == 2
    assert "changed since baseline" in changed.stderr
    allowed = cli(
        "--json",
        "eval",
        "run",
        "-e",
        "builtin",
        "--suite",
        str(suite),
        "--baseline",
        str(baseline_path),
        "--allow-suite-change",
    )
    assert allowed.returncode == 0, allowed.stdout
    assert parse(allowed)["stats"]["cases"] == 17


def test_ratchet_raises_the_baseline_only_when_better(cli, sample, tmp_path):
    baseline_path = tmp_path / "baseline.json"
    close_memory(sample, "Saturday mornings")
    assert (
        cli(
            "eval",
            "baseline",
            "-e",
            "builtin",
            "--suite",
            str(SAMPLE_SUITE),
            "--out",
            str(baseline_path),
        ).returncode
        == 0
    )
    worse = json.loads(baseline_path.read_text())
    assert worse["cases"]["server-deploy-day"]["passed"] is False
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.execute(
            "UPDATE working_memory SET valid_until = NULL WHERE content LIKE '%Saturday mornings%'"
        )
    connection.close()
    plain = cli(
        "eval",
        "run",
        "-e",
        "builtin",
        "--suite",
        str(SAMPLE_SUITE),
        "--baseline",
        str(baseline_path),
    )
    assert (
        plain.returncode == 0 and json.loads(baseline_path.read_text()) == worse
    )  # not written unless asked
    raised = cli(
        "--json",
        "eval",
        "run",
        "-e",
        "builtin",
        "--suite",
        str(SAMPLE_SUITE),
        "--baseline",
        str(baseline_path),
        "--ratchet",
    )
    assert raised.returncode == 0 and parse(raised)["changes"] == {"baselines_written": 1}
    better = json.loads(baseline_path.read_text())
    assert better["cases"]["server-deploy-day"]["passed"] is True
    assert better["metrics"]["recall@10"] > worse["metrics"]["recall@10"]
    held = cli(
        "--json",
        "eval",
        "run",
        "-e",
        "builtin",
        "--suite",
        str(SAMPLE_SUITE),
        "--baseline",
        str(baseline_path),
        "--ratchet",
    )
    assert held.returncode == 0 and parse(held)["changes"] == {}
    assert "ratchet-held" in [warning["code"] for warning in parse(held)["warnings"]]
    assert json.loads(baseline_path.read_text())["created_at"] == better["created_at"]


def test_job_without_baseline_records_metrics_and_warns(cli, sample, tmp_path):
    # profile plain: Mnemosyne's top 10 (the sample is a Hermes home, where the default is the
    # plugin's 5-item prefetch).
    config = write_config(tmp_path, f"retrieval_eval:\n  suite: {SAMPLE_SUITE}\n  profile: plain\n")
    ran = cli("--config", config, "--json", "run", "retrieval-eval")
    assert ran.returncode == 0, ran.stderr
    result = parse(ran)
    [warning] = [w for w in result["warnings"] if w["code"] == "no-baseline"]
    assert str(sample.state_dir / "eval" / "baseline.json") in warning["message"]
    assert "eval baseline" in warning["fix"]
    assert result["stats"]["metrics"]["recall@10"] == 1.0
    assert history_rows(sample)[-1]["status"] == "no-baseline"
    assert not (sample.state_dir / "eval" / "baseline.json").exists()


def test_job_without_suite_fails_and_evaluates_nothing(cli, sample):
    """No suite at its place: the gate cannot pass (exit 1), and nothing enters the eval history
    (tests/jobs/retrieval_eval/test_gate.py has the rest)."""
    ran = cli("--json", "run", "retrieval-eval")
    assert ran.returncode == 1
    result = parse(ran)
    assert result["status"] == "failed" and "no eval suite at" in result["error"]
    connection = sqlite3.connect(sample.state_dir / "state.db")
    assert "eval_history" not in {
        row[0] for row in connection.execute("SELECT name FROM sqlite_master")
    }
    connection.close()


def test_explicit_missing_baseline_or_suite_exits_2(cli, tmp_path):
    missing = cli(
        "eval", "run", "--suite", str(SAMPLE_SUITE), "--baseline", str(tmp_path / "none.json")
    )
    assert missing.returncode == 2 and "none.json: baseline not found" in missing.stderr
    no_suite = cli("eval", "run", "--suite", str(tmp_path / "none.jsonl"))
    assert (
        no_suite.returncode == 2
        and f"{tmp_path / 'none.jsonl'}: suite file not found" in no_suite.stderr
    )


def test_dry_run_changes_nothing(cli, sample, tmp_path):
    baseline_path = sample.state_dir / "eval" / "baseline.json"
    config = write_config(
        tmp_path, f"retrieval_eval:\n  suite: {SAMPLE_SUITE}\n  engine: builtin\n"
    )
    assert cli("--config", config, "eval", "baseline", "--out", str(baseline_path)).returncode == 0
    before = sample_snapshot(sample)
    ran = cli("--config", config, "--json", "run", "retrieval-eval", "--dry-run")
    assert ran.returncode == 0 and parse(ran)["status"] == "dry-run"
    baseline_dry = cli(
        "--config",
        config,
        "--json",
        "eval",
        "baseline",
        "--out",
        str(tmp_path / "b.json"),
        "--dry-run",
    )
    assert (
        parse(baseline_dry)["changes"] == {"baselines_written": 1}
        and not (tmp_path / "b.json").exists()
    )
    recalled = cli(
        "--config", config, "--json", "eval", "run", "--engine", "mnemosyne", "--dry-run"
    )
    # Mnemosyne ranks worse than the builtin baseline on this sample: a regression, reported, recorded nowhere.
    assert recalled.returncode == 1 and parse(recalled)["stats"]["engine"]["name"] == "mnemosyne"
    assert any("engine differs" in w["message"] for w in parse(recalled)["warnings"])
    assert_unchanged(before, sample_snapshot(sample))


def test_recall_options_from_config_reach_mnemosyne(cli, tmp_path):
    top_ten = write_config(tmp_path, "retrieval_eval:\n  profile: plain\n")
    plain = parse(
        cli("--config", top_ten, "--json", "eval", "run", "--suite", str(SAMPLE_SUITE), "--dry-run")
    )
    scoped = write_config(tmp_path, "retrieval_eval:\n  cross_session: false\n  profile: plain\n")
    isolated = parse(
        cli("--config", scoped, "--json", "eval", "run", "--suite", str(SAMPLE_SUITE), "--dry-run")
    )
    # Session-scoped recall from the eval's own session sees none of the sample's session memories.
    assert (
        plain["stats"]["metrics"]["recall@10"] == 1.0
        and isolated["stats"]["metrics"]["recall@10"] == 0.0
    )
    enhanced = write_config(
        tmp_path,
        "retrieval_eval:\n  enhanced_recall: true\n  use_associative: true\n  profile: plain\n",
    )
    result = parse(
        cli(
            "--config", enhanced, "--json", "eval", "run", "--suite", str(SAMPLE_SUITE), "--dry-run"
        )
    )
    options = result["stats"]["engine"]["options"]
    assert (
        options["environment"]["MNEMOSYNE_ENHANCED_RECALL"] == "1"
        and options["use_associative"] is True
    )
    assert (
        result["stats"]["metrics"] != plain["stats"]["metrics"]
    )  # recall_enhanced ranks differently


def test_session_of_a_case_is_the_recall_session(cli, tmp_path):
    suite = tmp_path / "sessions.yaml"
    suite.write_text(
        "- id: own\n  query: heirloom tomatoes raised beds\n  session: hermes_garden-2026-10-20\n"
        "  expect: [heirloom tomatoes]\n- id: other\n  query: heirloom tomatoes raised beds\n"
        "  session: travel-2026-11-12\n  expect: [heirloom tomatoes]\n"
    )
    config = write_config(tmp_path, "retrieval_eval:\n  cross_session: false\n")
    result = parse(
        cli("--config", config, "--json", "eval", "run", "--suite", str(suite), "--dry-run")
    )
    assert result["stats"]["per_category"]["uncategorized"]["cases"] == 2
    assert result["stats"]["metrics"]["recall@10"] == 0.5  # found from its own session only


@pytest.mark.parametrize(
    "config_text, message",
    [
        ("retrieval_eval:\n  k: ten\n", "retrieval_eval.k"),
        (
            "retrieval_eval:\n  engine: nope\n  suite: SUITE\n",
            "key 'retrieval_eval.engine' must be one of mnemosyne, builtin, got 'nope'",
        ),
        (
            "retrieval_eval:\n  recall_options: {colour: 1}\n  suite: SUITE\n",
            "unknown option 'colour'",
        ),
    ],
)
def test_bad_configuration_exits_2(cli, tmp_path, config_text, message):
    config = write_config(tmp_path, config_text.replace("SUITE", str(SAMPLE_SUITE)))
    ran = cli("--config", config, "run", "retrieval-eval")
    assert ran.returncode == 2 and message in " ".join((ran.stderr + ran.stdout).split())


def test_k_from_flag_then_suite_then_config(cli, tmp_path):
    suite = tmp_path / "k.yaml"
    suite.write_text(
        "k: 1\ncases:\n  - {id: a, query: Which reverse proxy do we use, expect: [nginx]}\n"
    )
    from_suite = parse(
        cli("--json", "eval", "run", "-e", "builtin", "--suite", str(suite), "--dry-run")
    )
    assert list(from_suite["stats"]["metrics"]) == ["recall@1", "recall_all@1", "mrr@1", "ndcg@1"]
    from_flag = parse(
        cli(
            "--json", "eval", "run", "-e", "builtin", "--suite", str(suite), "--k", "3", "--dry-run"
        )
    )
    assert from_flag["stats"]["k"] == 3
    config = write_config(tmp_path, "retrieval_eval:\n  k: 4\n")
    from_config = parse(
        cli(
            "--config",
            config,
            "--json",
            "eval",
            "run",
            "-e",
            "builtin",
            "--suite",
            str(SAMPLE_SUITE),
            "--dry-run",
        )
    )
    assert "recall@4" in from_config["stats"]["metrics"]


def test_each_run_records_its_misses_per_category(cli, sample):
    close_memory(sample, "heirloom tomatoes")
    ran = cli("--json", "eval", "run", "--engine", "builtin", "--suite", str(SAMPLE_SUITE))
    assert ran.returncode == 0, ran.stderr
    stats = parse(ran)["stats"]
    recorded = json.loads(history_rows(sample)[-1]["misses_json"])
    assert recorded == stats["misses_per_category"]
    assert "garden-crop" in recorded["fact"]["examples"]
    cases = {case["id"]: case for case in map(json.loads, SAMPLE_SUITE.read_text().splitlines())}
    for category, figures in recorded.items():
        in_category = [c for c in cases.values() if c.get("category", "uncategorized") == category]
        assert figures["cases"] == len(in_category)
        missed = [c for c, r in stats["case_results"].items() if not r["passed"]]
        assert figures["missed"] == sum(1 for c in missed if cases[c].get("category") == category)
