"""Pack compaction: the pages still in use of the packs retention left mostly unused, copied into
one new pack, so the store stays near the size of what the kept checkpoints hold.

Why: a pack is removed only when no kept checkpoint names it, but the first checkpoint's pack holds
nearly the whole database, and each day's changes replace some of its pages for good. After some
weeks of 1% daily churn most of that pack is pages no kept checkpoint uses, and the store grows
past twice the database although the checkpoints need little more than one. A pack is compacted
once `dead_share` of its pages are unused: the copy costs at most (1 - dead_share) / dead_share
times the bytes it frees.

How it stays safe (the writer lock is held, as for every checkpoint):

1. The live pages are copied into a temporary compressed pack (``chunk_store``: pages kept for
   days are read rarely, so they are stored compressed, about 2.8 times smaller), each checked
   against the digest its index records, fsynced and renamed into place (a kill leaves a
   temporary pack, removed next time, or an unused pack, collected next time).
2. Every checkpoint whose index names a compacted pack gets its index rewritten to the new pack
   (`catalog.rewrite_index`: the same database and tree hash; the index and the manifest's record
   of it are replaced as a pair that a kill leaves old or new, or half renamed and finished next).
3. The old packs, now named by no index, are removed by the usual collection.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path

from mnemo_ops.checkpoints import catalog, chunk_store
from mnemo_ops.settings import Settings

MIN_GAIN_SHARE = 0.05
"""A compaction runs only when it frees at least this share of the store: each one rewrites every
kept checkpoint's index, which small daily packs going stale would otherwise cause nearly daily."""

_RECORD = chunk_store.RECORD
_DIGEST = chunk_store.PAGE_DIGEST_BYTES
_STEP = chunk_store.RECORD_BYTES


@dataclasses.dataclass
class PackUse:
    """How much of one pack the kept checkpoints use."""

    name: str
    page_size: int
    pages: int
    live: int
    stored_bytes: int
    """The pack file's size (its pages may be compressed)."""

    @property
    def dead_share(self) -> float:
        """The share of the pack's pages no checkpoint uses."""
        return 1 - self.live / self.pages if self.pages else 0.0

    @property
    def dead_bytes(self) -> int:
        """About the bytes of the pack its unused pages take."""
        return round(self.stored_bytes * self.dead_share)


@dataclasses.dataclass
class CompactionPlan:
    """The packs to compact and what doing it writes and frees."""

    packs: list[PackUse]
    checkpoints: list[Path]
    """The folders whose index names one of `packs`."""
    unsure: str | None = None
    """Why nothing may be compacted now (a checkpoint whose packs cannot be read)."""
    indexes: dict[Path, chunk_store.Index] = dataclasses.field(default_factory=dict)
    """The index of each of `checkpoints`, as read for the plan."""
    live: dict[str, dict[int, bytes]] = dataclasses.field(default_factory=dict)
    """Per pack of `packs`, the entries some index uses and the digest it records."""

    @property
    def bytes_written(self) -> int:
        """The live pages copied into the new pack (before compression)."""
        return sum(pack.live * pack.page_size for pack in self.packs)

    @property
    def bytes_freed(self) -> int:
        """About the bytes of the old packs' unused pages (the copy's compression frees more)."""
        return sum(pack.dead_bytes for pack in self.packs)

    def to_dict(self) -> dict:
        """The JSON form in the job's stats."""
        return {
            "packs": [pack.name for pack in self.packs],
            "checkpoints": len(self.checkpoints),
            "bytes_written": self.bytes_written,
            "bytes_freed": self.bytes_freed,
            "unsure": self.unsure,
        }


def _indexes(settings: Settings) -> tuple[dict[Path, chunk_store.Index], str | None]:
    indexes = {}
    if catalog.stale_temporaries(settings):
        return {}, "a checkpoint is half made (a .tmp- folder)"
    for folder in catalog.checkpoint_folders(settings.backups_dir):
        path = folder / chunk_store.INDEX_FILE
        if not path.exists() and not path.is_symlink():
            continue
        if catalog.read_manifest(folder) is None:
            # Its index could not be rewritten with its manifest: a person looks at it first.
            return {}, f"{folder / catalog.MANIFEST} cannot be read"
        try:
            indexes[folder] = chunk_store.read_index(path)
        except chunk_store.ChunkError as error:
            return {}, str(error)
    return indexes, None


def _live_pages(indexes: dict[Path, chunk_store.Index]) -> dict[str, dict[int, bytes]]:
    """Per pack, the entries some index uses and the digest it records."""
    live: dict[str, dict[int, bytes]] = {}
    for index in indexes.values():
        entries = [live.setdefault(name, {}) for name in index.packs]
        records = index.records
        for offset in range(0, len(records), _STEP):
            pack_number, entry = _RECORD.unpack_from(records, offset + _DIGEST)
            entries[pack_number][entry] = records[offset : offset + _DIGEST]
    return live


def plan(settings: Settings, dead_share: float) -> CompactionPlan:
    """The packs at least `dead_share` unused (reads only; nothing is written)."""
    store = chunk_store.ChunkStore(settings.backups_dir)
    indexes, unsure = _indexes(settings)
    if unsure is not None:
        return CompactionPlan([], [], unsure)
    live = _live_pages(indexes)
    page_sizes = {name: index.page_size for index in indexes.values() for name in index.packs}
    chosen: list[PackUse] = []
    uses: list[PackUse] = []
    try:
        for name in sorted(live):
            if not store.has(name):
                return CompactionPlan([], [], f"pack {store.path_for(name)} is missing")
            use = PackUse(
                name,
                page_sizes[name],
                store.entry_count(name, page_sizes[name]),
                len(live[name]),
                store.path_for(name).stat().st_size,
            )
            if use.pages and use.dead_share >= dead_share:
                chosen.append(use)
            uses.append(use)
    except chunk_store.ChunkError as error:  # a compressed pack whose trailer cannot be read
        return CompactionPlan([], [], str(error))
    finally:
        store.close()
    # One new pack holds pages of one size (a VACUUM may have changed it): the newest size's.
    chosen = [use for use in chosen if use.page_size == chosen[-1].page_size] if chosen else []
    stored = sum(use.stored_bytes for use in uses)
    if sum(use.dead_bytes for use in chosen) < MIN_GAIN_SHARE * stored:
        # Not worth rewriting every kept checkpoint's index for yet: wait until more is unused.
        chosen = []
    names = {use.name for use in chosen}
    folders = {folder: index for folder, index in indexes.items() if names & set(index.packs)}
    return CompactionPlan(
        chosen, list(folders), indexes=folders, live={name: live[name] for name in names}
    )


@dataclasses.dataclass
class CompactionResult:
    """What one compaction did."""

    plan: CompactionPlan
    pack: str | None
    rewritten: int
    removed_files: int
    removed_bytes: int


def compact(
    settings: Settings,
    dead_share: float,
    keep_free: int = 0,
    on_bytes: Callable[[int], None] | None = None,
    on_plan: Callable[[CompactionPlan], None] | None = None,
) -> CompactionResult:
    """Compact the packs at least `dead_share` unused (the writer lock must be held).

    `on_plan(plan)` is called once the plan is made, before any copy (a progress bar's total);
    `on_bytes(n)` after each page copied. Raises ChunkError (nothing named changed) when a page
    read back differs from its recorded digest, and SpaceError before the new pack would leave
    less than `keep_free` bytes free.
    """
    catalog.finish_index_rewrites(settings.backups_dir)
    chosen = plan(settings, dead_share)
    if on_plan is not None:
        on_plan(chosen)
    if not chosen.packs:
        return CompactionResult(chosen, None, 0, 0, 0)
    store = chunk_store.ChunkStore(settings.backups_dir)
    store.remove_temporaries()
    pack = chunk_store.new_pack_name(chosen.packs[-1].name)
    moved = _copy_live_pages(store, chosen, pack, keep_free, on_bytes or (lambda _: None))
    for folder, index in chosen.indexes.items():
        catalog.rewrite_index(folder, _moved_index(index, moved, pack))
    removed = catalog.collect_chunks(settings)
    return CompactionResult(chosen, pack, len(chosen.indexes), *removed)


def _copy_live_pages(
    store: chunk_store.ChunkStore,
    chosen: CompactionPlan,
    pack: str,
    keep_free: int,
    on_bytes: Callable[[int], None],
) -> dict[tuple[str, int], int]:
    """Copy the live pages of the chosen packs into the new pack `pack`, each checked against the
    digest an index records; return (old pack, entry) -> entry in the new pack."""
    live = chosen.live
    page_size = chosen.packs[0].page_size
    writer = chunk_store.PackWriter(store, pack, page_size, keep_free, compress=True)
    moved: dict[tuple[str, int], int] = {}
    try:
        for use in chosen.packs:
            for entry in sorted(live[use.name]):
                page = store.read_page(use.name, entry, use.page_size)
                digest = hashlib.sha256(page).digest()[:_DIGEST]
                if digest != live[use.name][entry]:
                    raise chunk_store.ChunkError(
                        f"pack {store.path_for(use.name)} is corrupt: page {entry} differs from "
                        "its digest; nothing was compacted"
                    )
                moved[use.name, entry] = writer.append(page)
                on_bytes(len(page))
        writer.finish()
    except BaseException:
        writer.abandon()
        raise
    finally:
        store.close()
    return moved


def _moved_index(
    index: chunk_store.Index, moved: dict[tuple[str, int], int], pack: str
) -> chunk_store.Index:
    """`index` with its pages in the compacted packs pointing at their places in `pack`."""
    packs = [*index.packs, pack]
    new_number = len(packs) - 1
    rebuilt = bytearray()
    records = index.records
    for offset in range(0, len(records), _STEP):
        pack_number, entry = _RECORD.unpack_from(records, offset + _DIGEST)
        rebuilt += records[offset : offset + _DIGEST]
        target = moved.get((index.packs[pack_number], entry))
        rebuilt += (
            _RECORD.pack(new_number, target)
            if target is not None
            else _RECORD.pack(pack_number, entry)
        )
    new_records, new_packs = chunk_store.only_used_packs(bytes(rebuilt), packs)
    return dataclasses.replace(index, packs=new_packs, records=new_records)
