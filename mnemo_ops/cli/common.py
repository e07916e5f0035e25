"""What every command shares: global options, settings loading, JSON/text output, one-line errors.

``mnemo-ops --help`` and every command load this module, so it imports nothing heavy at the top:
the settings (pydantic models), the result renderer and rich's tables are imported where they are
used (``docs/contracts.md``, "A command line that starts fast").
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.foundation.writable import describe_os_error

if TYPE_CHECKING:
    from rich.table import Table

    from mnemo_ops.settings import Settings


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
            from mnemo_ops.settings import load_settings

            self._settings = load_settings(db=self.db, state_dir=self.state_dir, config=self.config)
        return self._settings

    @property
    def console(self) -> Console:
        """Where results go: stdout, quiet in -q mode unless --json.

        Piped or redirected, nothing is wrapped or cut at 80 columns: a line stays one line and a
        table row stays whole, for grep, a file or a mail.
        """
        quiet = self.verbosity < 0 and not self.json
        piped = not stdout_is_terminal()
        return PipeConsole(
            quiet=quiet,
            highlight=False,
            soft_wrap=self.json or piped,
            width=PIPED_WIDTH if piped else None,
        )

    @property
    def err_console(self) -> Console:
        """Where warnings and errors go: stderr."""
        # soft_wrap: one message stays one line (cron mails and Hermes alerts quote it whole).
        return Console(stderr=True, highlight=False, soft_wrap=True)

    @property
    def show_progress(self) -> bool:
        """Progress bars only for a person at a terminal (not with --json or -q)."""
        return not self.json and self.verbosity >= 0


PIPED_WIDTH = 10_000
"""The console width when stdout is not a terminal: wide enough that no row is ever cut."""


def stdout_is_terminal() -> bool:
    """True when stdout is a terminal (a person reading), False when piped or redirected."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class PlainTable:
    """A table as plain text rows: the title, the header, then one line per row, the columns two
    spaces apart and no trailing blanks. What `table` gives when stdout is not a terminal."""

    def __init__(self, title: str | None = None, **_options: Any) -> None:
        self.title = title
        self.headers: list[str] = []
        self.rows: list[tuple[Any, ...]] = []

    def add_column(self, header: str = "", **_options: Any) -> None:
        """A column (the layout options of a rich table do not apply to plain rows)."""
        self.headers.append(header)

    def add_row(self, *cells: Any, **_options: Any) -> None:
        """A row; markup in a cell is read as a rich table reads it, and printed without style."""
        self.rows.append(cells)

    def __rich_console__(self, console: Console, options: Any):
        """The lines, each one whole."""
        rows = [
            [console.render_str(str(cell)).plain if cell is not None else "" for cell in row]
            for row in self.rows
        ]
        grid = [self.headers, *rows]
        widths = [
            max(len(row[index]) for row in grid if index < len(row))
            for index in range(len(self.headers))
        ]
        if self.title:
            yield Text(self.title)
        for row in grid:
            line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            yield Text(line.rstrip())


def table(title: str | None = None, **options: Any) -> Table | PlainTable:
    """A table for the results: boxed at a terminal; plain full rows when stdout is piped or
    redirected, so each row greps as one line and nothing is cut at 80 columns."""
    if stdout_is_terminal():
        from rich.table import Table

        return Table(title=title, **options)
    return PlainTable(title=title, **options)


_INVOCATION: contextvars.ContextVar[AppState | None] = contextvars.ContextVar(
    "mnemo_ops_invocation", default=None
)
"""The state of the command being run, set by the root callback for one invocation of ``main``
(a context variable, so that two invocations in one process, as in the tests, share nothing)."""


def begin_invocation(app_state: AppState) -> contextvars.Token:
    """Make `app_state` the state of the command now being run; `end_invocation` undoes it."""
    return _INVOCATION.set(app_state)


def end_invocation(token: contextvars.Token) -> None:
    """Forget the state `begin_invocation` set (the command has finished)."""
    _INVOCATION.reset(token)


def invocation_state() -> AppState:
    """The AppState of the command being run (defaults when no command is being run)."""
    app_state = _INVOCATION.get()
    if app_state is None:
        app_state = AppState()
        _INVOCATION.set(app_state)
    return app_state


class MnemosyneOnce(logging.Filter):
    """Mnemosyne's own log lines, each said once per command, as Mnemosyne's (not ours).

    Every ``Mnemosyne(...)`` and every job that opens the database logs the same warnings again (a
    demo runs nine jobs). The sqlite-vec ones (its package, its tables, its facts table: two or
    three messages, worded differently by each Mnemosyne line) are one fact about this Python,
    not about the command: said once, as one line, and only with -v (`show_sqlite_vec`);
    ``mnemo-ops doctor`` names it every time.
    """

    def __init__(self, show_sqlite_vec: bool = True) -> None:
        super().__init__()
        self.seen: set[str] = set()
        self.show_sqlite_vec = show_sqlite_vec

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a Mnemosyne message already shown (or a sqlite-vec one without -v); rewords
        the first sqlite-vec one."""
        if not record.name.startswith("mnemosyne"):
            return True
        message = record.getMessage()
        key = "sqlite-vec" if "sqlite-vec" in message else message
        if key in self.seen:
            return False
        self.seen.add(key)
        if key == "sqlite-vec":
            if not self.show_sqlite_vec:
                return False
            record.msg, record.args = (
                "sqlite-vec cannot be loaded here: Mnemosyne's vector search is off "
                "(mnemo-ops doctor says why)",
                (),
            )
            record.levelno, record.levelname = logging.INFO, "info"
        record.levelname = f"mnemosyne {record.levelname.lower()}"
        return True


class StderrHandler(logging.StreamHandler):
    """mnemo-ops' log handler: writes to whatever ``sys.stderr`` is when a record comes (a command
    run in-process, as in the tests, has its stderr swapped for each invocation)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        """The current ``sys.stderr``."""
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def configure_logging(verbosity: int) -> None:
    """Warnings to stderr; -v adds info, -vv debug (with tracebacks of unexpected errors).

    One handler of ours on the root logger, replaced on every call (a second invocation in the same
    process starts with its own Mnemosyne-once filter), beside any handler someone else added.
    """
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    root = logging.getLogger()
    root.setLevel(level)
    for handler in [handler for handler in root.handlers if isinstance(handler, StderrHandler)]:
        root.removeHandler(handler)
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("mnemo-ops: %(levelname)s: %(message)s"))
    if verbosity < 2:
        handler.addFilter(MnemosyneOnce(show_sqlite_vec=verbosity >= 1))
    root.addHandler(handler)


class PipeConsole(Console):
    """The stdout console: a reader that went away is not a failure of the command.

    Rich's own answer to a broken pipe is ``SystemExit(1)``, raised from whichever print met it;
    whether that print comes before or after ``| head -1`` exits is a race, so the same command
    exited 0 or 1. Here the rest of the output goes to /dev/null and the command ends with its own
    exit code.
    """

    def on_broken_pipe(self) -> None:
        """Stop writing; leave the exit code to the command."""
        self.quiet = True
        stdout_closed()


def stdout_closed() -> None:
    """The reader of stdout went away (``| head -1``): send what is left to /dev/null, so the
    command still finishes with its own exit code and Python's final flush raises nothing."""
    with contextlib.suppress(OSError, ValueError):
        descriptor = os.open(os.devnull, os.O_WRONLY)
        os.dup2(descriptor, sys.stdout.fileno())
        os.close(descriptor)


def emit(data: dict[str, Any], text: Callable[[Console], None]) -> None:
    """Print `data` as one JSON object with --json, else call `text` with the stdout console."""
    from mnemo_ops.cli.render import print_json

    try:
        if invocation_state().json:
            print_json(PipeConsole(), data)
        else:
            text(invocation_state().console)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()


def fail(error: MnemoOpsError) -> None:
    """Print one line for an expected failure (and a JSON object with --json), then exit with its code."""
    from mnemo_ops.cli.render import print_json

    if invocation_state().json:
        try:
            print_json(PipeConsole(), {"error": error.message, "exit_code": error.exit_code})
        except BrokenPipeError:
            stdout_closed()
    sys.stderr.write(f"mnemo-ops: error: {error.message}\n")
    raise typer.Exit(error.exit_code)


def record_installed(scheduler: str, jobs: list[str]) -> None:
    """Record which jobs `scheduler` now runs for this database, and since when (the overdue check
    counts only slots after that); a state dir that cannot take the record only costs a warning."""
    from mnemo_ops.foundation.clock import utc_now
    from mnemo_ops.scheduling import install_times

    try:
        install_times.record(invocation_state().settings, scheduler, jobs, utc_now())
    except (OSError, MnemoOpsError) as error:
        reason = error.message if isinstance(error, MnemoOpsError) else describe_os_error(error)
        invocation_state().err_console.print(
            f"mnemo-ops: warning: could not record the install time in the state dir: {reason}",
            markup=False,
            soft_wrap=True,
        )


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
