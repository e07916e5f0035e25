"""create -> verify -> restore through the library, on a sample home written by the real Mnemosyne.

The restored database is the checkpoint's copy page for page (only the header fields that switching
it to WAL sets differ), and a checkpoint whose bytes no longer match its manifest is refused before
anything is touched.
"""

from __future__ import annotations

import sqlite3
import stat

import pytest

from mnemo_ops.checkpoints import catalog
from mnemo_ops.checkpoints.create import create_checkpoint
from mnemo_ops.checkpoints.restore import restore_checkpoint
from mnemo_ops.checkpoints.verify import verify_checkpoint
from mnemo_ops.foundation.errors import MnemoOpsError

WAL_SWITCH_HEADER_BYTES = {18, 19, *range(24, 28), *range(92, 96)}
"""Page 1 bytes ``PRAGMA journal_mode = WAL`` rewrites: the read/write versions, the change counter
and the version-valid-for number (SQLite's file format, "The Database Header")."""


def full_copy(settings):
    """These settings with the full-copy layout (the deduplicated one: tests/checkpoints/test_chunk_store.py)."""
    return settings.updated(backup={"layout": "full-copy"})


def logical_dump(path) -> list[str]:
    """The database as SQL statements (read-only)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def test_a_restored_checkpoint_is_the_copy_page_for_page(sample, sample_settings, tmp_path):
    at_checkpoint = logical_dump(sample.db_path)
    outcome = create_checkpoint(full_copy(sample_settings), "daily")
    assert outcome.verified and outcome.problems == []
    folder = sample_settings.backups_dir / outcome.name
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / catalog.DATABASE_FILE).stat().st_mode) == 0o600
    report = verify_checkpoint(catalog.find_checkpoint(sample_settings, outcome.name))
    assert report.ok, report.problems
    assert report.row_counts == outcome.manifest["row_counts"]

    # The live database moves on; the checkpoint still holds the moment it was made.
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.execute("UPDATE working_memory SET importance = 0.01")
    connection.close()
    assert logical_dump(sample.db_path) != at_checkpoint

    target = tmp_path / "restored" / "mnemosyne.db"
    restored = restore_checkpoint(sample_settings, outcome.name, target=target)
    assert restored.target == target and restored.moved_aside == []
    copy = (folder / catalog.DATABASE_FILE).read_bytes()
    result = target.read_bytes()
    assert len(result) == len(copy)
    differing = {index for index in range(len(copy)) if copy[index] != result[index]}
    assert differing <= WAL_SWITCH_HEADER_BYTES
    assert logical_dump(target) == at_checkpoint
    # Restoring read the checkpoint without changing it: it still verifies.
    assert verify_checkpoint(catalog.find_checkpoint(sample_settings, outcome.name)).ok


def test_a_corrupted_checkpoint_is_refused_and_nothing_is_changed(sample, sample_settings):
    outcome = create_checkpoint(full_copy(sample_settings), "daily")
    copy = sample_settings.backups_dir / outcome.name / catalog.DATABASE_FILE
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of a page
    copy.write_bytes(bytes(data))
    report = verify_checkpoint(catalog.find_checkpoint(sample_settings, outcome.name))
    assert not report.ok
    assert "mnemosyne.db: sha256 differs from the manifest" in report.problems
    live_before = sample.db_path.read_bytes()
    with pytest.raises(MnemoOpsError, match="does not verify"):
        restore_checkpoint(sample_settings, outcome.name)
    assert sample.db_path.read_bytes() == live_before
    assert not (sample_settings.state_dir / "restore-safety").exists()
