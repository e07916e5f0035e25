"""The deduplicated layout: checkpoints share chunks stored once by sha256; restore is byte-exact
and verified; a corrupted or missing chunk is refused naming its file; retention drops only the
chunks no remaining checkpoint references; a checkpoint process killed mid-write leaves the store
consistent and the next one works.

Everything runs on the sample home written by the real Mnemosyne, real files, real child processes.
"""

from __future__ import annotations

import errno
import json
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo_ops.checkpoints import catalog, chunk_store
from mnemo_ops.checkpoints.create import CheckpointError, create_checkpoint
from mnemo_ops.checkpoints.restore import restore_checkpoint
from mnemo_ops.checkpoints.verify import verify_checkpoint
from mnemo_ops.foundation.errors import MnemoOpsError
from tests.checkpoints.test_round_trip import WAL_SWITCH_HEADER_BYTES, full_copy, logical_dump
from tests.faults.test_backup_faults import pad_database


def _touch_rows(db_path: Path, where: str = "rowid % 50 = 0", value: float = 0.123) -> None:
    connection = sqlite3.connect(db_path)
    with connection:
        connection.execute(f"UPDATE working_memory SET importance = ? WHERE {where}", (value,))
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def _packs_of(settings, name: str) -> set[str]:
    return set(chunk_store.read_index(settings.backups_dir / name / chunk_store.INDEX_FILE).packs)


def _stored(store: chunk_store.ChunkStore) -> set[str]:
    return {chunk_store.pack_of(path) for path in store.stored()}


def test_a_deduplicated_checkpoint_restores_byte_exact_and_private(
    sample, sample_settings, tmp_path
):
    full = create_checkpoint(full_copy(sample_settings), "daily")
    deduplicated = create_checkpoint(sample_settings, "manual")
    assert deduplicated.verified, deduplicated.problems
    manifest = deduplicated.manifest
    assert manifest["layout"] == "deduplicated"
    assert manifest["database"]["size"] == sample.db_path.stat().st_size
    assert manifest["verification"]["integrity_check"] == "ok"  # a backup checks its snapshot
    store = chunk_store.ChunkStore(sample_settings.backups_dir)
    for path in [store.root, store.packs, *store.packs.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    report = verify_checkpoint(catalog.find_checkpoint(sample_settings, deduplicated.name))
    assert report.ok and report.integrity_check == "ok", report.problems
    assert report.row_counts == manifest["row_counts"]

    at_checkpoint = logical_dump(sample.db_path)
    _touch_rows(sample.db_path, "1")
    target = tmp_path / "restored" / "mnemosyne.db"
    restore_checkpoint(sample_settings, deduplicated.name, target=target)
    assert logical_dump(target) == at_checkpoint
    # Page for page the full copy made from the same state (only WAL-switch header bytes differ).
    copy = (sample_settings.backups_dir / full.name / catalog.DATABASE_FILE).read_bytes()
    result = target.read_bytes()
    assert len(result) == len(copy)
    assert {index for index in range(len(copy)) if copy[index] != result[index]} <= (
        WAL_SWITCH_HEADER_BYTES
    )


def test_a_checkpoint_after_a_small_change_writes_only_the_changed_pages(sample, sample_settings):
    pad_database(sample.db_path, rows=3000)
    first = create_checkpoint(sample_settings, "daily")
    pages = first.manifest["database"]["size"] // first.manifest["database"]["page_size"]
    assert pages > 1000 and 0 < first.stats["new_pages"] <= pages
    _touch_rows(sample.db_path, "rowid = 17")
    second = create_checkpoint(sample_settings, "manual")
    assert second.verified
    # The row's page, the header page, perhaps an index page: a handful out of thousands.
    assert 1 <= second.stats["new_pages"] <= 8, second.stats
    assert second.manifest["database"]["reused_chunks"] >= second.stats["chunk_count"] - 8
    assert _packs_of(sample_settings, first.name) < _packs_of(sample_settings, second.name)
    assert verify_checkpoint(catalog.find_checkpoint(sample_settings, second.name)).ok


@pytest.mark.parametrize("writes_before_failure", [0, 5])
def test_a_pack_write_failing_mid_chunk_is_a_clean_disk_full_refusal(
    sample, sample_settings, monkeypatch, writes_before_failure
):
    # Found by tests/checkpoints/test_properties.py: a write error part-way through a chunk left
    # that chunk's digest without its records, SQLite's truncate on the way out tripped over it,
    # and the checkpoint failed with apsw's SystemError instead of the disk-full refusal.
    real_write, calls = chunk_store.PackWriter._write, []

    def failing_write(writer, data):
        calls.append(len(data))
        if len(calls) > writes_before_failure:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(writer, data)

    monkeypatch.setattr(chunk_store.PackWriter, "_write", failing_write)
    with pytest.raises(CheckpointError) as raised:
        create_checkpoint(sample_settings, "daily")
    assert raised.value.code == "backup-disk-full"
    backups = sample_settings.backups_dir
    assert [entry.name for entry in backups.iterdir()] == [chunk_store.STORE_DIR]
    assert list(chunk_store.ChunkStore(backups).stored()) == []
    monkeypatch.setattr(chunk_store.PackWriter, "_write", real_write)
    outcome = create_checkpoint(sample_settings, "daily")
    assert verify_checkpoint(catalog.find_checkpoint(sample_settings, outcome.name)).ok


def test_a_pre_write_checkpoint_skips_integrity_check_unless_asked_and_says_so(sample_settings):
    outcome = create_checkpoint(sample_settings, "pre-write", job="memory-maintain")
    assert outcome.verified
    assert outcome.manifest["verification"]["integrity_check"].startswith("not run")
    assert outcome.manifest["database"]["integrity_checked"] is False
    asked = sample_settings.updated(backup={"pre_write_integrity_check": True})
    outcome = create_checkpoint(asked, "pre-write", job="evening-batch")
    assert outcome.manifest["verification"]["integrity_check"] == "ok"
    # verify runs it on the chunks whatever was done when it was made
    report = verify_checkpoint(catalog.find_checkpoint(sample_settings, outcome.name))
    assert report.ok and report.integrity_check == "ok"


@pytest.mark.parametrize("damage", ["corrupted", "missing"])
def test_a_bad_chunk_is_refused_in_one_line_naming_the_file(sample, sample_settings, cli, damage):
    outcome = create_checkpoint(sample_settings, "daily")
    store = chunk_store.ChunkStore(sample_settings.backups_dir)
    (pack,) = _packs_of(sample_settings, outcome.name)
    victim = store.path_for(pack)
    if damage == "corrupted":
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
    else:
        victim.unlink()
    live = sample.db_path.read_bytes()

    report = verify_checkpoint(catalog.find_checkpoint(sample_settings, outcome.name))
    assert not report.ok and str(victim) in report.problems[0]
    completed = cli("backup", "verify", outcome.name)
    assert completed.returncode == 1
    completed = cli("backup", "restore", outcome.name, "--force")
    assert completed.returncode == 1
    error = completed.stderr.strip()
    assert len(error.splitlines()) == 1 and str(victim) in error, error
    assert ("corrupt" if damage == "corrupted" else "missing") in error
    assert "nothing was changed" in error
    assert sample.db_path.read_bytes() == live
    with pytest.raises(MnemoOpsError):
        restore_checkpoint(sample_settings, outcome.name, target=sample.db_path.parent / "x.db")
    assert not (sample.db_path.parent / "x.db").exists()


def test_retention_drops_only_the_chunks_no_kept_checkpoint_references(sample, sample_settings):
    settings = sample_settings.updated(backup={"manual_keep": 1})
    pad_database(sample.db_path, rows=1500)
    daily = create_checkpoint(settings, "daily")
    made = []
    for number in range(3):
        # the same rows each time: the pages one manual checkpoint wrote, the next rewrites
        _touch_rows(sample.db_path, "rowid % 97 = 0", value=number / 10)
        made.append(create_checkpoint(settings, "manual").name)
    own = {name: _packs_of(settings, name) for name in made}
    removed = catalog.apply_retention(settings)
    assert removed == made[:2]
    store = chunk_store.ChunkStore(settings.backups_dir)
    kept = _packs_of(settings, daily.name) | _packs_of(settings, made[2])
    assert _stored(store) == kept
    # made[1]'s own pack held only pages made[2] rewrote: no kept checkpoint needs it, it is gone.
    (made_1_pack,) = own[made[1]] - own[made[0]] - _packs_of(settings, daily.name)
    assert made_1_pack not in kept and made_1_pack not in _stored(store)
    for name in (daily.name, made[2]):
        assert verify_checkpoint(catalog.find_checkpoint(settings, name)).ok

    # A kept checkpoint whose index cannot be read might reference any chunk: nothing is removed.
    _touch_rows(sample.db_path, "rowid % 89 = 0")
    newest = create_checkpoint(settings, "manual").name
    (settings.backups_dir / daily.name / chunk_store.INDEX_FILE).write_text("not an index\n")
    before = _stored(store)
    catalog.apply_retention(settings)  # removes made[2]'s folder, but not a pack
    assert _stored(store) == before
    assert newest


def test_a_symlink_in_the_store_is_never_followed(sample_settings, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    backups = sample_settings.backups_dir
    backups.mkdir(parents=True, exist_ok=True)
    (backups / chunk_store.STORE_DIR).symlink_to(outside)
    with pytest.raises(MnemoOpsError) as raised:
        create_checkpoint(sample_settings, "daily")
    assert "symlink" in raised.value.message
    assert list(outside.iterdir()) == []


@pytest.mark.heavy
def test_a_checkpoint_child_killed_mid_write_leaves_the_store_consistent(sample, sample_settings):
    pad_database(sample.db_path)
    backups = sample_settings.backups_dir
    payload = {
        "db": str(sample_settings.db_path),
        "state_dir": str(sample_settings.state_dir),
        "memory_blocks_dir": str(sample_settings.memory_blocks_dir),
        "kind": "pre-write",
        "job": "memory-maintain",
        "moment": "2026-12-01T10:00:00+00:00",
        "backup": sample_settings.backup.model_dump(),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops.checkpoints.worker"],
        env=sample.environ(),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    process.stdin.write(json.dumps(payload).encode())
    process.stdin.close()
    store = chunk_store.ChunkStore(backups)
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        temporary = [path for path in store.stored() if path.name.startswith(".tmp-")]
        if temporary and temporary[0].stat().st_size > 1 << 20:
            process.send_signal(signal.SIGKILL)  # mid-write: a pack half-written, no index yet
            break
        time.sleep(0.001)
    process.wait(timeout=30)
    if process.returncode != -signal.SIGKILL:
        pytest.skip("the checkpoint finished before it could be killed mid-write on this machine")
    assert [entry.name for entry in backups.iterdir() if catalog.valid_name(entry.name)] == []
    # Only a temporary pack was left: no pack an index could name is half-written.
    assert all(path.name.startswith(chunk_store.TEMP_PREFIX) for path in store.stored())
    outcome = create_checkpoint(sample_settings, "pre-write", job="memory-maintain")
    assert outcome.verified
    catalog.apply_retention(sample_settings)
    assert _stored(store) == _packs_of(sample_settings, outcome.name)
    assert verify_checkpoint(catalog.find_checkpoint(sample_settings, outcome.name)).ok
