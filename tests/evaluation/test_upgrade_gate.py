"""The upgrade gate: ``eval run --python PATH`` recalls with another interpreter's Mnemosyne (a venv
without mnemo-ops), on a snapshot, against the baseline; ``eval compare`` shows two results case by
case."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mnemo_ops.evaluation.comparison import CHANGES
from mnemo_ops.mnemosyne import versions
from tests.conftest import copy_sample, run_cli
from tests.purity import assert_unchanged, sample_snapshot

SUITE = str(Path(__file__).resolve().parents[2] / "fixtures" / "eval" / "sample.jsonl")


def _ranks(baseline: dict) -> dict:
    return {case: outcome["rank"] for case, outcome in baseline["cases"].items()}


def _case_ranks(stats: dict) -> dict:
    return {case: outcome["rank"] for case, outcome in stats["case_results"].items()}


def _older_sample(sample, other_sample_template, other_mnemosyne, tmp_path):
    """A sample written by the older of the two lines (a candidate may be newer than the database)."""
    if versions.line_key(other_mnemosyne.version) > versions.line_key(versions.installed_version()):
        return sample
    return copy_sample(other_sample_template, tmp_path / "older")


def test_the_eval_under_another_interpreter_yields_that_versions_ranks(
    sample, other_sample_template, other_mnemosyne, tmp_path
):
    layout = _older_sample(sample, other_sample_template, other_mnemosyne, tmp_path)
    # The candidate's environment has no mnemo-ops: the worker must run without it.
    bare = subprocess.run(
        [str(other_mnemosyne.python), "-c", "import mnemo_ops"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not this checkout, which "-c" would put on the path
    )
    assert bare.returncode != 0 and "No module named 'mnemo_ops'" in bare.stderr
    before = sample_snapshot(layout)

    gate = run_cli(
        layout,
        "--json",
        "eval",
        "baseline",
        "--dry-run",
        "--suite",
        SUITE,
        "--out",
        str(tmp_path / "gate.json"),
        "--python",
        str(other_mnemosyne.python),
    )
    # What that version's own mnemo-ops measures on the same database (this checkout's source, run
    # by that interpreter): the reference the gate must reproduce.
    native = other_mnemosyne.mnemo_ops(
        "--json",
        "eval",
        "baseline",
        "--dry-run",
        "--suite",
        SUITE,
        "--out",
        str(tmp_path / "native.json"),
        env=layout.environ(),
    )

    assert gate.returncode == 0, gate.stderr
    assert native.returncode == 0, native.stderr
    gate_result = json.loads(gate.stdout)["stats"]
    native_result = json.loads(native.stdout)["stats"]
    assert gate_result["engine"]["version"] == f"mnemosyne-memory {other_mnemosyne.version}"
    assert gate_result["engine"]["options"]["python"] == str(other_mnemosyne.python)
    assert native_result["engine"]["version"] == f"mnemosyne-memory {other_mnemosyne.version}"
    assert _case_ranks(gate_result) == _case_ranks(native_result)
    assert gate_result["metrics"] == native_result["metrics"]
    # On a snapshot: the database, its folder and the state dir are as they were (a dry run).
    assert_unchanged(before, sample_snapshot(layout))


def test_the_gate_compares_a_candidate_with_the_current_baseline(
    sample, other_sample_template, other_mnemosyne, tmp_path
):
    layout = _older_sample(sample, other_sample_template, other_mnemosyne, tmp_path)
    current = tmp_path / "baseline.json"
    # Both sides measure with the approximation: the Hermes plugin is installed beside 4.0 only,
    # and its own prefetch measures another thing (the gate warns when the profiles differ).
    config = tmp_path / "approximate.yaml"
    config.write_text("retrieval_eval:\n  profile: hermes-approximate\n", encoding="utf-8")
    # The baseline is taken by the Mnemosyne that wrote the database (this one, or the other line).
    if layout is sample:
        made = run_cli(
            layout,
            "--config",
            str(config),
            "eval",
            "baseline",
            "--suite",
            SUITE,
            "--out",
            str(current),
        )
        candidate_python, candidate_version = other_mnemosyne.python, other_mnemosyne.version
    else:
        made = other_mnemosyne.mnemo_ops(
            "--config",
            str(config),
            "eval",
            "baseline",
            "--suite",
            SUITE,
            "--out",
            str(current),
            env=layout.environ(),
        )
        candidate_python, candidate_version = Path(sys.executable), versions.installed_version()
    assert made.returncode == 0, made.stderr

    run = run_cli(
        layout,
        "--config",
        str(config),
        "--json",
        "eval",
        "run",
        "--dry-run",
        "--suite",
        SUITE,
        "--baseline",
        str(current),
        "--python",
        str(candidate_python),
    )
    (tmp_path / "candidate.json").write_text(run.stdout)

    assert run.returncode == 0, run.stderr  # the gate: upgrade only on exit 0
    result = json.loads(run.stdout)
    assert result["stats"]["engine"]["version"] == f"mnemosyne-memory {candidate_version}"
    assert any(
        warning["code"] == "baseline-mismatch" and "engine version changed" in warning["message"]
        for warning in result["warnings"]
    )
    compared = run_cli(
        layout, "--json", "eval", "compare", str(current), str(tmp_path / "candidate.json")
    )
    assert compared.returncode == 0, compared.stderr
    comparison = json.loads(compared.stdout)
    assert comparison["a"]["kind"] == "baseline" and comparison["b"]["kind"] == "run"
    assert comparison["b"]["engine"]["version"] == f"mnemosyne-memory {candidate_version}"
    assert len(comparison["cases"]) == 16
    assert sum(comparison["summary"].values()) == 16
    assert all(case["query"] for case in comparison["cases"])  # from the run, or the suite file


def test_compare_lists_the_cases_that_changed(cli, sample, tmp_path):
    # Two real results that rank differently: Mnemosyne's recall and the builtin FTS5 engine.
    made = cli("eval", "baseline", "--suite", SUITE, "--out", str(tmp_path / "mnemosyne.json"))
    assert made.returncode == 0, made.stderr
    builtin = cli(
        "--json",
        "eval",
        "run",
        "--dry-run",
        "--engine",
        "builtin",
        "--suite",
        SUITE,
        "--baseline",
        str(tmp_path / "mnemosyne.json"),
        "--allow-suite-change",
    )
    (tmp_path / "builtin.json").write_text(builtin.stdout)
    compared = cli(
        "--json",
        "eval",
        "compare",
        str(tmp_path / "mnemosyne.json"),
        str(tmp_path / "builtin.json"),
    )
    comparison = json.loads(compared.stdout)
    by_id = {case["id"]: case for case in comparison["cases"]}
    builtin_ranks = _case_ranks(json.loads(builtin.stdout)["stats"])
    baseline_ranks = _ranks(json.loads((tmp_path / "mnemosyne.json").read_text()))
    changed = {case for case in by_id if builtin_ranks[case] != baseline_ranks[case]}
    assert changed, "the two engines ranked every case alike: the test proves nothing"
    for case_id, case in by_id.items():
        assert (case["a_rank"], case["b_rank"]) == (baseline_ranks[case_id], builtin_ranks[case_id])
        assert (case["change"] == "same") == (case_id not in changed)
    # Most alarming first: every lost or worse case comes before any unchanged one.
    order = [case["change"] for case in comparison["cases"]]
    assert order == sorted(order, key=CHANGES.index)

    text = cli(
        "eval",
        "compare",
        str(tmp_path / "mnemosyne.json"),
        str(tmp_path / "builtin.json"),
        env={"COLUMNS": "200"},
    )
    assert text.returncode == 0
    for case_id in changed:
        assert case_id in text.stdout
    unchanged = set(by_id) - changed
    assert not any(f"\n  {case_id} " in text.stdout for case_id in unchanged)
    assert "16 cases:" in text.stdout


def test_compare_refuses_a_file_that_is_no_eval_result(cli, tmp_path):
    (tmp_path / "other.json").write_text('{"hello": 1}')
    completed = cli("eval", "compare", str(tmp_path / "other.json"), str(tmp_path / "other.json"))
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        f"mnemo-ops: error: {tmp_path / 'other.json'}: neither an eval baseline nor the JSON of an eval run"
    )


def test_a_python_that_does_not_run_is_a_usage_error(cli, tmp_path):
    completed = cli("eval", "run", "--suite", SUITE, "--python", str(tmp_path / "no-python"))
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    # Checked before the run starts, so the message names the flag the user typed.
    assert (
        len(lines) == 1
        and f"{tmp_path / 'no-python'}: --python is not an executable file" in lines[0]
    )
