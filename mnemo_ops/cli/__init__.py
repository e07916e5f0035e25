"""The ``mnemo-ops`` command line: parse, load settings, call the library, render the result.

It starts fast, since a cron job pays the start-up on every run: the root group lists its commands
from `COMMANDS` and imports the module of the one command being run only (``--help`` and
``--version`` import none).
"""

from __future__ import annotations

import difflib
import errno
import importlib
import json
import logging
import re
import sys
import traceback
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

from mnemo_ops import __version__
from mnemo_ops.cli.common import (
    AppState,
    begin_invocation,
    configure_logging,
    end_invocation,
    stdout_closed,
)
from mnemo_ops.foundation.exit_codes import FAILED, OK, USAGE
from mnemo_ops.foundation.writable import describe_os_error

PATH_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST, errno.EISDIR)
"""OS errors that mean a path must be fixed (exit 2, as for a bad --db or --state-dir)."""


class Command(NamedTuple):
    """A top-level command: the module that adds it (``register(app)``) and its short help."""

    module: str
    short_help: str


COMMANDS: dict[str, Command] = {
    "run": Command("mnemo_ops.cli.run", "Run one job now."),
    "jobs": Command(
        "mnemo_ops.cli.jobs",
        "List the jobs with schedule, last run, status, next run and where each is installed "
        "(crontab, Hermes cron, systemd); warns when a job is installed twice for one database.",
    ),
    "status": Command(
        "mnemo_ops.cli.status",
        "Show the database, WAL size, row counts, lock holder and last runs.",
    ),
    "doctor": Command(
        "mnemo_ops.cli.doctor",
        "Check config, database schema compatibility, versions and what is missing.",
    ),
    "demo": Command(
        "mnemo_ops.cli.demo",
        "Build a sample Mnemosyne home in a temporary folder, run every implemented job once and "
        "print the report; the temporary folder is removed at the end.",
    ),
    "why": Command(
        "mnemo_ops.cli.why",
        "What the agent would be given for one question, on a snapshot copy: the lines the Hermes "
        "plugin's prefetch injects, every candidate it considered with Mnemosyne's score parts "
        "(recall with explain) and its outcome (injected, ranked out, filtered by which rule), and "
        "for each --expect (a memory id, or a text the memory contains) why it is missing.",
    ),
    "capture": Command(
        "mnemo_ops.cli.capture",
        "Drop one item into the bridge inbox (<state_dir>/queue/new); the hourly bridge-drain job "
        "stores it in Mnemosyne exactly once.",
    ),
    "report": Command(
        "mnemo_ops.cli.report",
        "Print the morning report: runs in the period (ok, failed, skipped), overdue jobs, every "
        "open warning by severity with the command that fixes it, backup status, the eval trend "
        "and memory growth per table against a week ago.",
    ),
    "topics": Command(
        "mnemo_ops.cli.topics",
        "Show the topic map (live memories clustered by salient terms) and the seed map (per "
        "topic, the memories the agent should see first), with freshness warnings: maps built on "
        "memories that have changed since, and memory-block entries of canonical facts since "
        "superseded.",
    ),
    "cron": Command(
        "mnemo_ops.cli.cron",
        "The crontab rendered from jobs/*.yaml: render, install, uninstall.",
    ),
    "hermes": Command(
        "mnemo_ops.cli.hermes",
        "The jobs as Hermes' own script-only cron jobs ($HERMES_HOME/cron/jobs.json and one "
        "script each in $HERMES_HOME/scripts/mnemo-ops/): render, install, uninstall, status.",
    ),
    "systemd": Command(
        "mnemo_ops.cli.systemd",
        "The jobs as systemd services and timers (one pair per job, plus a template pair whose "
        "instance names a Hermes home): render, install, uninstall.",
    ),
    "kubernetes": Command(
        "mnemo_ops.cli.kubernetes",
        "The jobs as Kubernetes CronJobs, one set per agent volume.",
    ),
    "backup": Command(
        "mnemo_ops.cli.backup",
        "Checkpoints: list (with retention's plan), verify, restore.",
    ),
    "trigger": Command(
        "mnemo_ops.cli.trigger",
        "The canonical promotion trigger: install, uninstall, status.",
    ),
    "eval": Command(
        "mnemo_ops.cli.eval",
        "Retrieval eval: build a starter suite, run a suite against recall, write baselines, "
        "compare results, import benchmarks.",
    ),
    "quarantine": Command(
        "mnemo_ops.cli.quarantine",
        "Files staged instead of deleted (by nightly-selfcare): list, restore.",
    ),
    "summaries": Command(
        "mnemo_ops.cli.summaries",
        "Episodic summaries evening-batch repaired (tier and timestamp), and putting the "
        "originals back.",
    ),
    "forgotten": Command(
        "mnemo_ops.cli.forgotten",
        "Memories the sleep stages archived (forgetting) or closed (a proven contradiction), and "
        "restoring them.",
    ),
    "importance": Command(
        "mnemo_ops.cli.importance",
        "User statements whose importance the sleep stages raised past the Hermes plugin's cut, "
        "and putting the old values back.",
    ),
    "graduated": Command(
        "mnemo_ops.cli.graduated",
        "What the owner said that the sleep stages made global rows every later conversation "
        "receives, and closing them.",
    ),
    "config": Command(
        "mnemo_ops.cli.config",
        "The configuration: its JSON Schema and the resolved values.",
    ),
}
"""Every top-level command, in the order ``--help`` lists them (the single commands, then the
groups). The short help is the first sentence of the command's help, which ``--help`` shows without
importing the module; tests/cli/test_startup.py checks that the two agree."""

TYPER_SETTINGS: dict[str, Any] = {
    "add_completion": False,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
}
"""How the root app and the app each command module registers on are made (typer passes the root's
markup mode and exception settings down to every command it builds)."""


COMMANDS_HEADING = "Commands"
"""The heading of the command list in ``--help``, click's (a name rather than a literal in the call:
tests/test_architecture.py reads ``.section("...")`` as a settings lookup by name)."""


def load_command(name: str) -> Any:
    """The click command of the top-level command `name`: its module imported, ``register`` called
    on an app of its own, and the command typer builds there taken out."""
    module = importlib.import_module(COMMANDS[name].module)
    holder = typer.Typer(**TYPER_SETTINGS)
    module.register(holder)
    return typer.main.get_group(holder).commands[name]


class LazyGroup(TyperGroup):
    """The root group: the commands of `COMMANDS`, each module imported on first use (running it, or
    its own ``--help``); the list in ``--help`` comes from the table."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command's name, in the table's order."""
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command `cmd_name`, its module imported now if it was not yet (None if unknown)."""
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            command = load_command(cmd_name)
            prepare_help(command, self.context_class)
            self.commands[cmd_name] = command
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The "Commands" section from the table: each short help (the command's first sentence)
        shortened to the width by click's own rule, so the lines are those click would draw from
        the commands themselves."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, TyperCommand(name=name, help=command.short_help).get_short_help_str(limit))
            for name, command in COMMANDS.items()
        ]
        with formatter.section(COMMANDS_HEADING):
            formatter.write_dl(rows)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """As typer resolves it, the "Did you mean" of an unknown command drawn from every name
        (typer draws it from the commands already built)."""
        try:
            return super().resolve_command(ctx, args)
        except Exception as error:
            message = getattr(error, "message", None)
            if _is_usage_error(error) and isinstance(message, str) and args:
                matches = difflib.get_close_matches(args[0], list(COMMANDS))
                if self.suggest_commands and matches and "Did you mean" not in message:
                    suggestions = ", ".join(repr(match) for match in matches)
                    error.message = f"{message.rstrip('.')}. Did you mean {suggestions}?"
            raise


app = typer.Typer(
    cls=LazyGroup,
    name="mnemo-ops",
    help=(
        "Scheduled, idempotent, dry-run-capable maintenance jobs for a Mnemosyne memory database.\n\n"
        "Example: mnemo-ops run backup --dry-run"
    ),
    no_args_is_help=True,
    **TYPER_SETTINGS,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mnemo-ops {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    ctx: typer.Context,
    db: str = typer.Option(
        None,
        "--db",
        help="The Mnemosyne database (default: found as Mnemosyne does).",
        metavar="PATH",
    ),
    state_dir: str = typer.Option(
        None,
        "--state-dir",
        help="Our state folder (default: mnemo-ops beside data/).",
        metavar="DIR",
    ),
    config: str = typer.Option(None, "--config", help="YAML config file.", metavar="FILE"),
    json_output: bool = typer.Option(
        False, "--json", help="Print exactly one JSON object on stdout."
    ),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="More logging (-vv for debug)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version."
    ),
) -> None:
    """Scheduled, idempotent, dry-run-capable maintenance jobs for a Mnemosyne memory database."""
    app_state = AppState(
        db=db,
        state_dir=state_dir,
        config=config,
        json=json_output,
        verbosity=-1 if quiet else verbose,
    )
    begin_invocation(app_state)
    ctx.obj = app_state
    configure_logging(app_state.verbosity)


# The click objects are read by their attributes: typer ships its own copy of click in some
# versions and uses click itself in others, so their classes differ from one typer to the next.


def _subcommands(command: Any) -> dict[str, Any]:
    """The subcommands of `command` built so far (the root's: those already used)."""
    found = getattr(command, "commands", None)
    return found if isinstance(found, dict) else {}


def _subcommand(command: Any, name: str) -> Any:
    """The subcommand `name` of `command` (only that one built), or None."""
    get_command = getattr(command, "get_command", None)  # a group's; a command has none
    return get_command(None, name) if callable(get_command) else None


def _option_names(command: Any) -> dict[str, bool]:
    """Every option name of `command` (``--db``, ``-v``), and whether it takes a value."""
    names: dict[str, bool] = {}
    for parameter in getattr(command, "params", ()):
        if getattr(parameter, "param_type_name", None) != "option":
            continue
        takes_value = not (parameter.is_flag or parameter.count)
        for name in (*parameter.opts, *parameter.secondary_opts):
            names[name] = takes_value
    return names


def hoist_global_options(root: Any, arguments: list[str]) -> list[str]:
    """`arguments` with the global options found after the command moved in front of it.

    ``mnemo-ops status --json`` then means ``mnemo-ops --json status``. An option the command has
    of its own keeps its place (``eval import ... --db OUT.db``), a command's option that takes a
    value keeps that value with it, and nothing after ``--`` moves.
    """
    global_options = _option_names(root)
    head: list[str] = []
    tail: list[str] = []
    command = root
    own: dict[str, bool] = {}
    index = 0
    while index < len(arguments):
        token = arguments[index]
        if token == "--":
            tail.extend(arguments[index:])
            break
        name = token.split("=", 1)[0]
        cluster = (
            len(token) > 2
            and token[0] == "-"
            and token[1] != "-"
            and all(
                global_options.get(f"-{letter}") is False and f"-{letter}" not in own
                for letter in token[1:]
            )
        )
        if (name in global_options and name not in own) or cluster:
            head.append(token)
            if global_options.get(name) and "=" not in token and index + 1 < len(arguments):
                head.append(arguments[index + 1])
                index += 1
        elif not token.startswith("-") and (subcommand := _subcommand(command, token)) is not None:
            command = subcommand
            own = _option_names(command)
            tail.append(token)
        else:
            tail.append(token)
            if own.get(name) and "=" not in token and index + 1 < len(arguments):
                tail.append(arguments[index + 1])
                index += 1
        index += 1
    return head + tail


NON_BREAKING_HYPHEN = "\u2011"
"""Stands in for a hyphen inside a word while click wraps a help text (it breaks lines at hyphens,
so ``mnemo-ops`` came out as ``mnemo-`` / ``ops``); written back as ``-``."""


def _unbreakable(text: str) -> str:
    return re.sub(r"(?<=\w)-(?=\w)", NON_BREAKING_HYPHEN, text)


def _help_context(context_class: Any) -> Any:
    """`context_class` with a help formatter that never breaks a line inside a hyphenated word."""
    base = context_class.formatter_class

    class HelpFormatter(base):
        """Click's formatter, wrapping only at spaces."""

        def write(self, string: str) -> None:
            """Write, with the hyphens back in place."""
            super().write(string.replace(NON_BREAKING_HYPHEN, "-"))

        def write_text(self, text: str) -> None:
            """A help paragraph, wrapped at spaces only."""
            super().write_text(_unbreakable(text))

        def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
            """The usage line, wrapped at spaces only."""
            super().write_usage(_unbreakable(prog), _unbreakable(args), prefix)

        def write_dl(self, rows: Any, *arguments: Any, **options: Any) -> None:
            """The options and commands, their help wrapped at spaces only."""
            rows = [(first, _unbreakable(second)) for first, second in rows]
            super().write_dl(rows, *arguments, **options)

    class HelpContext(context_class):
        """The command's context, with that formatter."""

        formatter_class = HelpFormatter

    return HelpContext


def prepare_help(command: Any, context_class: Any = None) -> None:
    """Help texts that read right at any width, for `command` and every command below it.

    Every "Example" paragraph is marked so that click never rewraps it (an example must stay one
    line to be copied), and lines break only at spaces, never inside ``mnemo-ops``.
    """
    context_class = context_class or _help_context(command.context_class)
    command.context_class = context_class
    paragraphs = (command.help or "").split("\n\n") if getattr(command, "help", None) else []
    if paragraphs:
        command.help = "\n\n".join(
            f"\b\n{paragraph}"
            if paragraph.lstrip().startswith("Example") and not paragraph.startswith("\b")
            else paragraph
            for paragraph in paragraphs
        )
    for child in _subcommands(command).values():
        prepare_help(child, context_class)


def _json_wanted(arguments: list[str]) -> bool:
    """True when ``--json`` is among the global options (they come first once hoisted)."""
    for token in arguments:
        if token == "--json":
            return True
        if not token.startswith("-"):
            return False
    return False


def _print_error(message: str, exit_code: int, as_json: bool) -> None:
    """One line on stderr, and with --json the one JSON object on stdout."""
    if as_json:
        _write_json({"error": message, "exit_code": exit_code})
    sys.stderr.write(f"mnemo-ops: error: {message}\n")


def _write_json(data: dict) -> None:
    try:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()


def _is_usage_error(error: BaseException) -> bool:
    """A usage error of the command line (click's ClickException, by what it offers)."""
    return (
        isinstance(getattr(error, "exit_code", None), int)
        and callable(getattr(error, "format_message", None))
        and callable(getattr(error, "show", None))
    )


def _usage_message(error: Any) -> str:
    """The one-line message of a usage error (a group called without a command says so)."""
    context = getattr(error, "ctx", None)
    if type(error).__name__ == "NoArgsIsHelpError" and context is not None:
        commands = ", ".join(sorted(context.command.list_commands(context)))
        return f"{context.command_path} needs a command: {commands} (see: {context.command_path} --help)"
    return error.format_message()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    Every outcome is an exit code and, with ``--json``, exactly one JSON object on stdout: usage
    errors of the command line (``{"error": ..., "exit_code": 2}``) and unexpected crashes too.
    """
    token = begin_invocation(AppState())
    try:
        _main(argv)
    finally:
        end_invocation(token)


def _main(argv: list[str] | None) -> None:
    command = typer.main.get_command(app)
    prepare_help(command)
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        arguments = hoist_global_options(command, given)
    except Exception:  # a command module that fails to import: one line, as any crash
        _crash("--json" in given)
    as_json = _json_wanted(arguments)
    try:
        code = command.main(args=arguments, prog_name="mnemo-ops", standalone_mode=False)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except typer.Abort:
        _print_error("aborted", FAILED, as_json)
        raise SystemExit(FAILED) from None
    except BrokenPipeError:  # the reader stopped reading (`| head -1`): not a failure of ours
        stdout_closed()
        raise SystemExit(OK) from None
    except OSError as error:  # a file or folder: what failed, where, and what to do
        logging.getLogger("mnemo_ops").debug("OS error", exc_info=True)
        code = USAGE if error.errno in PATH_ERRNOS else FAILED
        _print_error(describe_os_error(error), code, as_json)
        raise SystemExit(code) from None
    except Exception as error:
        if not _is_usage_error(error):
            _crash(as_json)
        # Click's own text on stderr, and with --json the one JSON object on stdout (so help that
        # click prints for a group called without a command goes to stderr then).
        if as_json:
            _write_json({"error": _usage_message(error), "exit_code": error.exit_code})
        error.show(file=sys.stderr if as_json else None)
        raise SystemExit(error.exit_code) from None
    except BaseException:
        _crash(as_json)
    raise SystemExit(code if isinstance(code, int) else OK)


def _crash(as_json: bool) -> None:
    """An unexpected crash: one line (and the JSON object), the traceback kept for -vv; exit 1."""
    logging.getLogger("mnemo_ops").debug("unexpected error", exc_info=True)
    error_line = traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip()
    _print_error(f"internal error: {error_line} (run with -vv for details)", FAILED, as_json)
    raise SystemExit(FAILED) from None
