"""The checkpoint catalog read from folders made by hand."""

from __future__ import annotations

from mnemo_ops.checkpoints.catalog import newest_verified_checkpoint
from tests.checkpoints.helpers import write_checkpoint


def test_newest_verified_checkpoint_ignores_broken_manifests(tmp_path):
    write_checkpoint(tmp_path, "daily-20261101T020000Z", "2026-11-01T02:00:00+00:00", True)
    (tmp_path / "daily-20261130T020000Z").mkdir()
    (tmp_path / "daily-20261130T020000Z" / "manifest.json").write_text(
        "{not json", encoding="utf-8"
    )
    assert newest_verified_checkpoint(tmp_path) == "daily-20261101T020000Z"
    assert newest_verified_checkpoint(tmp_path / "absent") is None
