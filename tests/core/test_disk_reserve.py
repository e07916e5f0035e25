"""The reserve computed from the real database files, and a writing job refused below it.

The reserve is set above what this filesystem has free through its floor (no small filesystem
needed: ``tests/faults/test_disk_reserve.py`` does the same on a size-limited tmpfs, as root).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemo_ops.core import disk_reserve as reserve
from mnemo_ops.core import state
from mnemo_ops.core.manifests import get_manifest
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.jobs import run_job
from mnemo_ops.settings import load_settings

MEBIBYTE = reserve.MEBIBYTE
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def settings_with(sample, tmp_path, factor: float, floor_mb: int):
    """The sample's settings with ``disk.reserve_factor`` and ``disk.reserve_floor_mb`` set."""
    config = tmp_path / "config.yaml"
    config.write_text(
        f"disk:\n  reserve_factor: {factor}\n  reserve_floor_mb: {floor_mb}\n", encoding="utf-8"
    )
    return load_settings(
        db=sample.db_path, state_dir=sample.state_dir, config=config, environ=sample.environ()
    )


def beyond_free_mb(folder: Path) -> int:
    """A floor larger than what the filesystem of `folder` has free."""
    return shutil.disk_usage(folder).free // MEBIBYTE + 1024


def test_the_reserve_is_the_factor_times_database_and_wal_or_the_floor(sample, tmp_path):
    wal = Path(f"{sample.db_path}-wal")
    files = sample.db_path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    settings = settings_with(sample, tmp_path, 3, 0)
    assert reserve.database_bytes(settings) == files > 0
    assert reserve.reserve_bytes(settings) == 3 * files
    floored = settings_with(sample, tmp_path, 3, 512)
    assert reserve.reserve_bytes(floored) == 512 * MEBIBYTE  # the sample is far smaller


def test_free_space_against_the_reserve():
    space = reserve.FreeSpace(Path("/data"), free=10 * MEBIBYTE, needed=3 * MEBIBYTE, reserve=0)
    assert space.left == 7 * MEBIBYTE and space.enough
    tight = reserve.FreeSpace(
        Path("/data"), free=10 * MEBIBYTE, needed=3 * MEBIBYTE, reserve=8 * MEBIBYTE
    )
    assert not tight.enough
    assert tight.describe() == (
        "10 MiB free at /data (3 MiB needed), below the 8 MiB reserve kept for the live agent"
    )


def test_a_missing_folder_is_measured_on_its_nearest_existing_parent(tmp_path):
    missing = tmp_path / "state" / "not" / "created"
    assert reserve.nearest_existing(missing) == tmp_path
    assert reserve.same_filesystem(missing, tmp_path)


def test_below_the_reserve_a_writing_job_and_its_dry_run_are_refused_and_write_nothing(
    sample, tmp_path
):
    settings = settings_with(sample, tmp_path, 2, beyond_free_mb(sample.db_path.parent))
    with pytest.raises(MnemoOpsError, match="not starting memory-maintain: .* MiB free at "):
        reserve.check_free_space(settings, get_manifest(settings, "memory-maintain"))
    # A job that does not write the database is not held back.
    reserve.check_free_space(settings, get_manifest(settings, "retrieval-eval"))
    before = sample.db_path.read_bytes()
    for dry_run in (False, True):
        # Refused before the lock and the checkpoint: exit 2, the folder named, not a run.
        with pytest.raises(MnemoOpsError) as raised:
            run_job(settings, "memory-maintain", dry_run=dry_run, show_progress=False)
        assert raised.value.exit_code == 2
        assert str(sample.db_path.parent) in raised.value.message
        assert "reserve kept for the live agent" in raised.value.message
        assert "\n" not in raised.value.message
    assert sample.db_path.read_bytes() == before
    assert not settings.backups_dir.exists() or not any(settings.backups_dir.iterdir())
    assert state.runs_since(state.open_state_readonly(settings.state_db_path), EPOCH) == []


def test_above_the_reserve_the_job_starts(sample, tmp_path):
    settings = settings_with(sample, tmp_path, 2, 0)
    reserve.check_free_space(settings, get_manifest(settings, "memory-maintain"))  # no refusal
    result = run_job(settings, "memory-maintain", show_progress=False)
    assert result.status == "ok", result.error
