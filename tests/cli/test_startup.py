"""The command line starts fast (issue 38, item 4): ``--version`` and ``--help`` import no command
module and nothing heavy, a command imports only its own module, and the short helps ``--help``
lists from `cli.COMMANDS` are the commands' own. No test here times anything: the figures are
``benchmarks/cli_startup.py``'s."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from mnemo_ops import __version__, cli
from tests.conftest import run_cli

REPOSITORY = Path(__file__).resolve().parents[2]

HEAVY = ("apsw", "sqlite_utils", "pydantic", "numpy", "rich.table", "rich.progress")
"""Modules (with everything under them) that start-up must not import."""

CHILD = """
import contextlib, io, json, sys
from mnemo_ops import cli
output, code = io.StringIO(), None
with contextlib.redirect_stdout(output):
    try:
        cli.main(sys.argv[1:])
    except SystemExit as error:
        code = error.code
print(json.dumps({"code": code, "output": output.getvalue(), "modules": sorted(sys.modules)}))
"""
"""Run ``cli.main(ARGS)`` in a fresh interpreter and print its exit code, output and modules."""


def imported_by(*arguments: str) -> dict:
    """What a fresh ``mnemo-ops ARGUMENTS`` prints and imports (this checkout's mnemo_ops)."""
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    completed = subprocess.run(
        [sys.executable, "-c", CHILD, *arguments],
        env=environment,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(completed.stdout)


def heavy_among(modules: list[str]) -> list[str]:
    """The heavy modules among `modules`: `HEAVY`, the settings' job sections, the checkpoints,
    and every command module but the shared ``common``."""
    return [
        module
        for module in modules
        if any(module == heavy or module.startswith(f"{heavy}.") for heavy in HEAVY)
        or module == "mnemo_ops.settings.job_sections"
        or module.startswith("mnemo_ops.checkpoints")
        or (module.startswith("mnemo_ops.cli.") and module != "mnemo_ops.cli.common")
    ]


@pytest.mark.parametrize("option", ["--version", "--help"])
def test_version_and_help_import_nothing_heavy(option):
    child = imported_by(option)
    assert child["code"] == 0
    assert heavy_among(child["modules"]) == []
    assert "mnemo_ops.cli" in child["modules"]  # the check would see an import
    if option == "--version":
        assert child["output"] == f"mnemo-ops {__version__}\n"
    else:
        assert all(f"  {name} " in child["output"] for name in cli.COMMANDS)


def test_a_command_imports_its_own_module_only():
    child = imported_by("config", "--help")
    commands = [module for module in child["modules"] if module.startswith("mnemo_ops.cli.")]
    assert child["code"] == 0 and "Example" in child["output"]
    assert sorted(commands) == ["mnemo_ops.cli.common", "mnemo_ops.cli.config"]


def test_the_table_holds_every_command_module():
    """Every module that adds a top-level command (``def register(app``) is in the table, and the
    table lists the single commands before the groups, as typer lists them."""
    every = typer.Typer(**cli.TYPER_SETTINGS)
    for path in sorted((REPOSITORY / "mnemo_ops" / "cli").glob("*.py")):
        if "\ndef register(app" in path.read_text(encoding="utf-8"):
            importlib.import_module(f"mnemo_ops.cli.{path.stem}").register(every)
    built = typer.main.get_group(every).commands
    assert sorted(built) == sorted(cli.COMMANDS)
    groups = [isinstance(getattr(built[name], "commands", None), dict) for name in cli.COMMANDS]
    assert groups == sorted(groups)


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_the_table_s_short_help_is_the_command_s_own(name):
    command = cli.load_command(name)
    assert command.name == name
    assert command.get_short_help_str(limit=10_000) == cli.COMMANDS[name].short_help


@pytest.mark.parametrize("width", [50, 78, 120])
def test_help_lists_the_commands_as_click_would(width):
    """The "Commands" section drawn from the table is the one click draws from the commands."""
    root = typer.main.get_command(cli.app)
    context = root.make_context("mnemo-ops", [], resilient_parsing=True)
    for name in cli.COMMANDS:
        root.get_command(context, name)

    def section(format_commands) -> str:
        formatter = context.make_formatter()
        formatter.width = width
        format_commands(root, context, formatter)
        return formatter.getvalue()

    assert section(type(root).format_commands) == section(TyperGroup.format_commands)
    assert all(f"  {name} " in section(type(root).format_commands) for name in cli.COMMANDS)


def test_hoisting_builds_only_the_named_command():
    root = typer.main.get_command(cli.app)
    assert cli.hoist_global_options(root, ["eval", "run", "--json"]) == ["--json", "eval", "run"]
    assert list(root.commands) == ["eval"]


def test_an_unknown_command_is_named_with_the_likely_one():
    completed = run_cli(None, "statu")
    assert completed.returncode == 2
    assert "No such command 'statu'. Did you mean 'status'?" in completed.stderr
