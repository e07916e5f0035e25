"""Pack compaction: the pages still in use of mostly unused packs move into one new pack, every
kept checkpoint stays byte-exact and verified, a corrupt page stops it with nothing changed, and a
run killed between an index and its manifest is finished by the next one.

Real sample home written by Mnemosyne, real checkpoints, real files.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mnemo_ops.checkpoints import catalog, chunk_store, compaction
from mnemo_ops.checkpoints.create import create_checkpoint
from mnemo_ops.checkpoints.verify import reassemble_database, verify_checkpoint
from mnemo_ops.core.progress import ProgressReporter
from tests.checkpoints.test_chunk_store import _stored, _touch_rows
from tests.faults.test_backup_faults import pad_database

START = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


def _aged_store(sample, settings, days: int = 4) -> list[str]:
    """Checkpoints of `days` days with a third of the rows changed each day; the first one
    removed, so its pack (nearly the whole database) is partly used by the others only."""
    pad_database(sample.db_path, rows=1500)
    names = []
    for day in range(days):
        if day:
            _touch_rows(sample.db_path, f"rowid % 3 = {day % 3}", value=day / 10)
        names.append(create_checkpoint(settings, "daily", moment=START + timedelta(days=day)).name)
    catalog.remove_checkpoints([catalog.find_checkpoint(settings, names[0])])
    catalog.collect_chunks(settings)
    return names[1:]


def rot_a_page_in_use(settings) -> None:
    """Overwrite 16 bytes of a page some checkpoint uses, in a pack compaction would take."""
    planned = compaction.plan(settings, 0.3)
    store = chunk_store.ChunkStore(settings.backups_dir)
    victim = planned.packs[0]
    live = planned.live[victim.name]
    with store.path_for(victim.name).open("r+b") as handle:
        handle.seek(min(live) * victim.page_size + 100)
        handle.write(b"\x5a" * 16)


def _databases(settings, names: list[str], folder: Path) -> dict[str, bytes]:
    folder.mkdir(exist_ok=True)
    found = {}
    for name in names:
        target = folder / f"{name}.db"
        target.unlink(missing_ok=True)
        reassemble_database(
            catalog.find_checkpoint(settings, name), target, ProgressReporter(False)
        )
        found[name] = target.read_bytes()
    return found


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_compaction_frees_the_unused_pages_and_keeps_every_checkpoint_exact(
    sample, sample_settings, tmp_path
):
    kept = _aged_store(sample, sample_settings)
    store = chunk_store.ChunkStore(sample_settings.backups_dir)
    before = _databases(sample_settings, kept, tmp_path / "before")
    size_before = store.size_bytes()
    planned = compaction.plan(sample_settings, 0.3)
    # The harm: the first checkpoint's pack is mostly pages no kept checkpoint uses any more.
    assert [use.dead_share >= 0.3 for use in planned.packs] == [True], planned.to_dict()
    assert planned.bytes_freed > 0.15 * size_before, planned.to_dict()
    assert set(planned.checkpoints) == {sample_settings.backups_dir / name for name in kept}

    done = compaction.compact(sample_settings, 0.3)

    assert done.rewritten == len(kept) and done.removed_bytes > 0
    # The pages still in use are kept compressed: the new pack is well under their plain size.
    new_pack = store.path_for(done.pack)
    assert new_pack.suffix == chunk_store.COMPRESSED_SUFFIX
    assert new_pack.stat().st_size < 0.6 * planned.bytes_written
    assert store.size_bytes() < size_before - planned.bytes_freed
    assert not {use.name for use in planned.packs} & _stored(store)
    assert _databases(sample_settings, kept, tmp_path / "after") == before
    for name in kept:
        assert verify_checkpoint(catalog.find_checkpoint(sample_settings, name)).ok, name
    # Nothing left to take, and the next checkpoint shares the moved pages as before.
    assert compaction.plan(sample_settings, 0.3).packs == []
    _touch_rows(sample.db_path, "rowid % 97 = 0", value=0.9)
    newest = create_checkpoint(sample_settings, "manual", moment=START + timedelta(days=9))
    assert newest.verified and newest.stats["new_bytes"] < 0.2 * sample.db_path.stat().st_size


def test_a_small_stale_pack_waits_until_compaction_frees_enough(
    sample, sample_settings, monkeypatch
):
    _aged_store(sample, sample_settings)
    compaction.compact(sample_settings, 0.3)
    # Two small checkpoints of the same few rows; the first removed: its own pack is all but
    # unused, but it is a small share of the store, not worth rewriting every index for.
    made = []
    for number in range(2):
        _touch_rows(sample.db_path, "rowid % 97 = 0", value=0.5 + number / 10)
        moment = START + timedelta(days=10 + number)
        made.append(create_checkpoint(sample_settings, "manual", moment=moment).name)
    catalog.remove_checkpoints([catalog.find_checkpoint(sample_settings, made[0])])
    catalog.collect_chunks(sample_settings)
    assert compaction.plan(sample_settings, 0.3).packs == []
    monkeypatch.setattr(compaction, "MIN_GAIN_SHARE", 0.0)
    stale = compaction.plan(sample_settings, 0.3).packs
    assert stale and all(use.dead_share >= 0.3 for use in stale)


def test_a_page_that_differs_from_its_digest_stops_compaction_with_nothing_changed(
    sample, sample_settings
):
    _aged_store(sample, sample_settings)
    rot_a_page_in_use(sample_settings)
    before = _files(sample_settings.backups_dir)

    with pytest.raises(chunk_store.ChunkError, match="corrupt"):
        compaction.compact(sample_settings, 0.3)

    assert _files(sample_settings.backups_dir) == before


class _Killed(BaseException):
    """Stands for the process dying at that instant."""


@pytest.mark.parametrize("renames_before_death", [0, 1])
def test_a_compaction_killed_between_index_and_manifest_is_finished_by_the_next_run(
    sample, sample_settings, tmp_path, monkeypatch, renames_before_death
):
    kept = _aged_store(sample, sample_settings)
    before = _databases(sample_settings, kept, tmp_path / "before")
    real_rename, calls = os.rename, []

    def dying_rename(source, target):
        if str(source).endswith(catalog.REWRITE_SUFFIX):
            if len(calls) == renames_before_death:
                raise _Killed
            calls.append(source)
        real_rename(source, target)

    monkeypatch.setattr(catalog.os, "rename", dying_rename)
    with pytest.raises(_Killed):
        compaction.compact(sample_settings, 0.3)
    monkeypatch.setattr(catalog.os, "rename", real_rename)
    (pending,) = sample_settings.backups_dir.glob(f"*/{catalog.MANIFEST}{catalog.REWRITE_SUFFIX}")
    if renames_before_death:
        # The new index is in place beside the old manifest: as it stands, verify refuses it.
        assert not verify_checkpoint(
            catalog.find_checkpoint(sample_settings, pending.parent.name)
        ).ok

    # The next writer finishes the pair (or drops the unfinished one), then compacts.
    catalog.collect_chunks(sample_settings)
    assert verify_checkpoint(catalog.find_checkpoint(sample_settings, pending.parent.name)).ok
    compaction.compact(sample_settings, 0.3)
    assert compaction.plan(sample_settings, 0.3).packs == []
    assert _databases(sample_settings, kept, tmp_path / "after") == before
    for name in kept:
        assert verify_checkpoint(catalog.find_checkpoint(sample_settings, name)).ok, name
    leftovers = [p for p in sample_settings.backups_dir.rglob(f"*{catalog.REWRITE_SUFFIX}")]
    assert leftovers == []


def test_nothing_is_compacted_while_a_checkpoint_cannot_be_read(sample, sample_settings):
    kept = _aged_store(sample, sample_settings)
    (sample_settings.backups_dir / kept[0] / catalog.MANIFEST).write_text("{not json")
    before = _files(sample_settings.backups_dir)
    planned = compaction.plan(sample_settings, 0.3)
    assert planned.packs == [] and "cannot be read" in planned.unsure
    assert compaction.compact(sample_settings, 0.3).pack is None
    assert _files(sample_settings.backups_dir) == before


def _compacted_once(sample, settings) -> tuple[list[str], Path]:
    kept = _aged_store(sample, settings)
    done = compaction.compact(settings, 0.3)
    return kept, chunk_store.ChunkStore(settings.backups_dir).path_for(done.pack)


@pytest.mark.parametrize(
    "damage, message",
    [
        ("entry", "does not decompress|differs from its sha256"),
        ("trailer", "trailer"),
        ("offsets", "offsets do not add up|trailer"),
    ],
)
def test_a_damaged_compressed_pack_is_refused_naming_it(sample, sample_settings, damage, message):
    kept, pack = _compacted_once(sample, sample_settings)
    data = bytearray(pack.read_bytes())
    if damage == "entry":
        data[40:56] = b"\x5a" * 16  # inside the first compressed page
    elif damage == "trailer":
        del data[-4:]
    else:
        offset_table = len(data) - 16 - 8  # the end offset, the last of the table
        data[offset_table : offset_table + 8] = (len(data) * 2).to_bytes(8, "big")
    pack.write_bytes(bytes(data))

    # The harm: a checkpoint read from a damaged pack would restore wrong bytes.
    result = verify_checkpoint(catalog.find_checkpoint(sample_settings, kept[0]))
    assert not result.ok
    problems = " ".join(result.problems)
    assert pack.name in problems
    assert re.search(message, problems), problems


def test_compressed_packs_compact_again_and_stay_byte_exact(
    sample, sample_settings, tmp_path, monkeypatch
):
    kept, first = _compacted_once(sample, sample_settings)
    _touch_rows(sample.db_path, "rowid % 97 = 0", value=0.9)
    newest = create_checkpoint(sample_settings, "daily", moment=START + timedelta(days=9)).name
    catalog.remove_checkpoints([catalog.find_checkpoint(sample_settings, name) for name in kept])
    catalog.collect_chunks(sample_settings)
    before = _databases(sample_settings, [newest], tmp_path / "before")
    # Compact every pack, however little of it is unused, so that the compressed pack's pages are
    # read back, decompressed, checked and compressed again.
    monkeypatch.setattr(compaction, "MIN_GAIN_SHARE", 0.0)
    planned = compaction.plan(sample_settings, 0.0)
    assert first.name.removesuffix(chunk_store.COMPRESSED_SUFFIX) in {
        use.name for use in planned.packs
    }, planned.to_dict()

    done = compaction.compact(sample_settings, 0.0)

    assert not first.exists() and done.pack is not None
    assert _databases(sample_settings, [newest], tmp_path / "after") == before
    assert verify_checkpoint(catalog.find_checkpoint(sample_settings, newest)).ok
