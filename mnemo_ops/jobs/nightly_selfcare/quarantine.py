"""Quarantine: files are staged here instead of being deleted, and can be put back.

Layout (folders 0700, files 0600)::

    <state_dir>/quarantine/<YYYY-MM-DD>/manifest.json          every entry staged that day
    <state_dir>/quarantine/<YYYY-MM-DD>/<ID>.json              one entry: original path, sha256, size, mtime, mode
    <state_dir>/quarantine/<YYYY-MM-DD>/<ID>/<original name>   the file itself

A file about to be rewritten in place (a memory block, by memory-block-migrate) is kept the same way
as a copy (`preserve_copy`): ``restore --replace`` puts it back under the writer's ``<file>.lock``,
after keeping the file it replaces in quarantine the same way.

Staging writes the entry (status ``staging``) before it moves the file and marks it ``staged`` after,
so a run killed in between leaves an entry that says where the file came from; the listing derives
the real state from where the file is. Staging never follows a symlink (symlinks are left where they
are, and a root that is a symlink is refused) and never moves a file whose real path is outside the
configured roots, or that lies in our state dir's own bookkeeping (state.db, backups, quarantine).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fnmatch
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.foundation.errors import MnemoOpsError, UsageError
from mnemo_ops.foundation.private_files import ensure_private_dir, write_atomic, write_json_atomic
from mnemo_ops.memory_blocks.hermes_lock import block_lock
from mnemo_ops.settings import Settings


@dataclasses.dataclass(frozen=True)
class StagingRule:
    """Files under `root` whose name matches `pattern` and that are older than `older_than_days`."""

    name: str
    root: Path
    pattern: str = "*"
    older_than_days: int = 30


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A file a rule selected for staging."""

    rule: str
    root: Path
    path: Path
    size: int
    mtime: float


def staging_rules(settings: Settings) -> list[StagingRule]:
    """The rules from the config (``nightly_selfcare.staging``); a rule with 0 days is disabled.

    Defaults: processed queue files (``<state>/queue/cur``) older than 30 days, dated reports older than
    90 days, Hermes logs (``$HERMES_HOME/logs``) older than 30 days.
    """
    staging = settings.nightly_selfcare.staging
    rules = [
        StagingRule(
            "queue-processed", settings.queue_dir / "cur", "*", staging.queue_processed_days
        ),
        StagingRule("reports", settings.reports_dir, "????-??-??.md", staging.reports_days),
        StagingRule("hermes-logs", settings.hermes_home / "logs", "*", staging.hermes_logs_days),
    ]
    for index, extra in enumerate(staging.extra_rules or []):
        rules.append(
            StagingRule(
                extra.name or f"extra-{index + 1}",
                Path(extra.root).expanduser(),
                extra.pattern or "*",
                extra.older_than_days,
            )
        )
    return [rule for rule in rules if rule.older_than_days > 0]


def _protected(settings: Settings) -> list[Path]:
    """Paths whose contents are never staged, whatever a rule says."""
    return [
        settings.quarantine_dir.resolve(),
        settings.backups_dir.resolve(),
        settings.state_db_path.resolve(),
        (settings.state_dir / "locks").resolve(),
        settings.db_path.parent.resolve(),
    ]


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def find_candidates(
    settings: Settings, rules: list[StagingRule], now: datetime
) -> tuple[list[Candidate], list[str]]:
    """(files to stage, notes about what was refused) for the rules at time `now`. Reads only."""
    candidates: list[Candidate] = []
    notes: list[str] = []
    protected = _protected(settings)
    seen: set[Path] = set()
    for rule in rules:
        if rule.root.is_symlink():
            notes.append(f"rule {rule.name}: root {rule.root} is a symlink; not followed")
            continue
        if not rule.root.is_dir():
            continue
        real_root = rule.root.resolve()
        cutoff = (now - timedelta(days=rule.older_than_days)).timestamp()
        for directory, folders, files in os.walk(rule.root, followlinks=False):
            folders[:] = sorted(folders)
            for name in sorted(files):
                path = Path(directory) / name
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    notes.append(f"rule {rule.name}: {path} is a symlink; left alone")
                    continue
                if not stat.S_ISREG(info.st_mode) or info.st_mtime >= cutoff:
                    continue
                if not fnmatch.fnmatch(name, rule.pattern) or name.startswith("."):
                    continue
                real = path.resolve()
                if not _inside(real, real_root) or any(_inside(real, guard) for guard in protected):
                    notes.append(
                        f"rule {rule.name}: {path} is outside the root or protected; left alone"
                    )
                    continue
                if real in seen:
                    continue
                seen.add(real)
                candidates.append(
                    Candidate(rule.name, rule.root, path, info.st_size, info.st_mtime)
                )
    return candidates, notes


def _sha256_no_follow(path: Path) -> str:
    digest = hashlib.sha256()
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(descriptor, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _move(source: Path, target: Path) -> None:
    """Rename, or (across filesystems) copy + fsync + rename + remove the source."""
    try:
        os.rename(source, target)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        temporary = target.with_name(f".{target.name}.tmp")
        with open(source, "rb") as reader, open(temporary, "wb") as writer:
            shutil.copyfileobj(reader, writer, 1 << 20)
            writer.flush()
            os.fsync(writer.fileno())
        os.replace(temporary, target)
        os.unlink(source)


def day_folder(settings: Settings, moment: datetime) -> Path:
    """``quarantine/<YYYY-MM-DD>`` for a moment (UTC date)."""
    return settings.quarantine_dir / moment.astimezone(UTC).strftime("%Y-%m-%d")


def _entry_id(candidate: Candidate, digest: str, now: datetime) -> str:
    token = hashlib.sha256(f"{candidate.path}\0{digest}\0{now.isoformat()}".encode()).hexdigest()[
        :8
    ]
    return f"{now.astimezone(UTC):%Y%m%d}-{token}"


def stage(
    settings: Settings, candidates: list[Candidate], now: datetime
) -> tuple[list[dict], list[str]]:
    """Move each candidate into today's quarantine folder; return (entries staged, problems)."""
    if not candidates:
        return [], []
    folder = ensure_private_dir(day_folder(settings, now))
    os.chmod(settings.quarantine_dir, 0o700)
    staged, problems = [], []
    for candidate in candidates:
        try:
            info = os.lstat(candidate.path)
            if not stat.S_ISREG(info.st_mode):
                raise OSError("no longer a regular file")
            digest = _sha256_no_follow(candidate.path)
            entry_id = _entry_id(candidate, digest, now)
            entry = {
                "id": entry_id,
                "rule": candidate.rule,
                "original_path": str(candidate.path),
                "original_parent_realpath": str(candidate.path.parent.resolve()),
                "stored_path": f"{entry_id}/{candidate.path.name}",
                "sha256": digest,
                "size": info.st_size,
                "mtime": info.st_mtime,
                "mtime_iso": isoformat(datetime.fromtimestamp(info.st_mtime, UTC)),
                "mode": f"{stat.S_IMODE(info.st_mode):04o}",
                "staged_at": isoformat(now),
                "status": "staging",
            }
            write_json_atomic(folder / f"{entry_id}.json", entry)
            target_dir = ensure_private_dir(folder / entry_id)
            target = target_dir / candidate.path.name
            _move(candidate.path, target)
            os.chmod(target, 0o600)
            entry["status"] = "staged"
            write_json_atomic(folder / f"{entry_id}.json", entry)
            staged.append(entry)
        except OSError as error:
            problems.append(f"{candidate.path}: {error.strerror or error}")
    _write_day_manifest(folder)
    return staged, problems


@contextlib.contextmanager
def _writer_lock(original: Path, entry: dict[str, Any]) -> Iterator[None]:
    """Hermes' ``<file>.lock`` for a copy taken before a rewrite (a memory block), else nothing."""
    if entry.get("kind") != "copy before rewrite":
        yield
        return
    with block_lock(original, REPLACE_LOCK_WAIT_S):
        yield


def _keep_current(settings: Settings, original: Path) -> dict[str, Any]:
    """Keep the file now at `original` in quarantine (exact bytes, mode, mtime) before replacing it."""
    descriptor = os.open(original, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        data = handle.read()
    return preserve_copy(
        settings,
        original,
        data,
        status.st_mode & 0o7777,
        status.st_mtime,
        REPLACED_RULE,
        datetime.now(UTC),
    )


def preserve_copy(
    settings: Settings,
    path: Path,
    data: bytes,
    mode: int,
    mtime: float,
    rule: str,
    now: datetime,
) -> dict[str, Any]:
    """Keep a copy of a file that is about to be rewritten in place: `data` is its exact content
    (read by the caller, e.g. under the writer's lock), so ``quarantine restore`` brings back these
    bytes with this mode and mtime once the rewritten file is moved aside. Returns the entry.

    The entry is written (status ``staging``) before the copy and marked ``staged`` after it, both
    atomically, so a run killed in between leaves no entry claiming a copy it does not have.
    """
    folder = ensure_private_dir(day_folder(settings, now))
    os.chmod(settings.quarantine_dir, 0o700)
    digest = hashlib.sha256(data).hexdigest()
    token = hashlib.sha256(
        f"{path}\0{digest}\0{now.isoformat()}\0{os.urandom(8).hex()}".encode()
    ).hexdigest()[:8]
    entry_id = f"{now.astimezone(UTC):%Y%m%d}-{token}"
    entry = {
        "id": entry_id,
        "rule": rule,
        "original_path": str(path),
        "original_parent_realpath": str(path.parent.resolve()),
        "stored_path": f"{entry_id}/{path.name}",
        "sha256": digest,
        "size": len(data),
        "mtime": mtime,
        "mtime_iso": isoformat(datetime.fromtimestamp(mtime, UTC)),
        "mode": f"{mode:04o}",
        "staged_at": isoformat(now),
        "status": "staging",
        "kind": "copy before rewrite",
    }
    write_json_atomic(folder / f"{entry_id}.json", entry)
    target_dir = ensure_private_dir(folder / entry_id)
    write_atomic(target_dir / path.name, data)
    entry["status"] = "staged"
    write_json_atomic(folder / f"{entry_id}.json", entry)
    _write_day_manifest(folder)
    return entry


def _read_entry(path: Path) -> dict[str, Any] | None:
    try:
        if path.is_symlink():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "id" in data else None


def _entry_state(folder: Path, entry: dict[str, Any]) -> str:
    if entry.get("status") == "restored":
        return "restored"
    stored = folder / entry.get("stored_path", "")
    if stored.is_file() and not stored.is_symlink():
        return "staged"
    return "incomplete"


def _day_manifest(folder: Path) -> dict[str, Any]:
    entries = []
    for path in sorted(folder.glob("*.json")):
        if path.name == "manifest.json":
            continue
        entry = _read_entry(path)
        if entry is not None:
            entries.append({**entry, "status": _entry_state(folder, entry)})
    return {"date": folder.name, "entries": entries}


def _write_day_manifest(folder: Path) -> None:
    write_json_atomic(folder / "manifest.json", _day_manifest(folder))


def stale_day_manifests(settings: Settings) -> list[Path]:
    """Day folders whose ``manifest.json`` is missing or no longer matches their entries.

    The manifest is written once after a staging pass, so a run killed after its last move leaves
    entries the manifest does not list; the next run, finding nothing new to stage, must still
    bring the index up to date (the entries themselves are the truth).
    """
    root = settings.quarantine_dir
    if not root.is_dir() or root.is_symlink():
        return []
    stale = []
    for folder in sorted(
        path for path in root.iterdir() if path.is_dir() and not path.is_symlink()
    ):
        manifest = folder / "manifest.json"
        try:
            current = None if manifest.is_symlink() else json.loads(manifest.read_text("utf-8"))
        except (OSError, ValueError):
            current = None
        if current != _day_manifest(folder):
            stale.append(folder)
    return stale


def repair_day_manifests(folders: list[Path]) -> None:
    """Rewrite the manifest of each day folder from its entries (see ``stale_day_manifests``)."""
    for folder in folders:
        _write_day_manifest(folder)


def list_entries(settings: Settings) -> list[dict[str, Any]]:
    """Every quarantine entry, oldest first, with its state (staged, restored, incomplete) and day."""
    root = settings.quarantine_dir
    if not root.is_dir() or root.is_symlink():
        return []
    entries = []
    for folder in sorted(
        path for path in root.iterdir() if path.is_dir() and not path.is_symlink()
    ):
        for path in sorted(folder.glob("*.json")):
            if path.name == "manifest.json":
                continue
            entry = _read_entry(path)
            if entry is not None:
                entries.append({**entry, "status": _entry_state(folder, entry), "day": folder.name})
    return sorted(entries, key=lambda entry: (entry.get("staged_at") or "", entry["id"]))


def _find_entry(settings: Settings, entry_id: str) -> tuple[Path, dict[str, Any]]:
    if not entry_id or "/" in entry_id or entry_id.startswith("."):
        raise UsageError(f"not a quarantine ID: {entry_id!r} (see: mnemo-ops quarantine list)")
    root = settings.quarantine_dir
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            path = folder / f"{entry_id}.json"
            if folder.is_dir() and not folder.is_symlink() and path.is_file():
                entry = _read_entry(path)
                if entry is not None:
                    return folder, entry
    raise UsageError(f"no quarantine entry {entry_id!r} (see: mnemo-ops quarantine list)")


REPLACED_RULE = "replaced-by-restore"
"""The rule of the copy ``restore --replace`` keeps of the file it replaces."""
REPLACE_LOCK_WAIT_S = 30.0


def restore(
    settings: Settings, entry_id: str, dry_run: bool = False, replace: bool = False
) -> dict[str, Any]:
    """Put entry `entry_id` back where it came from (content, mode and mtime); return the entry.

    Refuses (MnemoOpsError, exit 1) when the original path is taken again (unless `replace`), when
    its folder now resolves elsewhere (a symlink was put in the way), or when the stored file no
    longer matches its sha256. Missing parent folders are recreated (0700).

    With `replace`, a regular file now at the original path is itself kept in quarantine first
    (rule ``replaced-by-restore``; its id is returned as ``replaced_by_entry``) and then replaced
    by one rename, so nothing is lost either way. For a copy taken before a rewrite (a memory
    block), both happen under the writer's ``<file>.lock`` (Hermes' convention), so an entry the
    agent adds at that moment is either in the copy or written after the restore, never lost.
    """
    folder, entry = _find_entry(settings, entry_id)
    state = _entry_state(folder, entry)
    if state != "staged":
        raise MnemoOpsError(f"quarantine entry {entry_id} is {state}; nothing to restore")
    stored = folder / entry["stored_path"]
    original = Path(entry["original_path"])
    if not original.is_absolute():
        raise MnemoOpsError(f"quarantine entry {entry_id}: original_path is not absolute")
    if os.path.lexists(original) and not replace:
        raise MnemoOpsError(
            f"{original} exists again; move it away first, or restore {entry_id} with --replace "
            "(keeps the current file in quarantine)"
        )
    if os.path.lexists(original) and (original.is_symlink() or not original.is_file()):
        raise MnemoOpsError(f"{original} is not a regular file; not replaced")
    if _sha256_no_follow(stored) != entry["sha256"]:
        raise MnemoOpsError(f"{stored} no longer matches its sha256; not restored")
    parent = original.parent
    existing = parent
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    recorded = Path(entry.get("original_parent_realpath") or parent)
    if parent.exists() and parent.resolve() != recorded:
        raise MnemoOpsError(
            f"{parent} now resolves to {parent.resolve()}, not {recorded}; not restored"
        )
    if not parent.exists() and not _inside(recorded, existing.resolve()):
        raise MnemoOpsError(f"{existing} now resolves elsewhere; not restored")
    result = {**entry, "status": "staged", "would_restore": dry_run}
    if dry_run:
        if os.path.lexists(original):
            result["would_replace"] = str(original)
        return result
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _writer_lock(original, entry):
        replaced = None
        if os.path.lexists(original):  # looked at again under the lock
            if not replace:
                raise MnemoOpsError(f"{original} exists again; not restored")
            replaced = _keep_current(settings, original)
        # Mode and mtime first, then one rename: a reader sees the old file or the restored one.
        os.chmod(stored, int(entry.get("mode", "0600"), 8))
        os.utime(stored, (entry["mtime"], entry["mtime"]))
        _move(stored, original)
        os.chmod(original, int(entry.get("mode", "0600"), 8))
        os.utime(original, (entry["mtime"], entry["mtime"]))
    entry.update({"status": "restored", "restored_at": isoformat(datetime.now(UTC))})
    if replaced is not None:
        entry["replaced_by_entry"] = replaced["id"]
    write_json_atomic(folder / f"{entry_id}.json", entry)
    try:
        (folder / entry_id).rmdir()  # the now-empty holder folder (our own); never a file
    except OSError:
        pass
    _write_day_manifest(folder)
    return entry
