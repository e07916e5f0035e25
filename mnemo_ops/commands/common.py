"""What every command shares: global options, settings loading, JSON/text output, one-line errors."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from mnemo_ops.commands.render import print_json
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.settings import Settings, load_settings


@dataclasses.dataclass
class AppState:
    """Global options from the command line (``mnemo-ops [--db] [--state-dir] [--config] [--json] [-v|-q]``)."""

    db: str | None = None
    state_dir: str | None = None
    config: str | None = None
    json: bool = False
    verbosity: int = 0
    _settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        """Settings resolved once (ConfigError, exit 2, on a bad config)."""
        if self._settings is None:
            self._settings = load_settings(db=self.db, state_dir=self.state_dir, config=self.config)
        return self._settings

    @property
    def console(self) -> Console:
        """Where results go: stdout, quiet in -q mode unless --json."""
        quiet = self.verbosity < 0 and not self.json
        return Console(quiet=quiet, highlight=False, soft_wrap=self.json)

    @property
    def err_console(self) -> Console:
        """Where warnings and errors go: stderr."""
        # soft_wrap: one message stays one line (cron mails and Hermes alerts quote it whole).
        return Console(stderr=True, highlight=False, soft_wrap=True)

    @property
    def show_progress(self) -> bool:
        """Progress bars only for a person at a terminal (not with --json or -q)."""
        return not self.json and self.verbosity >= 0


CURRENT = AppState()
"""The state of the running command (one command per process)."""


def state(ctx: typer.Context | None = None) -> AppState:
    """The AppState for this invocation."""
    if ctx is not None and isinstance(ctx.obj, AppState):
        return ctx.obj
    return CURRENT


def configure_logging(verbosity: int) -> None:
    """Warnings to stderr; -v adds info, -vv debug (with tracebacks of unexpected errors)."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, stream=sys.stderr, format="mnemo-ops: %(levelname)s: %(message)s"
    )


def stdout_closed() -> None:
    """The reader of stdout went away (``| head -1``): send what is left to /dev/null, so the
    command still finishes with its own exit code and Python's final flush raises nothing."""
    with contextlib.suppress(OSError, ValueError):
        descriptor = os.open(os.devnull, os.O_WRONLY)
        os.dup2(descriptor, sys.stdout.fileno())
        os.close(descriptor)


def emit(data: dict[str, Any], text: Callable[[Console], None]) -> None:
    """Print `data` as one JSON object with --json, else call `text` with the stdout console."""
    try:
        if CURRENT.json:
            print_json(Console(), data)
        else:
            text(CURRENT.console)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()


def fail(error: MnemoOpsError) -> None:
    """Print one line for an expected failure (and a JSON object with --json), then exit with its code."""
    if CURRENT.json:
        try:
            print_json(Console(), {"error": error.message, "exit_code": error.exit_code})
        except BrokenPipeError:
            stdout_closed()
    sys.stderr.write(f"mnemo-ops: error: {error.message}\n")
    raise typer.Exit(error.exit_code)


def command_group(
    parent: typer.Typer, name: str, help_text: str, *, plain_help: bool = False
) -> typer.Typer:
    """A ``NAME`` command group added to `parent`; called without a command it prints its help.

    `plain_help` renders the group's help as plain text, as the top-level app does (no rich markup).
    """
    markup = {"rich_markup_mode": None} if plain_help else {}
    group = typer.Typer(help=help_text, no_args_is_help=True, **markup)
    parent.add_typer(group, name=name)
    return group


def handle_errors(function: Callable) -> Callable:
    """Decorator for commands: expected failures become one line and their exit code."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except MnemoOpsError as error:
            fail(error)

    return wrapper
