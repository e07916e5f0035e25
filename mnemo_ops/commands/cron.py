"""``mnemo-ops cron render|install|uninstall``: the crontab, rendered from jobs/*.yaml."""

from __future__ import annotations

import typer

from mnemo_ops.commands.common import CURRENT, command_group, emit, handle_errors
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.scheduling import crontab
from mnemo_ops.scheduling.invocation import installed_command, path_arguments, scheduled_flags
from mnemo_ops.settings import JOB_NAMES


def _rendered(command: list[str], with_paths: bool) -> str:
    settings = CURRENT.settings
    global_args = command[1:] + (path_arguments(settings) if with_paths else [])
    disabled = {name for name in JOB_NAMES if not settings.job(name).enabled}
    return crontab.render(
        effective_manifests(settings),
        command=command[0],
        global_args=global_args,
        disabled=disabled,
        job_flags=scheduled_flags(settings),
    )


def register(app: typer.Typer) -> None:
    """Add the ``cron`` command group."""
    cron_app = command_group(
        app,
        "cron",
        "The crontab rendered from jobs/*.yaml: render, install, uninstall.",
    )

    @cron_app.command(
        "render",
        help="Print the crontab (crontab.example is exactly this output).\n\n"
        "Example: mnemo-ops cron render > my-crontab",
    )
    @handle_errors
    def render_command(
        command: str = typer.Option("mnemo-ops", "--command", help="The program cron should call."),
    ) -> None:
        text = _rendered([command], with_paths=False)
        emit({"crontab": text}, lambda console: console.file.write(text))

    def _apply(new_text_for, dry_run: bool, action: str) -> None:
        current = crontab.read_crontab()
        updated = new_text_for(current)
        change = crontab.diff(current, updated)
        if not dry_run and change:
            crontab.write_crontab(updated)

        def text(console) -> None:
            if not change:
                console.print(f"crontab already up to date ({action}: nothing to do)")
            elif dry_run:
                console.file.write(change)
            else:
                console.print(f"crontab updated ({action})")

        emit({"changed": bool(change), "dry_run": dry_run, "diff": change}, text)

    @cron_app.command(
        "install",
        help="Add or update the mnemo-ops block in your crontab (idempotent).\n\n"
        "Example: mnemo-ops cron install --dry-run",
    )
    @handle_errors
    def install_command(
        dry_run: bool = typer.Option(
            False, "--dry-run", "-n", help="Show the diff; change nothing."
        ),
        command: str = typer.Option(
            None, "--command", help="The program cron should call (default: this one)."
        ),
    ) -> None:
        # The absolute path of this mnemo-ops (cron's PATH is minimal), or `python -m mnemo_ops`.
        rendered = _rendered([command] if command else installed_command(), with_paths=True)
        _apply(lambda current: crontab.with_block(current, rendered), dry_run, "install")

    @cron_app.command(
        "uninstall",
        help="Remove the mnemo-ops block from your crontab; other lines stay.\n\n"
        "Example: mnemo-ops cron uninstall",
    )
    @handle_errors
    def uninstall_command(
        dry_run: bool = typer.Option(
            False, "--dry-run", "-n", help="Show the diff; change nothing."
        ),
    ) -> None:
        _apply(crontab.strip_block, dry_run, "uninstall")
