"""``mnemo-ops systemd render|install|uninstall``: the jobs as systemd services and timers."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import typer

from mnemo_ops.cli.common import (
    command_group,
    emit,
    handle_errors,
    invocation_state,
    record_installed,
)
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.scheduling import systemd
from mnemo_ops.scheduling.installations import installed_elsewhere
from mnemo_ops.scheduling.invocation import (
    environment_mismatches,
    installed_command,
    path_arguments,
    scheduled_environment,
    scheduled_flags,
)
from mnemo_ops.settings import JOB_NAMES

EXIT_CODES = (
    "Exit codes: 0 ok, 1 failed (a unit file of that name is not ours, or systemctl failed), "
    "2 usage or config error (a schedule OnCalendar cannot express faithfully, named)."
)


def _options(user: bool, command: str | None) -> systemd.RenderOptions:
    settings = invocation_state().settings
    config = ["--config", str(settings.config_file)] if settings.config_file else []
    program = [command] if command else installed_command()
    return systemd.RenderOptions(
        command=program,
        path_arguments=path_arguments(settings),
        config_arguments=config,
        user=user,
        run_as=None if user else systemd.owner_of(settings.db_path),
        randomized_delay_s=settings.scheduling.systemd.randomized_delay_seconds,
        nice=settings.scheduling.systemd.nice,
        idle_jobs=frozenset(settings.scheduling.systemd.idle_jobs),
        disabled=frozenset(name for name in JOB_NAMES if not settings.job(name).enabled),
        job_flags=scheduled_flags(settings),
        environment=scheduled_environment(settings, program),
    )


def _units(user: bool, command: str | None, plain: bool = True) -> list[systemd.UnitFile]:
    manifests = effective_manifests(invocation_state().settings)
    return systemd.render_units(manifests, _options(user, command), plain=plain)


def _directory(user: bool, unit_dir: str | None) -> Path:
    if unit_dir:
        return Path(unit_dir).expanduser().absolute()
    return systemd.unit_dir(user, dict(os.environ))


def _print_plan(console, plan: systemd.SystemdPlan, action: str) -> None:
    if not plan.changed and not plan.commands:
        console.print(f"systemd units already up to date ({action}: nothing to do)", markup=False)
        return
    counts = Counter(change.action for change in plan.files)
    prefix = "would change (dry run, nothing written): " if plan.dry_run else ""
    summary = ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))
    console.print(f"{prefix}{plan.directory}: {summary or 'no file changes'}", markup=False)
    for change in plan.files:
        if change.action != "unchanged":
            console.print(f"  {change.action}: {change.name}", markup=False)
    for command in plan.to_dict()["systemctl"]:
        console.print(f"  {'would run' if plan.dry_run else 'ran'}: {command}", markup=False)


# The options several commands share.
USER_OPTION = typer.Option(
    False, "--user", help="User units (~/.config/systemd/user) instead of system units."
)
UNIT_DIR_OPTION = typer.Option(None, "--unit-dir", help="Another unit folder.", metavar="DIR")
DRY_RUN_OPTION = typer.Option(
    False, "--dry-run", "-n", help="Show what would change; change nothing."
)
NO_SYSTEMCTL_OPTION = typer.Option(
    False, "--no-systemctl", help="Only write or remove the files; do not call systemctl."
)
HOME_OPTION = typer.Option(
    None,
    "--home",
    help="A Hermes home to maintain through the template units (repeatable); without it, "
    "the plain units serve this configuration's home.",
    metavar="PATH",
)


@handle_errors
def render_command(
    user: bool = USER_OPTION,
    command: str = typer.Option(
        None, "--command", help="The program the units run (default: this one)."
    ),
) -> None:
    """Print the unit files rendered from jobs/*.yaml."""
    units = _units(user, command)

    def text(console) -> None:
        for unit in units:
            console.file.write(f"# ---- {unit.name}\n{unit.text}\n")

    emit(
        {
            "unit_dir": str(systemd.unit_dir(user, dict(os.environ))),
            "units": {unit.name: unit.text for unit in units},
        },
        text,
    )


@handle_errors
def install_command(
    user: bool = USER_OPTION,
    home: list[str] = HOME_OPTION,
    unit_dir: str = UNIT_DIR_OPTION,
    no_systemctl: bool = NO_SYSTEMCTL_OPTION,
    dry_run: bool = DRY_RUN_OPTION,
) -> None:
    """Write the units, reload systemd and enable the timers."""
    homes = [Path(path).expanduser().absolute() for path in home or []]
    units = _units(user, None, plain=not homes)
    jobs = sorted({unit.job for unit in units}, key=JOB_NAMES.index)
    settings = invocation_state().settings

    def timers_jobs(jobs: list[str]) -> list[str]:
        return [job for job in jobs if settings.job(job).enabled]

    def timers(enabled: bool) -> list[str]:
        chosen = [job for job in jobs if settings.job(job).enabled == enabled]
        if homes:
            return [systemd.instance_timer(job, path) for path in homes for job in chosen]
        return [f"{systemd.UNIT_PREFIX}{job}.timer" for job in chosen]

    directory = _directory(user, unit_dir)
    plan = systemd.plan_install(
        directory,
        units,
        user,
        enable=timers(True),
        disable=timers(False),
        use_systemctl=not no_systemctl,
        keep_plain=bool(homes),
    )
    plan.dry_run = dry_run
    warnings = [] if homes else installed_elsewhere(settings, "systemd", timers_jobs(jobs))
    warnings = environment_mismatches(settings) + warnings
    if not dry_run:
        systemd.check_systemctl(plan, user)
        systemd.apply_install(plan, units)
        if not homes:
            record_installed("systemd", timers_jobs(jobs))

    def text(console) -> None:
        for warning in warnings:
            invocation_state().err_console.print(
                f"mnemo-ops: warning: {warning}", markup=False, soft_wrap=True
            )
        _print_plan(console, plan, "install")

    emit({**plan.to_dict(), "warnings": warnings}, text)


@handle_errors
def uninstall_command(
    user: bool = USER_OPTION,
    unit_dir: str = UNIT_DIR_OPTION,
    no_systemctl: bool = NO_SYSTEMCTL_OPTION,
    dry_run: bool = DRY_RUN_OPTION,
) -> None:
    """Disable our timers and remove our unit files."""
    plan = systemd.plan_uninstall(_directory(user, unit_dir), user, not no_systemctl)
    plan.dry_run = dry_run
    if not dry_run:
        systemd.check_systemctl(plan, user)
        systemd.apply_uninstall(plan)
        record_installed("systemd", [])
    emit(plan.to_dict(), lambda console: _print_plan(console, plan, "uninstall"))


def register(app: typer.Typer) -> None:
    """Add the ``systemd`` command group."""
    systemd_app = command_group(
        app,
        "systemd",
        "The jobs as systemd services and timers (one pair per job, plus a template pair "
        "whose instance names a Hermes home): render, install, uninstall.\n\n"
        "Example: mnemo-ops systemd install --user --dry-run",
    )

    systemd_app.command(
        "render",
        help="Print the unit files (plain and template pairs) rendered from jobs/*.yaml.\n\n"
        f"{EXIT_CODES}\n\nExample: mnemo-ops systemd render --user",
    )(render_command)

    systemd_app.command(
        "install",
        help="Write the units (idempotent; other units in the folder are never touched), reload "
        "systemd and enable the timers (of this home, or of each --home).\n\n"
        f"{EXIT_CODES}\n\nExample: mnemo-ops systemd install --user --dry-run",
    )(install_command)

    systemd_app.command(
        "uninstall",
        help="Disable our timers (plain and every instance) and remove our unit files; other units "
        f"stay byte for byte.\n\n{EXIT_CODES}\n\nExample: mnemo-ops systemd uninstall --user",
    )(uninstall_command)
