"""Install, uninstall and status of our jobs in one Hermes home.

Each is a plan first, computed read-only (`plan_install`, `plan_uninstall`: the new jobs.json text,
the script changes, warnings); applying re-reads jobs.json under Hermes' lock and computes the plan
again there, so a concurrent writer's change is never lost. Scripts are written before the entries
that name them, and removed after. A record beside our scripts (``.install.json``) remembers the
file's ``updated_at`` from before our first install, so an uninstall that leaves only foreign entries
gives back the file exactly as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo_ops.core.manifests import JobManifest
from mnemo_ops.foundation.clock import local_now
from mnemo_ops.foundation.errors import MnemoOpsError, UsageError
from mnemo_ops.foundation.private_files import fsync_path, refuse_symlink, write_atomic
from mnemo_ops.scheduling.hermes.config import script_timeout
from mnemo_ops.scheduling.hermes.entries import updated_entry
from mnemo_ops.scheduling.hermes.jobs_file import (
    JobsDocument,
    compose_jobs_text,
    parse_jobs_text,
    read_jobs_document,
)
from mnemo_ops.scheduling.hermes.jobs_lock import jobs_lock
from mnemo_ops.scheduling.hermes.paths import HermesPaths, job_of_entry, our_entries
from mnemo_ops.scheduling.hermes.scripts import SCRIPT_MARKER, render_script
from mnemo_ops.scheduling.text_diff import unified_diff

INSTALL_RECORD = ".install.json"
"""Beside our scripts: the ``updated_at`` jobs.json had before our first install, and the one we wrote."""


@dataclasses.dataclass
class ScriptChange:
    """One script file: created, updated, unchanged or removed."""

    job: str
    path: Path
    action: str
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"job": self.job, "path": str(self.path), "action": self.action}


@dataclasses.dataclass
class EntryChange:
    """One entry of jobs.json: added, updated, unchanged or removed."""

    job: str
    action: str
    entry_id: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"job": self.job, "action": self.action, "id": self.entry_id}


@dataclasses.dataclass
class HermesPlan:
    """The outcome of install or uninstall: the new jobs.json text, script changes, warnings."""

    paths: HermesPaths
    before: str | None
    after: str | None
    entries: list[EntryChange]
    scripts: list[ScriptChange]
    warnings: list[str] = dataclasses.field(default_factory=list)
    dry_run: bool = False

    @property
    def jobs_file_changed(self) -> bool:
        """True when jobs.json would change."""
        return self.after is not None and self.after != self.before

    @property
    def changed(self) -> bool:
        """True when anything would change (jobs.json or a script)."""
        return self.jobs_file_changed or any(s.action != "unchanged" for s in self.scripts)

    def diff(self) -> str:
        """A unified diff of jobs.json ("" when it does not change)."""
        if not self.jobs_file_changed:
            return ""
        return unified_diff(
            self.before or "",
            self.after,
            f"{self.paths.jobs_file} (current)",
            f"{self.paths.jobs_file} (new)",
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the plan."""
        return {
            "jobs_file": str(self.paths.jobs_file),
            "changed": self.changed,
            "dry_run": self.dry_run,
            "jobs": [change.to_dict() for change in self.entries],
            "scripts": [change.to_dict() for change in self.scripts],
            "diff": self.diff(),
            "warnings": list(self.warnings),
        }


def _script_changes(paths: HermesPaths, scripts: dict[str, str]) -> list[ScriptChange]:
    changes = []
    refuse_symlink(paths.scripts_dir)
    refuse_symlink(paths.our_scripts_dir)
    for job, text in scripts.items():
        path = paths.script_path(job)
        refuse_symlink(path)
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = None
        if current is not None and SCRIPT_MARKER not in current:
            raise MnemoOpsError(
                f"{path} exists and was not written by mnemo-ops; move it away first"
            )
        action = "create" if current is None else ("unchanged" if current == text else "update")
        changes.append(ScriptChange(job, path, action, text))
    return changes


def _stale_scripts(paths: HermesPaths, keep: set[str]) -> list[ScriptChange]:
    """Our scripts (by their marker) whose job is not in `keep`."""
    if not paths.our_scripts_dir.is_dir() or paths.our_scripts_dir.is_symlink():
        return []
    stale = []
    for path in sorted(paths.our_scripts_dir.glob("*.sh")):
        job = path.name[: -len(".sh")]
        if job in keep or path.is_symlink() or not path.is_file():
            continue
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if SCRIPT_MARKER in path.read_text(encoding="utf-8"):
                stale.append(ScriptChange(job, path, "remove"))
    return stale


def _new_entries(
    document: JobsDocument, wanted: dict[str, dict[str, Any]]
) -> tuple[list[tuple[int | None, Any]], list[EntryChange]]:
    """The entries of the new file and what happened to each of ours.

    Foreign entries keep their text and place; ours are updated in place (a second copy of one of
    ours is dropped), missing ones are appended at the end, as Hermes appends a new job.
    """
    result: list[tuple[int | None, Any]] = []
    changes: list[EntryChange] = []
    placed: set[str] = set()
    for index, value in enumerate(document.entries):
        job = job_of_entry(value)
        if job is None:
            result.append((index, value))
            continue
        if job not in wanted or job in placed:
            changes.append(EntryChange(job, "remove", value.get("id")))
            continue
        placed.add(job)
        new_value = wanted[job]
        same = new_value == value
        result.append((index if same else None, new_value))
        changes.append(EntryChange(job, "unchanged" if same else "update", value.get("id")))
    for job, value in wanted.items():
        if job not in placed:
            result.append((None, value))
            changes.append(EntryChange(job, "add", value.get("id")))
    return result, changes


def _record_path(paths: HermesPaths) -> Path:
    return paths.our_scripts_dir / INSTALL_RECORD


def _read_record(paths: HermesPaths) -> dict[str, Any]:
    path = _record_path(paths)
    if path.is_symlink():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclasses.dataclass
class InstallRequest:
    """What to install: the rendered jobs with their scripts and the entry fields we own."""

    manifests: dict[str, JobManifest]
    command: list[str]
    deliver: str | None
    disabled: set[str]
    report_since: str
    now: datetime
    lock_wait_s: float
    environ: dict[str, str]
    job_flags: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """What each script exports (`invocation.scheduled_environment`)."""


def _plan(
    paths: HermesPaths,
    document: JobsDocument,
    request: InstallRequest | None,
) -> tuple[HermesPlan, str]:
    """The plan for `document`: install `request`, or uninstall when `request` is None."""
    if request is not None and not paths.hermes_home.is_dir():
        raise UsageError(
            f"no Hermes home at {paths.hermes_home}: set HERMES_HOME (or hermes_home in the config)"
        )
    stamp = (request.now if request else local_now().astimezone()).isoformat()
    wanted: dict[str, dict[str, Any]] = {}
    scripts: list[ScriptChange] = []
    warnings: list[str] = []
    if request is not None:
        existing = our_entries(document.entries)
        for job, manifest in request.manifests.items():
            wanted[job] = updated_entry(
                existing.get(job),
                job,
                manifest,
                request.deliver,
                job not in request.disabled,
                request.now,
            )
        limit = script_timeout(paths.hermes_home, request.environ)
        job_flags = {job: list(flags) for job, flags in request.job_flags.items()}
        for job, manifest in request.manifests.items():
            if manifest.timeout > limit:
                # Hermes would kill the script mid-run; the job stops itself first instead, at a
                # safe point, and its run is recorded as timed out.
                cap = capped_timeout(limit)
                job_flags.setdefault(job, []).extend(["--timeout", str(cap)])
                warnings.append(
                    f"{job}: its timeout ({manifest.timeout} s) is longer than Hermes' script "
                    f"timeout ({limit} s): its Hermes script stops it after {cap} s; to give it "
                    f"its full time, raise cron.script_timeout_seconds in "
                    f"{paths.hermes_home / 'config.yaml'} and install again"
                )
        texts = {
            job: render_script(
                job, request.command, request.report_since, job_flags, request.environment
            )
            for job in request.manifests
        }
        scripts = _script_changes(paths, texts)
    scripts += _stale_scripts(paths, set(wanted))
    entries, changes = _new_entries(document, wanted)
    if any(change.action != "unchanged" for change in changes):
        if not document.exists and not entries:
            after = None
        else:
            after = compose_jobs_text(document, entries, stamp)
            if request is None and not wanted:
                after = _restore_stamp(paths, document, after)
    else:
        after = document.text
    plan = HermesPlan(paths, document.text, after, changes, scripts, warnings)
    return plan, stamp


CAP_MARGIN_S = 300
"""How long before Hermes' script timeout a capped job stops itself (its stop, its ledger row)."""


def capped_timeout(limit: int) -> int:
    """The timeout a job gets in a Hermes script whose runs Hermes stops after `limit` seconds:
    `CAP_MARGIN_S` sooner (a tenth sooner for a limit under ten times the margin)."""
    return max(1, limit - min(CAP_MARGIN_S, limit // 10))


def _untouched_since_ours(document: JobsDocument, record: dict[str, Any]) -> bool:
    """True when jobs.json still carries the ``updated_at`` of our last write: no one else wrote it."""
    if document.updated_at_span is None or "updated_at_written" not in record:
        return False
    a, b = document.updated_at_span
    return document.text[a:b] == record["updated_at_written"]


def _restore_stamp(paths: HermesPaths, document: JobsDocument, after: str) -> str:
    """After an uninstall that leaves only foreign entries: when nobody wrote jobs.json since our last
    write, put back the ``updated_at`` it had before our first install (the file is then exactly
    what it was before)."""
    record = _read_record(paths)
    if document.updated_at_span is None or "updated_at_before" not in record:
        return after
    a, b = document.updated_at_span
    if document.text[a:b] != record.get("updated_at_written"):
        return after
    new_document = parse_jobs_text(document.path, after)
    a, b = new_document.updated_at_span
    return after[:a] + record["updated_at_before"] + after[b:]


def plan_install(paths: HermesPaths, request: InstallRequest) -> HermesPlan:
    """What install would change (read-only; reads jobs.json without the lock)."""
    plan, _ = _plan(paths, read_jobs_document(paths), request)
    plan.dry_run = True
    return plan


def plan_uninstall(paths: HermesPaths) -> HermesPlan:
    """What uninstall would change (read-only)."""
    plan, _ = _plan(paths, read_jobs_document(paths), None)
    plan.dry_run = True
    return plan


def _write_scripts(paths: HermesPaths, scripts: list[ScriptChange]) -> None:
    for change in scripts:
        if change.action in ("create", "update"):
            for folder in (paths.scripts_dir, paths.our_scripts_dir):
                refuse_symlink(folder)
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            refuse_symlink(change.path)
            write_atomic(change.path, change.text.encode("utf-8"))
            os.chmod(change.path, 0o700)


def _remove_scripts(paths: HermesPaths, scripts: list[ScriptChange]) -> None:
    for change in scripts:
        if change.action == "remove" and change.path.is_file() and not change.path.is_symlink():
            change.path.unlink()


def _existing(paths: HermesPaths) -> dict[str, bool]:
    """Which of Hermes' cron paths exist now (before our first install: what to leave behind)."""
    return {name: path.exists() for name, path in _CREATED_PATHS(paths).items()}


def _CREATED_PATHS(paths: HermesPaths) -> dict[str, Path]:  # noqa: N802 (a table, by name)
    return {
        "scripts": paths.scripts_dir,
        "cron": paths.cron_dir,
        "lock": paths.lock_file,
        "jobs": paths.jobs_file,
    }


def _write_jobs_file(paths: HermesPaths, text: str) -> None:
    """Replace jobs.json atomically, keeping the mode it had (a new one is 0600)."""
    try:
        mode = paths.jobs_file.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    write_atomic(paths.jobs_file, text.encode("utf-8"))
    os.chmod(paths.jobs_file, mode)


def _write_record(
    paths: HermesPaths, document: JobsDocument, after: str, existed: dict[str, bool]
) -> None:
    """Remember the file's ``updated_at`` from before our first install and the one we wrote, and
    which of Hermes' cron paths our first install created (uninstall removes only those)."""
    record = _read_record(paths)
    had_ours = any(job_of_entry(value) for value in document.entries)
    if not had_ours:
        record["created"] = [name for name, present in existed.items() if not present]
    if not had_ours and document.updated_at_span is not None:
        a, b = document.updated_at_span
        record["updated_at_before"] = document.text[a:b]
    elif not had_ours:
        record.pop("updated_at_before", None)
    written = parse_jobs_text(document.path, after).updated_at_span
    if written is not None:
        record["updated_at_written"] = after[written[0] : written[1]]
    write_atomic(_record_path(paths), (json.dumps(record, indent=2) + "\n").encode("utf-8"))


def apply_install(paths: HermesPaths, request: InstallRequest) -> HermesPlan:
    """Install: scripts first (an entry never points at a missing script), then jobs.json under
    Hermes' lock, re-read once the lock is held so a concurrent writer's change is never lost."""
    plan_install(paths, request)  # a malformed jobs.json stops here, before anything is written
    existed = _existing(paths)
    with jobs_lock(paths, request.lock_wait_s):
        document = read_jobs_document(paths)
        plan, _ = _plan(paths, document, request)
        _write_scripts(paths, plan.scripts)
        if plan.jobs_file_changed:
            _write_jobs_file(paths, plan.after)
            _write_record(paths, document, plan.after, existed)
    _remove_scripts(paths, plan.scripts)
    return plan


def apply_uninstall(paths: HermesPaths, lock_wait_s: float) -> HermesPlan:
    """Uninstall: our entries out of jobs.json under the lock, then our scripts and folder."""
    if not paths.jobs_file.exists() and not paths.our_scripts_dir.exists():
        return plan_uninstall(paths)
    record = _read_record(paths)
    created = set(record.get("created") or [])
    with jobs_lock(paths, lock_wait_s):
        document = read_jobs_document(paths)
        plan, _ = _plan(paths, document, None)
        untouched = _untouched_since_ours(document, record)
        if plan.jobs_file_changed:
            left = parse_jobs_text(paths.jobs_file, plan.after).entries
            if "jobs" in created and not left:
                paths.jobs_file.unlink()  # ours from the start, and nothing else in it
            else:
                _write_jobs_file(paths, plan.after)
        if "lock" in created and (untouched or not paths.jobs_file.exists()):
            # Our first install made the lock file, and no writer of Hermes' has changed jobs.json
            # since our last write (none has been using the lock): it goes, while still held.
            paths.lock_file.unlink(missing_ok=True)
    _remove_scripts(paths, plan.scripts)
    folder = paths.our_scripts_dir
    if folder.is_dir() and not folder.is_symlink():
        record = _record_path(paths)
        if record.is_file() and not record.is_symlink():
            record.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty: a file someone else put there stays
        fsync_path(paths.scripts_dir)
    # The folders our first install made go too, when nothing else is in them.
    for name in ("scripts", "cron"):
        path = _CREATED_PATHS(paths)[name]
        if name in created and path.is_dir() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.rmdir()
    return plan


# ----------------------------------------------------------------------------------------------
# Status: what Hermes has of ours.


def installed_entries(paths: HermesPaths) -> dict[str, dict[str, Any]]:
    """Our entries in jobs.json by job (the first one of each); {} when there is no file."""
    return our_entries(read_jobs_document(paths).entries)


def status(paths: HermesPaths, request: InstallRequest) -> dict[str, Any]:
    """Each rendered job's Hermes entry (state, next and last run, last status), and whether an
    install would change anything."""
    document = read_jobs_document(paths)
    plan, _ = _plan(paths, document, request)
    changes = {change.job: change.action for change in plan.entries}
    script_actions = {change.job: change.action for change in plan.scripts}
    entries = our_entries(document.entries)
    rows = []
    for job in request.manifests:
        entry = entries.get(job)
        rows.append(
            {
                "job": job,
                "installed": entry is not None,
                "id": entry.get("id") if entry else None,
                "enabled": entry.get("enabled", True) if entry else None,
                "state": entry.get("state") if entry else None,
                "schedule": ((entry.get("schedule") or {}).get("expr") if entry else None),
                "deliver": entry.get("deliver") if entry else None,
                "next_run_at": entry.get("next_run_at") if entry else None,
                "last_run_at": entry.get("last_run_at") if entry else None,
                "last_status": entry.get("last_status") if entry else None,
                "last_error": entry.get("last_error") if entry else None,
                "script": str(paths.script_path(job)),
                "script_present": paths.script_path(job).is_file(),
                "up_to_date": entry is not None
                and changes.get(job) == "unchanged"
                and script_actions.get(job) == "unchanged",
            }
        )
    foreign = sum(1 for value in document.entries if job_of_entry(value) is None)
    return {
        "jobs_file": str(paths.jobs_file),
        "jobs_file_exists": document.exists,
        "jobs": rows,
        "foreign_jobs": foreign,
        "stale": [change.job for change in plan.entries if change.action == "remove"],
        "warnings": plan.warnings,
    }
