"""The jobs as Hermes' own script-only cron jobs: ``$HERMES_HOME/cron/jobs.json`` and one script each.

What Hermes does (hermes-agent's cron, docs/hermes.md): it keeps its jobs in
``cron/jobs.json`` (``{"jobs": [...], "updated_at": ...}``), and every writer holds ``fcntl.flock`` on
``cron/.jobs.lock`` and replaces the file atomically. A job with ``no_agent: true`` runs its
``script`` (a path relative to ``$HERMES_HOME/scripts/``; ``.sh`` under bash, cwd = the script's
folder) and delivers its trimmed stdout: empty stdout is a silent success, a non-zero exit or a
timeout is an alert.

So each job gets a script ``scripts/mnemo-ops/<job>.sh`` that runs this mnemo-ops with ``-q``
(healthy runs print nothing), maps exit 75 (lock held: skipped, the next slot catches up) to a
silent success and turns a failure into one line; nightly-selfcare's script then prints the morning
report with ``--quiet-if-ok``, so the user hears from it only when something needs them.

Our entries are the ones whose ``script`` lies in ``mnemo-ops/``; nothing else in jobs.json is ever
changed: the file is edited as text, so every other entry (and the file's layout) keeps its exact
bytes. A file that is not valid JSON, or not in the shape Hermes writes, is reported and never
overwritten. Nothing here follows a symlink out of the Hermes home's cron and scripts folders.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import fcntl
import json
import os
import shlex
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from croniter import croniter

from mnemo_ops.core.manifests import JobManifest
from mnemo_ops.foundation.clock import local_now
from mnemo_ops.foundation.errors import LockHeldError, MnemoOpsError, UsageError
from mnemo_ops.foundation.private_files import fsync_path, refuse_symlink, write_atomic
from mnemo_ops.scheduling.invocation import job_arguments, shell_line

SCRIPTS_FOLDER = "mnemo-ops"
"""Our scripts live in ``$HERMES_HOME/scripts/mnemo-ops/``; an entry whose script is there is ours."""
SCRIPT_MARKER = "# Installed by `mnemo-ops hermes install`"
INSTALL_RECORD = ".install.json"
NAME_PREFIX = "mnemo-ops "
REPORT_JOB = "nightly-selfcare"
"""The job that writes the morning report; its script also delivers ``report --quiet-if-ok``."""
CONFIG_PAUSE_REASON = "disabled in the mnemo-ops config (jobs.<job>.enabled: false)"
DEFAULT_SCRIPT_TIMEOUT_S = 3600
HERMES_DEFAULT_DELIVER = "local"
"""Hermes' own default target for a job created without an origin."""
OWNED_FIELDS = ("name", "prompt", "script", "no_agent", "schedule", "schedule_display", "deliver")
"""The fields install sets on an entry of ours; every other field is Hermes' (id, state, last_*...)."""


class HermesJobsFileError(MnemoOpsError):
    """jobs.json cannot be read safely (not JSON, or not the shape Hermes writes): nothing is written."""


@dataclasses.dataclass(frozen=True)
class HermesPaths:
    """Where Hermes keeps its cron jobs and scripts, for one Hermes home."""

    hermes_home: Path

    @property
    def cron_dir(self) -> Path:
        """``$HERMES_HOME/cron``."""
        return self.hermes_home / "cron"

    @property
    def jobs_file(self) -> Path:
        """``$HERMES_HOME/cron/jobs.json``."""
        return self.cron_dir / "jobs.json"

    @property
    def lock_file(self) -> Path:
        """``$HERMES_HOME/cron/.jobs.lock``, the lock every writer of jobs.json holds."""
        return self.cron_dir / ".jobs.lock"

    @property
    def scripts_dir(self) -> Path:
        """``$HERMES_HOME/scripts``, the only place Hermes runs scripts from."""
        return self.hermes_home / "scripts"

    @property
    def our_scripts_dir(self) -> Path:
        """``$HERMES_HOME/scripts/mnemo-ops``."""
        return self.scripts_dir / SCRIPTS_FOLDER

    def script_path(self, job: str) -> Path:
        """The script file of `job`."""
        return self.our_scripts_dir / f"{job}.sh"


def script_reference(job: str) -> str:
    """The ``script`` value of `job`'s entry: relative to ``$HERMES_HOME/scripts/``, as Hermes requires."""
    return f"{SCRIPTS_FOLDER}/{job}.sh"


def job_of_entry(entry: Any) -> str | None:
    """The mnemo-ops job an entry of jobs.json runs, or None when the entry is not ours."""
    if not isinstance(entry, dict):
        return None
    script = entry.get("script")
    if not isinstance(script, str) or not script.startswith(f"{SCRIPTS_FOLDER}/"):
        return None
    name = script[len(SCRIPTS_FOLDER) + 1 :]
    return name[: -len(".sh")] if name.endswith(".sh") and "/" not in name else None


# ----------------------------------------------------------------------------------------------
# Reading jobs.json as text, so that what we do not change keeps its exact bytes.


_WHITESPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


@dataclasses.dataclass
class JobsDocument:
    """jobs.json as text plus where its parts are: each entry's span, the array's, updated_at's."""

    path: Path
    text: str | None  # None: the file does not exist yet
    entries: list[Any]
    entry_spans: list[tuple[int, int]]
    array_span: tuple[int, int] | None  # "[" .. "]" inclusive-exclusive
    updated_at_span: tuple[int, int] | None
    key_indent: str = "  "

    @property
    def exists(self) -> bool:
        """True when the file exists."""
        return self.text is not None

    def entry_text(self, index: int) -> str:
        """The exact text of entry `index`."""
        start, end = self.entry_spans[index]
        return self.text[start:end]


def _malformed(path: Path, reason: str) -> HermesJobsFileError:
    return HermesJobsFileError(
        f"{path}: {reason}; fix it (`hermes cron list` repairs the shapes Hermes knows) "
        "before installing: nothing was written"
    )


def parse_jobs_text(path: Path, text: str) -> JobsDocument:
    """Locate the entries of a jobs.json text; HermesJobsFileError when it is not Hermes' shape."""
    try:
        _DECODER.decode(text.lstrip("\ufeff"))
    except json.JSONDecodeError as error:
        raise _malformed(
            path, f"not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    index = _skip(text, 1 if text.startswith("\ufeff") else 0)
    if index >= len(text) or text[index] != "{":
        raise _malformed(path, 'not an object {"jobs": [...]} (Hermes repairs other shapes itself)')
    index = _skip(text, index + 1)
    array_span = updated_at_span = None
    key_indent = "  "
    while index < len(text) and text[index] != "}":
        line_start = text.rfind("\n", 0, index) + 1
        key_prefix = text[line_start:index]
        key, index = json.decoder.scanstring(text, index + 1)
        index = _skip(text, index)
        index = _skip(text, index + 1)  # the ":"
        value, end = _DECODER.raw_decode(text, index)
        if key == "jobs":
            if not isinstance(value, list):
                raise _malformed(path, f'"jobs" is a {type(value).__name__}, not a list')
            array_span = (index, end)
            # Hermes writes indent=2; a compact file gives no indentation to follow.
            key_indent = key_prefix if key_prefix and not key_prefix.strip() else "  "
        elif key == "updated_at":
            updated_at_span = (index, end)
        index = _skip(text, end)
        if index < len(text) and text[index] == ",":
            index = _skip(text, index + 1)
    if array_span is None:
        raise _malformed(path, 'no "jobs" list')
    entries, spans = [], []
    index = _skip(text, array_span[0] + 1)
    while text[index] != "]":
        value, end = _DECODER.raw_decode(text, index)
        entries.append(value)
        spans.append((index, end))
        index = _skip(text, end)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return JobsDocument(path, text, entries, spans, array_span, updated_at_span, key_indent)


def read_jobs_document(paths: HermesPaths) -> JobsDocument:
    """jobs.json of `paths` (an empty document when the file does not exist yet)."""
    refuse_symlink(paths.cron_dir)
    refuse_symlink(paths.jobs_file)
    try:
        raw = paths.jobs_file.read_bytes()
    except FileNotFoundError:
        return JobsDocument(paths.jobs_file, None, [], [], None, None)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed(paths.jobs_file, "not UTF-8 text") from None
    return parse_jobs_text(paths.jobs_file, text)


def _indented(value: Any, indent: str) -> str:
    """`value` as Hermes writes it (``json.dump(indent=2, ensure_ascii=False)``), nested at `indent`."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def compose_jobs_text(
    document: JobsDocument, entries: list[tuple[int | None, Any]], stamp: str
) -> str:
    """The new jobs.json text: `entries` in order, each ``(index of an original entry or None, value)``.

    An entry given with its original text keeps those bytes; the separators around the original
    entries are kept too, so removing what install appended gives back the earlier array exactly.
    """
    if not document.exists:
        values = [value for _, value in entries]
        return json.dumps({"jobs": values, "updated_at": stamp}, indent=2, ensure_ascii=False)
    text = document.text
    start, end = document.array_span
    element_indent = document.key_indent + "  "
    spans = document.entry_spans
    if spans:
        opening = text[start + 1 : spans[0][0]]
        closing = text[spans[-1][1] : end - 1]
        separators = [text[spans[i - 1][1] : spans[i][0]] for i in range(1, len(spans))]
        default_separator = separators[-1] if separators else "," + opening
        element_indent = opening.rsplit("\n", 1)[-1] if "\n" in opening else element_indent
    else:
        opening = "\n" + element_indent
        closing = "\n" + document.key_indent
        separators, default_separator = [], ",\n" + element_indent
    parts: list[str] = []
    previous = None
    for index, value in entries:
        if parts:
            neighbours = index is not None and previous is not None and index == previous + 1
            parts.append(separators[index - 1] if neighbours else default_separator)
        parts.append(
            document.entry_text(index) if index is not None else _indented(value, element_indent)
        )
        previous = index
    array = "[" + (opening + "".join(parts) + closing if parts else "") + "]"
    new_text = text[:start] + array + text[end:]
    if document.updated_at_span is not None:
        shift = len(array) - (end - start)
        a, b = document.updated_at_span
        if a > start:
            a, b = a + shift, b + shift
        new_text = new_text[:a] + json.dumps(stamp) + new_text[b:]
    return new_text


# ----------------------------------------------------------------------------------------------
# The lock every writer of jobs.json holds.


@contextlib.contextmanager
def jobs_lock(paths: HermesPaths, wait_s: float) -> Iterator[None]:
    """Hold ``fcntl.flock(LOCK_EX)`` on ``cron/.jobs.lock`` as Hermes' writers do; wait up to
    `wait_s`, then LockHeldError (exit 75): another writer is in the middle of its change."""
    refuse_symlink(paths.cron_dir)
    paths.cron_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    refuse_symlink(paths.lock_file)
    # "a+" as Hermes opens it: never truncates, creates it when missing.
    handle = open(paths.lock_file, "a+", encoding="utf-8")  # noqa: SIM115 (held until the end)
    deadline = time.monotonic() + max(0.0, wait_s)
    try:
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise LockHeldError(
                        f"{paths.lock_file} is held by another writer of Hermes' cron jobs for "
                        f"more than {wait_s:g} s; nothing was written, try again"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        handle.close()  # closing releases the flock


# ----------------------------------------------------------------------------------------------
# What install writes.


def hermes_timezone(hermes_home: Path, environ: dict[str, str]):
    """The zone Hermes evaluates cron expressions in: HERMES_TIMEZONE, config.yaml ``timezone``, local."""
    name = environ.get("HERMES_TIMEZONE")
    if not name:
        config = _hermes_config(hermes_home)
        name = config.get("timezone") if isinstance(config.get("timezone"), str) else None
    if name:
        with contextlib.suppress(ZoneInfoNotFoundError, ValueError):
            return ZoneInfo(name)
    return local_now().astimezone().tzinfo


def _hermes_config(hermes_home: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load((hermes_home / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def script_timeout(hermes_home: Path, environ: dict[str, str]) -> int:
    """Seconds Hermes lets a script run: HERMES_CRON_SCRIPT_TIMEOUT, config ``cron.script_timeout_seconds``,
    else its default."""
    candidates = [environ.get("HERMES_CRON_SCRIPT_TIMEOUT")]
    cron = _hermes_config(hermes_home).get("cron")
    if isinstance(cron, dict):
        candidates.append(cron.get("script_timeout_seconds"))
    for candidate in candidates:
        with contextlib.suppress(TypeError, ValueError):
            seconds = int(float(candidate))
            if seconds > 0:
                return seconds
    return DEFAULT_SCRIPT_TIMEOUT_S


def render_script(
    job: str,
    command: list[str],
    report_since: str,
    job_flags: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The bash script Hermes runs for `job`; `command` is mnemo-ops with its global path options."""
    run_line = shell_line([*command, *job_arguments(job, job_flags)])
    lines = [
        "#!/usr/bin/env bash",
        f'{SCRIPT_MARKER} for the Hermes cron job "{NAME_PREFIX}{job}".',
        "# Reinstall to change it (edit jobs/*.yaml or the mnemo-ops config, not this file).",
        "# Hermes delivers this script's stdout: a healthy run prints nothing; a failure prints one",
        "# line and exits non-zero, which Hermes delivers as an alert. Exit 75 means another mnemo-ops",
        "# writer held the lock: the run was skipped and the next slot catches up, so it stays silent.",
        "set -u",
        "",
        f"errors=$({run_line} 2>&1 >/dev/null)",
        "status=$?",
        'if [ "$status" -ne 0 ] && [ "$status" -ne 75 ]; then',
        "    line=$(printf '%s\\n' \"$errors\" | grep '^mnemo-ops: ' | tail -n 1)",
        f'    printf \'%s (exit %s)\\n\' "${{line:-mnemo-ops: {job} failed}}" "$status"',
    ]
    if job != REPORT_JOB:
        lines += ['    exit "$status"', "fi", "exit 0", ""]
        return "\n".join(lines)
    report_line = shell_line(
        [*command, "report", "--since", report_since, "--format", "markdown", "--quiet-if-ok"]
    )
    lines += [
        "fi",
        "# The morning report: printed (and so delivered) only when something needs the user;",
        "# its stdout goes out as it is, its stderr is kept for a one-line error (exit 2).",
        f"{{ report_errors=$({report_line} 2>&1 1>&3 3>&-); }} 3>&1",
        "report_status=$?",
        'if [ "$report_status" -gt 1 ]; then',
        "    line=$(printf '%s\\n' \"$report_errors\" | grep '^mnemo-ops: ' | tail -n 1)",
        '    printf \'%s (exit %s)\\n\' "${line:-mnemo-ops: report failed}" "$report_status"',
        "fi",
        'if [ "$status" -ne 0 ] && [ "$status" -ne 75 ]; then',
        '    exit "$status"',
        "fi",
        'exit "$report_status"',
        "",
    ]
    return "\n".join(lines)


def new_entry(
    job: str, manifest: JobManifest, deliver: str | None, now: datetime
) -> dict[str, Any]:
    """A fresh jobs.json entry for `job`, with every field Hermes' own create_job writes."""
    stamp = now.isoformat()
    return {
        "id": uuid.uuid4().hex[:12],
        "name": f"{NAME_PREFIX}{job}",
        "prompt": "",
        "skills": [],
        "skill": None,
        "model": None,
        "provider": None,
        "base_url": None,
        "script": script_reference(job),
        "no_agent": True,
        "schedule": {"kind": "cron", "expr": manifest.schedule, "display": manifest.schedule},
        "schedule_display": manifest.schedule,
        "repeat": {"times": None, "completed": 0},
        "enabled": True,
        "state": "scheduled",
        "paused_at": None,
        "paused_reason": None,
        "created_at": stamp,
        "next_run_at": croniter(manifest.schedule, now).get_next(datetime).isoformat(),
        "last_run_at": None,
        "last_status": None,
        "last_error": None,
        "deliver": deliver or HERMES_DEFAULT_DELIVER,
        "origin": None,
    }


def updated_entry(
    existing: dict[str, Any] | None,
    job: str,
    manifest: JobManifest,
    deliver: str | None,
    enabled: bool,
    now: datetime,
) -> dict[str, Any]:
    """`existing` (or a new entry) with the fields we own set; Hermes' own fields are kept.

    `deliver` None keeps the entry's own target (a new entry gets Hermes' default).

    A job disabled in our config is paused with our reason; a pause the user gave in Hermes is left
    alone, and only our own pause is lifted when the config enables the job again.
    """
    entry = dict(existing) if existing is not None else new_entry(job, manifest, deliver, now)
    old_expression = (entry.get("schedule") or {}).get("expr") if existing else None
    entry.update(
        name=f"{NAME_PREFIX}{job}",
        prompt=entry.get("prompt") or "",
        script=script_reference(job),
        no_agent=True,
        schedule={"kind": "cron", "expr": manifest.schedule, "display": manifest.schedule},
        schedule_display=manifest.schedule,
        deliver=deliver or entry.get("deliver") or HERMES_DEFAULT_DELIVER,
    )
    next_run = croniter(manifest.schedule, now).get_next(datetime).isoformat()
    if not enabled:
        if entry.get("enabled", True):
            entry.update(
                enabled=False,
                state="paused",
                paused_at=now.isoformat(),
                paused_reason=CONFIG_PAUSE_REASON,
                next_run_at=None,
            )
        return entry
    if not entry.get("enabled", True) and entry.get("paused_reason") == CONFIG_PAUSE_REASON:
        entry.update(
            enabled=True,
            state="scheduled",
            paused_at=None,
            paused_reason=None,
            next_run_at=next_run,
        )
    elif entry.get("enabled", True) and (
        old_expression != manifest.schedule or not entry.get("next_run_at")
    ):
        entry["next_run_at"] = next_run
    return entry


# ----------------------------------------------------------------------------------------------
# Plans: what install / uninstall change, computed read-only, applied under the lock.


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
        return "".join(
            difflib.unified_diff(
                (self.before or "").splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                f"{self.paths.jobs_file} (current)",
                f"{self.paths.jobs_file} (new)",
            )
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
        existing = {}
        for value in document.entries:
            job = job_of_entry(value)
            if job is not None and job not in existing:
                existing[job] = value
        for job, manifest in request.manifests.items():
            wanted[job] = updated_entry(
                existing.get(job),
                job,
                manifest,
                request.deliver,
                job not in request.disabled,
                request.now,
            )
        texts = {
            job: render_script(job, request.command, request.report_since, request.job_flags)
            for job in request.manifests
        }
        scripts = _script_changes(paths, texts)
        limit = script_timeout(paths.hermes_home, request.environ)
        for job, manifest in request.manifests.items():
            if manifest.timeout > limit:
                warnings.append(
                    f"{job}: its timeout ({manifest.timeout} s) is longer than Hermes' script "
                    f"timeout ({limit} s): raise cron.script_timeout_seconds in "
                    f"{paths.hermes_home / 'config.yaml'}, or Hermes may stop a long run"
                )
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


def _write_record(paths: HermesPaths, document: JobsDocument, after: str) -> None:
    """Remember the file's ``updated_at`` from before our first install and the one we wrote."""
    record = _read_record(paths)
    had_ours = any(job_of_entry(value) for value in document.entries)
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
    with jobs_lock(paths, request.lock_wait_s):
        document = read_jobs_document(paths)
        plan, _ = _plan(paths, document, request)
        _write_scripts(paths, plan.scripts)
        if plan.jobs_file_changed:
            write_atomic(paths.jobs_file, plan.after.encode("utf-8"))
            _write_record(paths, document, plan.after)
    _remove_scripts(paths, plan.scripts)
    return plan


def apply_uninstall(paths: HermesPaths, lock_wait_s: float) -> HermesPlan:
    """Uninstall: our entries out of jobs.json under the lock, then our scripts and folder."""
    if not paths.jobs_file.exists() and not paths.our_scripts_dir.exists():
        return plan_uninstall(paths)
    with jobs_lock(paths, lock_wait_s):
        document = read_jobs_document(paths)
        plan, _ = _plan(paths, document, None)
        if plan.jobs_file_changed:
            write_atomic(paths.jobs_file, plan.after.encode("utf-8"))
    _remove_scripts(paths, plan.scripts)
    folder = paths.our_scripts_dir
    if folder.is_dir() and not folder.is_symlink():
        record = _record_path(paths)
        if record.is_file() and not record.is_symlink():
            record.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty: a file someone else put there stays
        fsync_path(paths.scripts_dir)
    return plan


# ----------------------------------------------------------------------------------------------
# Status: what Hermes has of ours.


def installed_entries(paths: HermesPaths) -> dict[str, dict[str, Any]]:
    """Our entries in jobs.json by job (the first one of each); {} when there is no file."""
    found: dict[str, dict[str, Any]] = {}
    for value in read_jobs_document(paths).entries:
        job = job_of_entry(value)
        if job is not None and job not in found:
            found[job] = value
    return found


def script_command(paths: HermesPaths, job: str) -> list[str] | None:
    """The mnemo-ops command line in `job`'s installed script (None when there is no script of ours)."""
    path = paths.script_path(job)
    if path.is_symlink():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith("errors=$(") and line.endswith(" 2>&1 >/dev/null)"):
            with contextlib.suppress(ValueError):
                return shlex.split(line[len("errors=$(") : -len(" 2>&1 >/dev/null)")])
    return None


def status(paths: HermesPaths, request: InstallRequest) -> dict[str, Any]:
    """Each rendered job's Hermes entry (state, next and last run, last status), and whether an
    install would change anything."""
    document = read_jobs_document(paths)
    plan, _ = _plan(paths, document, request)
    changes = {change.job: change.action for change in plan.entries}
    script_actions = {change.job: change.action for change in plan.scripts}
    entries = {}
    for value in document.entries:
        job = job_of_entry(value)
        if job is not None and job not in entries:
            entries[job] = value
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
