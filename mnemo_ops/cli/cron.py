"""``mnemo-ops cron render|install|uninstall``: the crontab, rendered from jobs/*.yaml.

``render`` prints exactly the block ``install`` writes: this mnemo-ops by its absolute path with the
resolved ``--db`` and ``--state-dir``, after the variables the install saw (``HERMES_HOME``,
``MNEMOSYNE_DATA_DIR``, ``MNEMO_OPS_CONFIG``, ``PATH``): cron starts jobs with a bare environment, so
``cron render > my-crontab`` must give a crontab that runs the same home. ``--portable`` prints the
same block with the program by name, no paths and no variables (a comment says what to set): the
form of ``crontab.example``, the same on every machine.
"""

from __future__ import annotations

import typer

from mnemo_ops.cli.common import (
    command_group,
    emit,
    handle_errors,
    invocation_state,
    record_installed,
)
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.scheduling import crontab
from mnemo_ops.scheduling.installations import installed_elsewhere
from mnemo_ops.scheduling.invocation import (
    environment_mismatches,
    installed_command,
    path_arguments,
    scheduled_environment,
    scheduled_flags,
)
from mnemo_ops.settings import JOB_NAMES

CRONTAB_HELP = (
    "The crontab program is `crontab` on PATH; MNEMO_OPS_CRONTAB names another one (a command line, "
    "called with -l to read and - to write)."
)


def _rendered(command: list[str], with_paths: bool) -> str:
    settings = invocation_state().settings
    global_args = command[1:] + (path_arguments(settings) if with_paths else [])
    disabled = {name for name in JOB_NAMES if not settings.job(name).enabled}
    return crontab.render(
        effective_manifests(settings),
        command=command[0],
        global_args=global_args,
        disabled=disabled,
        job_flags=scheduled_flags(settings),
        environment=scheduled_environment(settings, command) if with_paths else None,
    )


def _entries(command: str | None, portable: bool = False) -> str:
    """The lines between the markers (`portable`: the program by name, no paths)."""
    if portable:
        return _rendered([command or "mnemo-ops"], with_paths=False)
    return _rendered([command] if command else installed_command(), with_paths=True)


def _scheduled_jobs() -> list[str]:
    """The jobs the block runs (implemented and enabled: the others are left out or commented)."""
    settings = invocation_state().settings
    return [
        name
        for name, manifest in effective_manifests(settings).items()
        if manifest.implemented and settings.job(name).enabled
    ]


@handle_errors
def render_command(
    command: str = typer.Option(
        None, "--command", help="The program cron should call (default: this one)."
    ),
    portable: bool = typer.Option(
        False, "--portable", help="The program by name, no paths (as crontab.example)."
    ),
) -> None:
    """Print the block cron install writes (--portable: the program by name, no paths)."""
    text = crontab.with_block("", _entries(command, portable))
    emit({"crontab": text}, lambda console: console.file.write(text))


def _apply(new_text_for, dry_run: bool, action: str, jobs: list[str]) -> None:
    current = crontab.read_crontab()
    updated = new_text_for(current)
    change = crontab.diff(current, updated)
    settings = invocation_state().settings
    warnings = installed_elsewhere(settings, "crontab", jobs) if jobs else []
    if jobs:  # an install, not an uninstall
        warnings = environment_mismatches(settings) + warnings
    if not dry_run and change:
        crontab.write_crontab(updated)
    if not dry_run:
        record_installed("crontab", jobs)

    def text(console) -> None:
        for warning in warnings:
            invocation_state().err_console.print(
                f"mnemo-ops: warning: {warning}", markup=False, soft_wrap=True
            )
        if not change:
            console.print(f"crontab already up to date ({action}: nothing to do)", markup=False)
        elif dry_run:
            console.file.write(change)
        else:
            console.print(f"crontab updated ({action})", markup=False)

    emit(
        {"changed": bool(change), "dry_run": dry_run, "diff": change, "warnings": warnings},
        text,
    )


@handle_errors
def install_command(
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Show the diff; change nothing."),
    command: str = typer.Option(
        None, "--command", help="The program cron should call (default: this one)."
    ),
) -> None:
    """Add or update the mnemo-ops block in the crontab."""
    entries = _entries(command)
    _apply(
        lambda current: crontab.with_block(current, entries),
        dry_run,
        "install",
        _scheduled_jobs(),
    )


@handle_errors
def uninstall_command(
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Show the diff; change nothing."),
) -> None:
    """Remove the mnemo-ops block from the crontab."""
    _apply(crontab.strip_block, dry_run, "uninstall", [])


def register(app: typer.Typer) -> None:
    """Add the ``cron`` command group."""
    cron_app = command_group(
        app,
        "cron",
        "The crontab rendered from jobs/*.yaml: render, install, uninstall. "
        f"{CRONTAB_HELP}\n\nExample: mnemo-ops cron install --dry-run",
    )

    cron_app.command(
        "render",
        help="Print the block cron install writes: this mnemo-ops by its absolute path, with the "
        "resolved --db and --state-dir, each line setting the HERMES_HOME, MNEMOSYNE_DATA_DIR, "
        "MNEMO_OPS_CONFIG and PATH this command sees (cron's environment is bare). --portable "
        "prints it with the program by name, no paths and no variables (crontab.example is exactly "
        "that output).\n\n"
        "Example: mnemo-ops cron render > my-crontab",
    )(render_command)

    cron_app.command(
        "install",
        help="Add or update the mnemo-ops block in your crontab (idempotent; the block cron "
        "render prints). Warns when another scheduler already runs the same jobs for this "
        f"database.\n\n{CRONTAB_HELP}\n\nExample: mnemo-ops cron install --dry-run",
    )(install_command)

    cron_app.command(
        "uninstall",
        help="Remove the mnemo-ops block from your crontab; other lines stay.\n\n"
        "Example: mnemo-ops cron uninstall",
    )(uninstall_command)
