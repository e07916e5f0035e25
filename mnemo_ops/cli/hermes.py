"""``mnemo-ops hermes render|install|uninstall|status``: the jobs as Hermes' own cron jobs."""

from __future__ import annotations

import os
from collections import Counter

import typer

from mnemo_ops.cli.common import (
    command_group,
    emit,
    handle_errors,
    invocation_state,
    record_installed,
)
from mnemo_ops.cli.common import table as results_table
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.foundation.clock import local_now
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.scheduling.hermes.config import hermes_timezone
from mnemo_ops.scheduling.hermes.entries import HERMES_DEFAULT_DELIVER, NAME_PREFIX
from mnemo_ops.scheduling.hermes.install import (
    HermesPlan,
    InstallRequest,
    apply_install,
    apply_uninstall,
    plan_install,
    plan_uninstall,
)
from mnemo_ops.scheduling.hermes.install import status as hermes_status
from mnemo_ops.scheduling.hermes.paths import HermesPaths, script_reference
from mnemo_ops.scheduling.hermes.scripts import render_script
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
    "Exit codes: 0 ok, 1 failed (e.g. jobs.json is not valid JSON: reported, never overwritten), "
    "2 usage or config error, 75 cron/.jobs.lock stayed held by another writer."
)


def _request(deliver: str | None, wait: float | None) -> InstallRequest:
    settings = invocation_state().settings
    deliver = deliver if deliver is not None else settings.scheduling.hermes.deliver
    if deliver is not None and (not deliver or any(character.isspace() for character in deliver)):
        raise UsageError(
            f"--deliver must be a Hermes delivery target such as local, got {deliver!r}"
        )
    manifests = {
        name: manifest
        for name, manifest in effective_manifests(settings).items()
        if manifest.implemented
    }
    zone = hermes_timezone(settings.hermes_home, dict(os.environ))
    program = installed_command()
    return InstallRequest(
        manifests=manifests,
        command=[*program, *path_arguments(settings)],
        deliver=deliver,
        disabled={name for name in JOB_NAMES if not settings.job(name).enabled},
        report_since=settings.scheduling.hermes.report_since,
        now=local_now().astimezone(zone),
        lock_wait_s=settings.scheduling.hermes.lock_wait_seconds if wait is None else wait,
        environ=dict(os.environ),
        job_flags=scheduled_flags(settings),
        environment=scheduled_environment(settings, program),
    )


def _paths() -> HermesPaths:
    return HermesPaths(invocation_state().settings.hermes_home)


def _print_plan(console, plan: HermesPlan, action: str) -> None:
    for warning in plan.warnings:
        invocation_state().err_console.print(f"mnemo-ops: warning: {warning}", markup=False)
    if not plan.changed:
        console.print(f"Hermes cron already up to date ({action}: nothing to do)", markup=False)
        return
    if plan.dry_run:
        console.print(f"{action} would change (dry run, nothing written):", markup=False)
        console.file.write(plan.diff())
    entries = Counter(change.action for change in plan.entries)
    scripts = Counter(change.action for change in plan.scripts)
    verb = "would be" if plan.dry_run else ""
    console.print(
        f"{plan.paths.jobs_file}: "
        + ", ".join(f"{count} {name}" for name, count in sorted(entries.items()))
        + (f" ({verb.strip()})" if verb else ""),
        markup=False,
    )
    if scripts:
        console.print(
            f"{plan.paths.our_scripts_dir}: "
            + ", ".join(f"{count} {name}" for name, count in sorted(scripts.items())),
            markup=False,
        )


# The options several commands share.
DELIVER_OPTION = typer.Option(
    None,
    "--deliver",
    help="Where Hermes delivers output: local, origin, telegram:<chat>, ... (default: config "
    "scheduling.hermes.deliver; unset, installed jobs keep theirs and new ones get local).",
    metavar="TARGET",
)
WAIT_OPTION = typer.Option(
    None,
    "--wait",
    help="Seconds to wait for cron/.jobs.lock (default: scheduling.hermes.lock_wait_seconds).",
    metavar="SECONDS",
    min=0,
)
DRY_RUN_OPTION = typer.Option(
    False, "--dry-run", "-n", help="Show the diff of jobs.json; change nothing."
)


@handle_errors
def render_command(deliver: str = DELIVER_OPTION) -> None:
    """Print the scripts and the jobs.json fields that install would write."""
    request = _request(deliver, 0)
    paths = _paths()
    scripts = {
        str(paths.script_path(job)): render_script(
            job, request.command, request.report_since, request.job_flags, request.environment
        )
        for job in request.manifests
    }
    entries = [
        {
            "job": job,
            "name": f"{NAME_PREFIX}{job}",
            "script": script_reference(job),
            "no_agent": True,
            "schedule": {"kind": "cron", "expr": manifest.schedule},
            "deliver": request.deliver or HERMES_DEFAULT_DELIVER,
            "enabled": job not in request.disabled,
        }
        for job, manifest in request.manifests.items()
    ]

    def text(console) -> None:
        for path, script in scripts.items():
            console.file.write(f"# ---- {path}\n{script}\n")
        for entry in entries:
            state = "enabled" if entry["enabled"] else "paused (disabled in config)"
            console.file.write(
                f"# jobs.json: {entry['name']}: {entry['schedule']['expr']} -> "
                f"{entry['script']}, deliver {entry['deliver']}, {state}\n"
            )

    emit({"jobs_file": str(paths.jobs_file), "scripts": scripts, "entries": entries}, text)


@handle_errors
def install_command(
    deliver: str = DELIVER_OPTION,
    dry_run: bool = DRY_RUN_OPTION,
    wait: float = WAIT_OPTION,
) -> None:
    """Add or update one Hermes cron job per mnemo-ops job, with its script."""
    request = _request(deliver, wait)
    paths = _paths()
    jobs = [job for job in request.manifests if job not in request.disabled]
    settings = invocation_state().settings
    elsewhere = environment_mismatches(settings) + installed_elsewhere(settings, "hermes", jobs)
    if dry_run:
        plan = plan_install(paths, request)
    else:
        plan = apply_install(paths, request)
        record_installed("hermes", jobs)
    plan.warnings.extend(elsewhere)
    emit(plan.to_dict(), lambda console: _print_plan(console, plan, "install"))


@handle_errors
def uninstall_command(dry_run: bool = DRY_RUN_OPTION, wait: float = WAIT_OPTION) -> None:
    """Remove our jobs from jobs.json, and our scripts."""
    settings = invocation_state().settings
    paths = _paths()
    if dry_run:
        plan = plan_uninstall(paths)
    else:
        lock_wait = settings.scheduling.hermes.lock_wait_seconds
        plan = apply_uninstall(paths, lock_wait if wait is None else wait)
        record_installed("hermes", [])
    emit(plan.to_dict(), lambda console: _print_plan(console, plan, "uninstall"))


@handle_errors
def status_command() -> None:
    """Show our jobs in Hermes' cron, and whether install would change anything."""
    data = hermes_status(_paths(), _request(None, 0))

    def text(console) -> None:
        table = results_table(title=f"Hermes cron ({data['jobs_file']})")
        for column in ("job", "installed", "state", "schedule", "next run", "last run", "last"):
            table.add_column(column)
        for row in data["jobs"]:
            installed = "no"
            if row["installed"]:
                installed = "yes" if row["up_to_date"] else "yes (out of date: reinstall)"
            table.add_row(
                row["job"],
                installed,
                row["state"] or "-",
                row["schedule"] or "-",
                row["next_run_at"] or "-",
                row["last_run_at"] or "-",
                (row["last_status"] or "-")
                + (f": {row['last_error']}" if row["last_error"] else ""),
            )
        console.print(table)
        console.print(f"other jobs in jobs.json (not ours): {data['foreign_jobs']}", markup=False)
        for warning in data["warnings"]:
            console.print(f"warning: {warning}", markup=False)

    emit(data, text)


def register(app: typer.Typer) -> None:
    """Add the ``hermes`` command group."""
    hermes_app = command_group(
        app,
        "hermes",
        "The jobs as Hermes' own script-only cron jobs ($HERMES_HOME/cron/jobs.json and one "
        "script each in $HERMES_HOME/scripts/mnemo-ops/): render, install, uninstall, status."
        "\n\nExample: mnemo-ops hermes install --dry-run",
    )

    hermes_app.command(
        "render",
        help="Print the scripts and the jobs.json fields that install would write (reads nothing "
        f"of Hermes, writes nothing).\n\n{EXIT_CODES}\n\nExample: mnemo-ops hermes render",
    )(render_command)

    hermes_app.command(
        "install",
        help="Add or update one Hermes cron job per mnemo-ops job, with its script, under Hermes' "
        "lock (idempotent; other jobs in jobs.json are never changed). Healthy runs are silent; a "
        "failure is one line, delivered as an alert; the morning report is delivered only when "
        f"something needs you.\n\n{EXIT_CODES}\n\n"
        "Example: mnemo-ops hermes install --deliver telegram:123456 --dry-run",
    )(install_command)

    hermes_app.command(
        "uninstall",
        help="Remove our jobs from jobs.json (others stay byte for byte) and our scripts.\n\n"
        f"{EXIT_CODES}\n\nExample: mnemo-ops hermes uninstall --dry-run",
    )(uninstall_command)

    hermes_app.command(
        "status",
        help="Our jobs in Hermes' cron: state, schedule, next and last run, last status, and "
        f"whether install would change anything (read-only).\n\n{EXIT_CODES}\n\n"
        "Example: mnemo-ops hermes status",
    )(status_command)
