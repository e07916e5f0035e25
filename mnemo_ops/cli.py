"""The ``mnemo-ops`` command line: parse, load settings, call the library, render the result."""

from __future__ import annotations

import typer

from mnemo_ops import __version__
from mnemo_ops.commands import (
    backup,
    capture,
    config,
    cron,
    demo,
    doctor,
    forgotten,
    hermes,
    jobs,
    kubernetes,
    quarantine,
    report,
    run,
    status,
    summaries,
    systemd,
    topics,
    trigger,
    why,
)
from mnemo_ops.commands import eval as eval_commands
from mnemo_ops.commands.common import CURRENT, configure_logging

app = typer.Typer(
    name="mnemo-ops",
    help=(
        "Scheduled, idempotent, dry-run-capable maintenance jobs for a Mnemosyne memory database.\n\n"
        "Example: mnemo-ops run backup --dry-run"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
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
    CURRENT.db, CURRENT.state_dir, CURRENT.config = db, state_dir, config
    CURRENT.json = json_output
    CURRENT.verbosity = -1 if quiet else verbose
    ctx.obj = CURRENT
    configure_logging(CURRENT.verbosity)


COMMAND_MODULES = (
    run,
    jobs,
    status,
    doctor,
    cron,
    hermes,
    systemd,
    kubernetes,
    demo,
    backup,
    trigger,
    eval_commands,
    why,
    quarantine,
    capture,
    report,
    topics,
    summaries,
    forgotten,
    config,
)
"""Every command module, in the order ``--help`` lists them; each adds itself with ``register(app)``."""
for _module in COMMAND_MODULES:
    _module.register(app)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except BaseException:  # an unexpected crash: keep the traceback for -vv, one line otherwise
        import logging
        import sys
        import traceback

        logging.getLogger("mnemo_ops").debug("unexpected error", exc_info=True)
        error_line = traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip()
        sys.stderr.write(f"mnemo-ops: internal error: {error_line} (run with -vv for details)\n")
        raise SystemExit(1) from None
