"""``--json`` keeps its promise: exactly one JSON object on stdout, errors too, wherever the global
options stand on the command line (issue 28, item 4)."""

from __future__ import annotations

import json

import pytest
import typer

from mnemo_ops.cli import app, hoist_global_options
from tests.conftest import run_cli


def _one_object(completed) -> dict:
    try:
        return json.loads(completed.stdout)
    except ValueError:
        raise AssertionError(
            f"not one JSON object: {completed.stdout!r} / {completed.stderr!r}"
        ) from None


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (("--json", "run", "backup", "--wait", "abc"), "--wait"),
        (("--json", "nosuchcommand"), "nosuchcommand"),
        (("nosuchcommand", "--json"), "nosuchcommand"),
        (("--json", "cron"), "needs a command"),
        (("--json",), "Missing command"),
        (("--json", "run", "backup", "--wait", "-1"), "--wait"),
        (("--json", "status", "--no-such-option"), "--no-such-option"),
    ],
)
def test_usage_errors_are_one_json_object_with_exit_2(sample, cli, arguments, says):
    completed = cli(*arguments)
    assert completed.returncode == 2, completed.stderr
    data = _one_object(completed)
    assert set(data) == {"error", "exit_code"} and data["exit_code"] == 2
    assert says in data["error"]
    # The person at the terminal still gets click's usage text on stderr.
    assert "Usage: mnemo-ops" in completed.stderr


def test_without_json_a_usage_error_prints_nothing_on_stdout(sample, cli):
    completed = cli("run", "backup", "--wait", "abc")
    assert completed.returncode == 2 and completed.stdout == ""
    assert "Invalid value for '--wait'" in completed.stderr


def test_global_options_are_accepted_after_the_command(sample, cli):
    completed = cli("status", "--json")
    assert completed.returncode == 0, completed.stderr
    assert _one_object(completed)["db"] == str(sample.db_path)
    completed = cli("backup", "list", "--json", "-q", "--state-dir", str(sample.state_dir))
    assert completed.returncode == 0, completed.stderr
    assert "checkpoints" in _one_object(completed)
    dry = cli("run", "backup", "--dry-run", "--json")
    assert dry.returncode == 0 and _one_object(dry)["status"] == "dry-run"


def test_an_expected_failure_after_the_command_is_json_too(tmp_path):
    completed = run_cli(None, "status", "--db", str(tmp_path / "missing.db"), "--json")
    assert completed.returncode == 2
    data = _one_object(completed)
    assert data["exit_code"] == 2 and "missing.db" in data["error"]


def test_hoisting_keeps_a_command_s_own_options_and_values_in_place():
    root = typer.main.get_command(app)
    assert hoist_global_options(root, ["status", "--json"]) == ["--json", "status"]
    assert hoist_global_options(root, ["run", "backup", "-vv", "--db=x.db"]) == [
        "-vv",
        "--db=x.db",
        "run",
        "backup",
    ]
    # eval import has a --db of its own (the database it creates): it stays.
    imported = ["eval", "import", "locomo", "f.json", "--db", "out.db", "--suite", "s.jsonl"]
    assert hoist_global_options(root, [*imported, "--json"]) == ["--json", *imported]
    # A value that looks like a global option stays with its option, and so does all after --.
    assert hoist_global_options(root, ["capture", "--", "--json"]) == ["capture", "--", "--json"]
    assert hoist_global_options(root, ["run", "backup", "-o", "x=--json"]) == [
        "run",
        "backup",
        "-o",
        "x=--json",
    ]
