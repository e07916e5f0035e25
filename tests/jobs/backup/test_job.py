"""The backup job and the backup commands, against real sample homes, real files and the real lock."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time

from mnemo_ops.checkpoints import catalog, chunk_store
from mnemo_ops.checkpoints.verify import verify_checkpoint
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.jobs import run_job
from tests.checkpoints.helpers import corrupt_an_index
from tests.purity import assert_unchanged, sample_snapshot


def run_json(cli, *args):
    """Run the CLI with --json; return (exit code, parsed object)."""
    completed = cli("--json", *args)
    try:
        data = json.loads(completed.stdout)
    except ValueError:
        raise AssertionError(
            f"not one JSON object: {completed.stdout!r} / {completed.stderr!r}"
        ) from None
    return completed.returncode, data


def logical_dump(db_path: Path) -> list[str]:
    """A logical SQL dump of a database (read-only)."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mnemosyne_counts(layout) -> dict:
    """Open the DB through the real Mnemosyne in a child process; return its recall result and counts."""
    code = (
        "import json, sqlite3\n"
        "from mnemosyne.core.memory import Mnemosyne\n"
        f"memory = Mnemosyne(session_id='hermes_garden-2026-10-20', db_path={str(layout.db_path)!r})\n"
        "hits = memory.recall('tomato', top_k=3)\n"
        f"connection = sqlite3.connect({str(layout.db_path)!r})\n"
        "count = connection.execute('SELECT count(*) FROM working_memory').fetchone()[0]\n"
        "print(json.dumps({'hits': len(hits), 'working_memory': count}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env=layout.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_backup_makes_a_verified_private_checkpoint(sample, cli):
    code, first = run_json(cli, "run", "backup")
    assert code == 0, first
    code, result = run_json(cli, "run", "backup")  # the second one also holds the ledger (state.db)
    assert code == 0 and result["status"] == "ok", result
    folder = sample.state_dir / "backups" / result["checkpoint"]
    manifest = json.loads((folder / "manifest.json").read_text())
    # The day's first backup is its daily; the second of the same day is a manual one.
    assert first["checkpoint"].startswith("daily-") and result["checkpoint"].startswith("manual-")
    assert manifest["kind"] == "manual" and manifest["verification"]["ok"] is True
    assert manifest["verification"]["integrity_check"] == "ok"
    assert manifest["source_db"] == str(sample.db_path)
    # The default layout: the database lives in the chunk store, the folder holds its index.
    assert manifest["layout"] == "deduplicated"
    assert manifest["database"]["size"] == sample.db_path.stat().st_size
    assert set(manifest["files"]) == {
        "mnemosyne.db.pages",
        "state.db",
        "memory_blocks/MEMORY.md",
        "memory_blocks/USER.md",
    }
    for relative, entry in manifest["files"].items():
        assert (
            sha256(folder / relative) == entry["sha256"]
            and (folder / relative).stat().st_size == entry["size"]
        )
    for block in ("MEMORY.md", "USER.md"):
        assert (folder / "memory_blocks" / block).read_bytes() == (
            sample.memory_blocks_dir / block
        ).read_bytes()
    live = sqlite3.connect(f"file:{sample.db_path}?mode=ro", uri=True)
    assert (
        manifest["row_counts"]["working_memory"]
        == live.execute("SELECT count(*) FROM working_memory").fetchone()[0]
    )
    live.close()
    assert manifest["row_counts"]["working_memory"] > 0
    # Permissions: every folder 0700, every file 0600, including backups/ itself.
    for path in [sample.state_dir / "backups", *folder.rglob("*"), folder]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    # Checking it creates no -wal/-shm beside anything.
    assert sorted(p.name for p in folder.iterdir()) == [
        "manifest.json",
        "memory_blocks",
        "mnemosyne.db.pages",
        "state.db",
    ]
    assert result["changes"] == {"checkpoints_created": 1, "checkpoints_removed": 0}
    assert first["checkpoint"] != result["checkpoint"]


def test_list_json_and_verify(sample, cli):
    code, result = run_json(cli, "run", "backup")
    assert code == 0
    code, listing = run_json(cli, "backup", "list")
    assert code == 0 and list(listing) == ["checkpoints", "limits", "totals"]
    assert listing["limits"] == {"daily": 7, "manual": 3, "pre_write": 7, "failed": 7}
    (entry,) = listing["checkpoints"]
    assert {"name", "kind", "created_at", "path", "size_bytes", "verified"} <= set(entry)
    assert (
        entry["name"] == result["checkpoint"]
        and entry["kind"] == "daily"
        and entry["verified"] is True
    )
    # Deduplicated: the folder holds the index; the chunks are shared in backups/store/.
    assert 0 < entry["size_bytes"] < sample.db_path.stat().st_size
    # The sizes that matter: the database it restores, and what it added to the disk.
    assert entry["database_bytes"] == sample.db_path.stat().st_size
    store = chunk_store.ChunkStore(sample.state_dir / "backups").size_bytes()
    assert entry["added_bytes"] == entry["size_bytes"] + store  # the first brought every page
    assert listing["totals"] == {
        "checkpoints_bytes": entry["size_bytes"],
        "store_bytes": store,
        "total_bytes": entry["size_bytes"] + store,
    }
    text = cli("backup", "list").stdout
    header, row, total = text.splitlines()
    assert header.split()[4:6] == ["database", "added"]
    kib = sample.db_path.stat().st_size / 1024
    assert f"{kib:,.1f} KB" in row
    assert total.startswith("on disk: ") and "in the shared page store" in total
    code, report = run_json(cli, "backup", "verify", entry["name"])
    assert code == 0 and report["ok"] is True and report["integrity_check"] == "ok"
    # Tampering with any file is found by its sha256, and a restore then refuses and changes nothing.
    block = Path(entry["path"]) / "memory_blocks" / "MEMORY.md"
    block.write_text(block.read_text() + "tampered\n")
    code, report = run_json(cli, "backup", "verify", entry["name"])
    assert code == 1 and report["ok"] is False
    assert any(
        "MEMORY.md: size" in problem or "MEMORY.md: sha256" in problem
        for problem in report["problems"]
    )
    before = sha256(sample.db_path)
    completed = cli("backup", "restore", entry["name"])
    assert completed.returncode == 1 and "does not verify" in completed.stderr
    assert sha256(sample.db_path) == before
    completed = cli("backup", "verify", "daily-20990101T000000Z")
    assert completed.returncode == 2 and "no checkpoint named" in completed.stderr


def test_round_trip_restore_brings_back_the_exact_database(sample, cli):
    original = logical_dump(sample.db_path)
    code, result = run_json(cli, "run", "backup")
    assert code == 0
    name = result["checkpoint"]
    # Change the database through Mnemosyne itself and by SQL.
    change = (
        "from mnemosyne.core.memory import Mnemosyne\n"
        f"Mnemosyne(session_id='later', db_path={str(sample.db_path)!r}).remember('A memory written after the backup',"
        " source='user', importance=0.9)\n"
    )
    subprocess.run(
        [sys.executable, "-c", change],
        env=sample.environ(),
        check=True,
        capture_output=True,
        timeout=120,
    )
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.execute("UPDATE working_memory SET importance = 0.01")
    connection.close()
    changed = logical_dump(sample.db_path)
    assert changed != original
    code, restored = run_json(cli, "backup", "restore", name)
    assert code == 0, restored
    assert logical_dump(sample.db_path) == original
    assert (
        restored["row_counts"]
        == json.loads((sample.state_dir / "backups" / name / "manifest.json").read_text())[
            "row_counts"
        ]
    )
    # The database that was replaced is kept, with its WAL, in restore-safety/.
    safety = Path(restored["safety_dir"])
    assert safety.parent == sample.state_dir / "restore-safety"
    assert (
        stat.S_IMODE(safety.stat().st_mode) == 0o700
        and stat.S_IMODE(safety.parent.stat().st_mode) == 0o700
    )
    assert logical_dump(safety / "mnemosyne.db") == changed
    # Mnemosyne opens the restored DB, recalls from it, and sees the manifest's row count.
    opened = mnemosyne_counts(sample)
    assert opened["working_memory"] == restored["row_counts"]["working_memory"]
    assert opened["hits"] > 0


def test_restore_to_another_path(sample, cli, tmp_path):
    code, result = run_json(cli, "run", "backup")
    assert code == 0
    target = tmp_path / "elsewhere" / "restored.db"
    code, restored = run_json(cli, "backup", "restore", result["checkpoint"], "--to", str(target))
    assert code == 0 and restored["target"] == str(target) and restored["moved_aside"] == []
    assert logical_dump(target) == logical_dump(sample.db_path)
    mode = sqlite3.connect(target).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


@pytest.mark.heavy
def test_dry_runs_change_nothing(sample, cli):
    before = sample_snapshot(sample)  # the very first run: not even the backups folder may appear
    code, dry = run_json(cli, "run", "backup", "--dry-run")
    assert code == 0 and dry["changes"] == {"checkpoints_created": 1, "checkpoints_removed": 0}
    assert_unchanged(before, sample_snapshot(sample))
    code, result = run_json(cli, "run", "backup")
    assert code == 0
    name = result["checkpoint"]
    before = sample_snapshot(sample)
    code, dry = run_json(cli, "run", "backup", "--dry-run")
    assert code == 0 and dry["status"] == "dry-run"
    assert dry["changes"] == {"checkpoints_created": 1, "checkpoints_removed": 0}
    code, plan = run_json(cli, "backup", "restore", name, "--dry-run")
    assert code == 0 and plan["restored"] is False and plan["verification"]["ok"] is True
    assert str(sample.db_path) in plan["moved_aside"]
    assert run_json(cli, "backup", "list")[0] == 0
    assert run_json(cli, "backup", "verify", name)[0] == 0
    assert_unchanged(before, sample_snapshot(sample))


def test_restore_refuses_while_the_writer_lock_is_held(sample, cli):
    code, result = run_json(cli, "run", "backup")
    assert code == 0
    before = sha256(sample.db_path)
    with WriterLock(lock_path_for(sample.state_dir, sample.db_path), "memory-maintain"):
        completed = cli("backup", "restore", result["checkpoint"])
    assert completed.returncode == 75 and "memory-maintain" in completed.stderr
    assert sha256(sample.db_path) == before
    assert not (sample.state_dir / "restore-safety").exists()


def test_restore_refuses_while_another_process_has_the_database_open(sample, cli):
    code, result = run_json(cli, "run", "backup")
    assert code == 0
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(sample.db_path)!r}); c.execute('SELECT count(*) FROM "
            "working_memory').fetchall()\n"
            "print('ready', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        completed = cli("backup", "restore", result["checkpoint"])
        assert completed.returncode == 1 and f"pid {holder.pid}" in completed.stderr
        assert not (sample.state_dir / "restore-safety").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_corrupt_source_is_critical_and_never_replaces_a_good_checkpoint(sample, cli):
    code, good = run_json(cli, "run", "backup")
    assert code == 0
    corrupt_an_index(sample.db_path)
    code, result = run_json(cli, "run", "backup")
    assert code == 1 and result["status"] == "failed"
    codes = {warning["code"]: warning["severity"] for warning in result["warnings"]}
    assert codes.get("source-db-corrupt") == "critical"
    code, listing = run_json(cli, "backup", "list")
    by_name = {entry["name"]: entry for entry in listing["checkpoints"]}
    assert by_name[good["checkpoint"]]["verified"] is True
    failed = [entry for entry in listing["checkpoints"] if entry["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["verified"] is False
    assert Path(failed[0]["path"]).parent == sample.state_dir / "backups" / "failed"
    assert run_json(cli, "backup", "verify", good["checkpoint"])[0] == 0
    assert run_json(cli, "backup", "verify", failed[0]["name"])[0] == 1
    completed = cli("backup", "restore", failed[0]["name"])
    assert completed.returncode == 1 and "refusing" in completed.stderr


def test_retention_keeps_seven_verified_across_ten_runs_and_a_bad_night(sample, sample_settings):
    good_bytes = sample.db_path.read_bytes()
    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    names = []
    for day in range(10):
        with freeze_time(start + timedelta(days=day)):
            result = run_job(sample_settings, "backup", show_progress=False)
        assert result.status == "ok", result.error
        names.append(result.checkpoint)
    daily = [info.name for info in catalog.list_checkpoints(sample_settings) if info.verified]
    assert daily == names[-7:]
    # A bad night: the checkpoint fails verification, is kept aside, and pushes nothing out.
    corrupt_an_index(sample.db_path)
    with freeze_time(start + timedelta(days=10)):
        result = run_job(sample_settings, "backup", show_progress=False)
    assert result.status == "failed" and result.exit_code == 1
    assert [
        info.name for info in catalog.list_checkpoints(sample_settings) if info.verified
    ] == names[-7:]
    assert len([info for info in catalog.list_checkpoints(sample_settings) if info.failed]) == 1
    # The next good night rotates normally again.
    for suffix in ("-wal", "-shm"):
        Path(f"{sample.db_path}{suffix}").unlink(missing_ok=True)
    sample.db_path.write_bytes(good_bytes)
    with freeze_time(start + timedelta(days=11)):
        result = run_job(sample_settings, "backup", show_progress=False)
    assert result.status == "ok" and result.changes == {
        "checkpoints_created": 1,
        "checkpoints_removed": 1,
    }
    assert [
        info.name for info in catalog.list_checkpoints(sample_settings) if info.verified
    ] == names[-6:] + [result.checkpoint]


def test_stale_temporary_folders_are_cleaned_and_ignored(sample, cli):
    backups = sample.state_dir / "backups"
    stale = backups / ".tmp-daily-20261101T020000Z"
    stale.mkdir(parents=True)
    (stale / "mnemosyne.db").write_bytes(b"half a copy")
    code, listing = run_json(cli, "backup", "list")
    assert listing["checkpoints"] == []
    code, result = run_json(cli, "run", "backup")
    assert code == 0 and not stale.exists()


def test_backup_skips_while_another_writer_holds_the_lock(sample, cli):
    with WriterLock(lock_path_for(sample.state_dir, sample.db_path), "evening-batch"):
        code, result = run_json(cli, "run", "backup")
    assert code == 75 and result["status"] == "skipped"
    assert not any((sample.state_dir / "backups").glob("daily-*"))


def test_a_symlinked_backups_folder_is_refused(sample, cli, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (sample.state_dir / "backups").symlink_to(elsewhere)
    completed = cli("run", "backup")
    assert completed.returncode == 1 and "symlink" in completed.stdout + completed.stderr
    assert list(elsewhere.iterdir()) == []


def _listed(cli) -> dict[str, dict]:
    code, listing = run_json(cli, "backup", "list")
    assert code == 0, listing
    return {entry["name"]: entry for entry in listing["checkpoints"]}


@pytest.mark.e2e
def test_eight_manual_backups_never_push_out_a_rollback_point(sample, cli):
    """Issue 28, item 1: memory-maintain's pre-write checkpoint, then eight backups in a minute."""
    code, maintained = run_json(cli, "run", "memory-maintain")
    assert code == 0 and maintained["checkpoint"].startswith("pre-memory-maintain-"), maintained
    rollback = maintained["checkpoint"]
    made = []
    for _ in range(8):
        code, result = run_json(cli, "run", "backup")
        assert code == 0, result
        made.append(result["checkpoint"])
    listed = _listed(cli)
    assert rollback in listed and listed[rollback]["verified"] is True
    assert listed[rollback]["retention"]["rollback_for"] == ["memory-maintain"]
    # The first backup of the day is its daily; the others are manual ones, three of them kept.
    assert made[0].startswith("daily-") and all(name.startswith("manual-") for name in made[1:])
    assert set(listed) == {rollback, made[0], *made[-3:]}
    assert listed[made[0]]["counts_as"] == "daily"
    assert "expires" in listed[made[-1]]["retention"]
    # A dry run with a smaller count plans no removal of what a rollback needs.
    code, dry = run_json(cli, "run", "backup", "-o", "keep=3", "--dry-run")
    assert code == 0 and rollback not in dry["stats"]["would_remove"]
    assert made[0] not in dry["stats"]["would_remove"]
    assert dry["changes"]["checkpoints_removed"] == len(dry["stats"]["would_remove"]) == 1
    assert run_json(cli, "backup", "verify", rollback)[0] == 0
    code, plan = run_json(
        cli, "backup", "restore", made[-1], "--dry-run"
    )  # a manual one restores too
    assert code == 0 and plan["verification"]["ok"] is True
    text = cli("backup", "list")
    assert text.returncode == 0
    line = next(line for line in text.stdout.splitlines() if line.startswith(rollback))
    assert "rollback point of memory-maintain" in line and "next successful run" in line


@pytest.mark.e2e
def test_a_daily_reused_as_a_pre_write_checkpoint_stays_through_manual_backups(sample, cli):
    """The issue's own case: memory-maintain reused the daily made minutes before it."""
    code, first = run_json(cli, "run", "backup")
    assert code == 0
    code, maintained = run_json(cli, "run", "memory-maintain")
    assert code == 0 and maintained["checkpoint"] == first["checkpoint"], maintained
    for _ in range(8):
        assert run_json(cli, "run", "backup")[0] == 0
    listed = _listed(cli)
    assert first["checkpoint"] in listed
    assert listed[first["checkpoint"]]["retention"]["rollback_for"] == ["memory-maintain"]


@pytest.mark.heavy
def test_compaction_keeps_the_store_near_what_the_kept_checkpoints_use(sample, sample_settings):
    """Twelve nights of churn with three dailies kept, side by side: without compaction the first
    pack stays for its few pages still in use and the store grows; with it, it does not."""
    from tests.checkpoints.test_chunk_store import _touch_rows
    from tests.faults.test_backup_faults import pad_database

    pad_database(sample.db_path, rows=1500)
    compacting = sample_settings.updated(backup={"keep": 3, "compact_dead_share": 0.3})
    control = dataclasses.replace(
        compacting.updated(backup={"compact_dead_share": 1}),
        state_dir=sample.state_dir.parent / "control-state",
    )
    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    compacted = 0
    for day in range(12):
        # a different seventh of the rows each night: most pages change within a week
        _touch_rows(sample.db_path, f"rowid % 7 = {day % 7}", value=day / 100)
        with freeze_time(start + timedelta(days=day)):
            for settings in (compacting, control):
                result = run_job(settings, "backup", show_progress=False)
                assert result.status == "ok", result.error
                assert not result.warnings, result.warnings
                if settings is compacting:
                    compacted += result.changes.get("packs_compacted", 0)
    sizes = {
        name: chunk_store.ChunkStore(settings.backups_dir).size_bytes()
        for name, settings in (("compacting", compacting), ("control", control))
    }
    database = sample.db_path.stat().st_size
    assert compacted > 0
    assert sizes["control"] > 1.6 * database, sizes  # the harm compaction exists for
    assert sizes["compacting"] < 0.8 * sizes["control"], (sizes, database)
    for info in catalog.list_checkpoints(compacting):
        assert verify_checkpoint(info).ok, info.name


def test_a_corrupt_pack_makes_compaction_an_error_warning_not_a_failed_backup(
    sample, sample_settings
):
    from tests.checkpoints.test_compaction import START, _aged_store, rot_a_page_in_use

    _aged_store(sample, sample_settings)
    rot_a_page_in_use(sample_settings)
    store = chunk_store.ChunkStore(sample_settings.backups_dir)
    packs_before = {path.name for path in store.stored()}
    with freeze_time(START + timedelta(days=20)):
        result = run_job(sample_settings, "backup", show_progress=False)
    assert result.status == "ok", result.error  # today's checkpoint is good
    (warning,) = [item for item in result.warnings if item.code == "pack-compaction-failed"]
    assert warning.severity == "error" and "corrupt" in warning.message
    assert "packs_compacted" not in result.changes
    # The old packs are all still there (today's own may have been added).
    assert packs_before <= {path.name for path in store.stored()}


def test_a_damaged_state_db_copy_is_an_error_warning_from_the_outcome(
    sample, sample_settings, monkeypatch
):
    from mnemo_ops.checkpoints import create

    copy_state = create._copy_state

    def damaged(settings, folder):
        return {**copy_state(settings, folder), "integrity_check": "row 2 missing from index x"}

    run_job(sample_settings, "backup", show_progress=False)  # the ledger: state.db exists
    monkeypatch.setattr(create, "_copy_state", damaged)
    result = run_job(sample_settings, "backup", show_progress=False)
    assert result.status == "ok", result.error
    assert result.stats["state_db_problem"] == "row 2 missing from index x"
    warning = next(w for w in result.warnings if w.code == "state-db-damaged")
    assert warning.severity == "error" and warning.message.endswith(
        "fails integrity_check: row 2 missing from index x"
    )
