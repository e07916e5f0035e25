"""The deduplicated checkpoint store: a database snapshot's pages stored once, in pack files, and
shared by every checkpoint that holds the same page at the same place.

Layout, inside the backups folder (folders 0700, files 0600, never a symlink followed)::

    <backups>/store/packs/<pack>.pack          the new pages of one checkpoint, one after another
    <backups>/<name>/mnemosyne.db.pages        a checkpoint's index (below)

Why pages, and why packs (benchmarks/checkpoint_store.py): SQLite never shifts bytes in its file,
a changed row rewrites its page in place, but the agent's recalls bump rows all over the file, so
larger chunks see most of the file change every day; only page-sized pieces write what changed.
One file (one fsync) per checkpoint instead of one per piece keeps a large database from needing
hundreds of thousands of files.

A checkpoint's index: a JSON header line (the packs it uses, the page and chunk sizes), then per
chunk of CHUNK_BYTES its sha256 (32 bytes), then per page a record: 16 bytes of the page's sha256
(to see, next time, that the page at that place did not change), the pack's number in the header
(4 bytes) and the page's place in that pack (4 bytes). Every chunk read back is checked against its
sha256, and the database's hash (`tree_sha256`) is the sha256 of the chunk hashes in file order: a
reassembled file whose chunks all match is the exact file that was checkpointed.

The snapshot is taken by SQLite's backup API inside one read transaction (as for the full copy),
but the target is a file of `ChunkingVFS`: the pages SQLite writes are cut into chunks in memory,
a chunk whose sha256 is the one the previous checkpoint had at that place is taken as it was, the
pages of the others are compared one by one, and only new pages are appended to this checkpoint's
pack. No full copy is ever written.

Compressed packs (``<pack>.zpack``): the packs compaction writes hold pages still in use by
checkpoints days old, so their bytes are read rarely and kept long; each page is compressed on its
own (zlib, level 1: the pages of a memory database compress about 2.8 times) and the pack ends with
a trailer: the byte offset of every entry and of the end (8 bytes each, big-endian), the entry count
(8 bytes) and `ZPACK_MAGIC`. A checkpoint writes plain packs (``<pack>.pack``, each entry one page at
``entry * page_size``): compressing 4 KiB pages runs at a few tens of MB/s here, too slow for the
pre-write checkpoint a job waits for. The index does not say which kind a pack is: the file does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import shutil
import stat
import struct
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

import apsw

from mnemo_ops import database
from mnemo_ops.checkpoints import sqlite_copy
from mnemo_ops.foundation.private_files import PRIVATE_FILE_MODE, ensure_private_dir, fsync_path

STORE_DIR = "store"
PACKS_DIR = "packs"
PACK_SUFFIX = ".pack"
COMPRESSED_SUFFIX = ".zpack"
ZPACK_MAGIC = b"MNZPACK1"
_OFFSET = struct.Struct(">Q")
COMPRESSION_LEVEL = 1
"""zlib's fastest level: 2.80x on a memory database's pages against 2.92x at level 6, 1.4x faster."""
INDEX_FILE = "mnemosyne.db.pages"
CHUNK_BYTES = 64 * 1024
"""The unit checked by sha256 on every read (16 pages of 4 KiB), and the fast path: an unchanged
chunk is recognised by one hash."""
PAGE_DIGEST_BYTES = 16
RECORD = struct.Struct(">II")
RECORD_BYTES = PAGE_DIGEST_BYTES + RECORD.size
TEMP_PREFIX = ".tmp-"
_PACK_NAME = frozenset("0123456789abcdefTZ-")
SPACE_CHECK_BYTES = 1024 * 1024
"""How often (in new bytes appended to a pack) the store's free space is looked at again."""


class ChunkError(Exception):
    """A pack or an index is missing, unreadable or not what it should be; the message names the file."""


class SpaceError(ChunkError):
    """Writing more new pages would leave less free space than the checkpoint must leave."""

    def __init__(self, folder: Path, free: int, keep_free: int):
        self.folder, self.free, self.keep_free = folder, free, keep_free
        super().__init__(
            f"{free / 2**20:,.0f} MiB free at {folder}, and the checkpoint must leave "
            f"{keep_free / 2**20:,.0f} MiB free"
        )


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise ChunkError(f"{path} is a symlink; the checkpoint store never follows one")


def _private_dir(path: Path) -> Path:
    _refuse_link(path)
    return ensure_private_dir(path)


def pack_of(path: Path) -> str:
    """The pack name of a pack file, compressed or plain."""
    return path.name.removesuffix(COMPRESSED_SUFFIX).removesuffix(PACK_SUFFIX)


def valid_pack(name: str) -> bool:
    """True for a pack name this store makes (so an index can never name a path outside it)."""
    return 0 < len(name) <= 64 and set(name) <= _PACK_NAME


@dataclasses.dataclass
class Index:
    """One checkpoint's database in the store: its chunks' sha256s and where each page lives."""

    packs: list[str]
    size: int
    page_size: int
    chunk_bytes: int
    chunk_digests: list[bytes]
    records: bytes
    """RECORD_BYTES per page, in file order."""

    @property
    def pages_per_chunk(self) -> int:
        """Pages in a full chunk."""
        return self.chunk_bytes // self.page_size

    def page_count(self) -> int:
        """Pages in the file."""
        return len(self.records) // RECORD_BYTES

    def record(self, page: int) -> bytes:
        """The record of page number `page` (0-based)."""
        return self.records[page * RECORD_BYTES : (page + 1) * RECORD_BYTES]

    def tree_sha256(self) -> str:
        """The database's hash: the sha256 of the chunk hashes in file order."""
        return tree_sha256(self.chunk_digests)

    def to_bytes(self) -> bytes:
        """The index file's content."""
        header = {
            "packs": self.packs,
            "size": self.size,
            "page_size": self.page_size,
            "chunk_bytes": self.chunk_bytes,
            "chunks": len(self.chunk_digests),
        }
        return (
            json.dumps(header, sort_keys=True).encode("ascii")
            + b"\n"
            + b"".join(self.chunk_digests)
            + self.records
        )


def tree_sha256(chunk_digests: list[bytes]) -> str:
    """The sha256 of the chunk hashes in file order (what the manifest records)."""
    return hashlib.sha256(b"".join(chunk_digests)).hexdigest()


def read_index(path: Path) -> Index:
    """A checkpoint's index (ChunkError naming the file when missing, a symlink or malformed)."""
    _refuse_link(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ChunkError(f"index {path} cannot be read: {error.strerror}") from None
    try:
        line, _, rest = data.partition(b"\n")
        header = json.loads(line)
        packs = [str(name) for name in header["packs"]]
        chunks = int(header["chunks"])
        page_size, chunk_bytes, size = (
            int(header["page_size"]),
            int(header["chunk_bytes"]),
            int(header["size"]),
        )
    except (ValueError, KeyError, TypeError):
        raise ChunkError(f"index {path} is malformed") from None
    pages = -(-size // page_size) if page_size > 0 else -1
    if (
        not all(valid_pack(name) for name in packs)
        or page_size <= 0
        or chunk_bytes % page_size
        or len(rest) != chunks * 32 + pages * RECORD_BYTES
    ):
        raise ChunkError(f"index {path} is malformed")
    digests = [rest[offset : offset + 32] for offset in range(0, chunks * 32, 32)]
    return Index(packs, size, page_size, chunk_bytes, digests, bytes(rest[chunks * 32 :]))


class ChunkStore:
    """The packs of every deduplicated checkpoint in one backups folder."""

    def __init__(self, backups_dir: Path):
        self.root = backups_dir / STORE_DIR
        self.packs = self.root / PACKS_DIR
        self._open: dict[str, int] = {}
        self._offsets: dict[str, list[int]] = {}
        self._paths: dict[str, Path] = {}

    def path_for(self, pack: str) -> Path:
        """Where pack `pack` lives, compressed or plain (its name checked: no path can leave the
        store); the plain pack's path when neither exists."""
        if not valid_pack(pack):
            raise ChunkError(f"not a pack name: {pack!r}")
        compressed = self.packs / f"{pack}{COMPRESSED_SUFFIX}"
        if os.path.lexists(compressed):
            return compressed
        return self.packs / f"{pack}{PACK_SUFFIX}"

    def entry_count(self, pack: str, page_size: int) -> int:
        """How many pages pack `pack` holds (ChunkError naming it when unreadable)."""
        path = self.path_for(pack)
        if path.suffix != COMPRESSED_SUFFIX:
            return path.stat().st_size // page_size
        return len(self._entry_offsets(pack, path)) - 1

    def prepare(self) -> None:
        """Create the store's folders (0700), refusing symlinks in their place."""
        _private_dir(self.root)
        _private_dir(self.packs)

    def has(self, pack: str) -> bool:
        """True when the pack is a regular file in the store."""
        try:
            info = os.lstat(self.path_for(pack))
        except FileNotFoundError:
            return False
        return stat.S_ISREG(info.st_mode)

    def _descriptor(self, pack: str, path: Path) -> int:
        descriptor = self._open.get(pack)
        if descriptor is None:
            try:
                descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                raise ChunkError(f"pack {path} is missing") from None
            except OSError as error:
                raise ChunkError(f"pack {path} cannot be read: {error.strerror}") from None
            self._open[pack] = descriptor
        return descriptor

    def _read(self, pack: str, path: Path, length: int, offset: int) -> bytes:
        try:
            data = os.pread(self._descriptor(pack, path), length, offset)
        except OSError as error:
            raise ChunkError(f"pack {path} cannot be read: {error.strerror}") from None
        if len(data) != length:
            raise ChunkError(f"pack {path} is corrupt: it is shorter than its index says")
        return data

    def _entry_offsets(self, pack: str, path: Path) -> list[int]:
        """A compressed pack's entry offsets, from its trailer (read once per pack opened)."""
        offsets = self._offsets.get(pack)
        if offsets is not None:
            return offsets
        try:
            size = os.fstat(self._descriptor(pack, path)).st_size
        except OSError as error:
            raise ChunkError(f"pack {path} cannot be read: {error.strerror}") from None
        tail = 8 + len(ZPACK_MAGIC)
        if size < tail:
            raise ChunkError(f"pack {path} is corrupt: it has no trailer")
        end = self._read(pack, path, tail, size - tail)
        (count,) = _OFFSET.unpack_from(end)
        table = (count + 1) * _OFFSET.size
        if end[8:] != ZPACK_MAGIC or table > size - tail:
            raise ChunkError(f"pack {path} is corrupt: its trailer is not a compressed pack's")
        raw = self._read(pack, path, table, size - tail - table)
        offsets = [value for (value,) in _OFFSET.iter_unpack(raw)]
        if offsets[-1] != size - tail - table or any(
            later < earlier for earlier, later in zip(offsets, offsets[1:], strict=False)
        ):
            raise ChunkError(f"pack {path} is corrupt: its entry offsets do not add up")
        self._offsets[pack] = offsets
        return offsets

    def read_page(self, pack: str, entry: int, page_size: int) -> bytes:
        """Page `entry` of `pack` (ChunkError naming the pack when missing, short or corrupt)."""
        path = self._paths.get(pack)
        if path is None:  # looked up once per pack opened: a restore reads every page
            path = self._paths[pack] = self.path_for(pack)
        if path.suffix != COMPRESSED_SUFFIX:
            return self._read(pack, path, page_size, entry * page_size)
        offsets = self._entry_offsets(pack, path)
        if entry + 1 >= len(offsets):
            raise ChunkError(f"pack {path} is corrupt: it is shorter than its index says")
        start, end = offsets[entry], offsets[entry + 1]
        try:
            data = zlib.decompress(self._read(pack, path, end - start, start))
        except zlib.error:
            raise ChunkError(f"pack {path} is corrupt: entry {entry} does not decompress") from None
        if len(data) != page_size:
            raise ChunkError(f"pack {path} is corrupt: entry {entry} is not one page")
        return data

    def read_chunk(self, index: Index, number: int) -> bytes:
        """Chunk `number` of `index`, reassembled from its pages and checked against its sha256."""
        first = number * index.pages_per_chunk
        last = min(first + index.pages_per_chunk, index.page_count())
        pages, packs = [], set()
        for page in range(first, last):
            pack_number, entry = RECORD.unpack_from(index.record(page), PAGE_DIGEST_BYTES)
            if pack_number >= len(index.packs):
                raise ChunkError(f"chunk {number} names no pack of its index")
            pack = index.packs[pack_number]
            packs.add(pack)
            pages.append(self.read_page(pack, entry, index.page_size))
        data = b"".join(pages)[: max(0, index.size - number * index.chunk_bytes)]
        if hashlib.sha256(data).digest() != index.chunk_digests[number]:
            names = ", ".join(str(self.path_for(pack)) for pack in sorted(packs))
            raise ChunkError(
                f"pack {names} is corrupt: chunk {number} (bytes {number * index.chunk_bytes:,}"
                f"-{number * index.chunk_bytes + len(data):,}) differs from its sha256"
            )
        return data

    def close(self) -> None:
        """Close the packs opened for reading."""
        for descriptor in self._open.values():
            os.close(descriptor)
        self._open.clear()
        self._offsets.clear()
        self._paths.clear()

    def stored(self) -> Iterable[Path]:
        """Every pack file in the store (temporary ones left by a kill included)."""
        if not self.packs.is_dir() or self.packs.is_symlink():
            return []
        return sorted(path for path in self.packs.iterdir() if not path.is_dir())

    def remove_temporaries(self) -> int:
        """Remove the temporary packs a killed checkpoint left (the writer lock is ours)."""
        removed = 0
        for path in self.stored():
            if path.name.startswith(TEMP_PREFIX):
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def collect_garbage(self, referenced: set[str]) -> tuple[int, int]:
        """Remove every pack no index names (and temporary ones); return (files, bytes) removed."""
        files = size = 0
        for path in self.stored():
            if pack_of(path) in referenced and not path.is_symlink():
                continue
            size += path.lstat().st_size
            path.unlink()
            files += 1
        if files:
            fsync_path(self.packs)
        return files, size

    def size_bytes(self) -> int:
        """Bytes of every pack stored."""
        return sum(path.lstat().st_size for path in self.stored())


class PackWriter:
    """This checkpoint's new pages, appended to one temporary pack, fsynced and renamed at the end.

    A kill at any point leaves at most a temporary pack (no index names it; the next checkpoint
    removes it), never a pack an index names with pages missing.
    """

    def __init__(
        self,
        store: ChunkStore,
        name: str,
        page_size: int,
        keep_free: int = 0,
        compress: bool = False,
    ):
        if not valid_pack(name):
            raise ChunkError(f"not a pack name: {name!r}")
        suffix = COMPRESSED_SUFFIX if compress else PACK_SUFFIX
        self.store = store
        self.name = name
        self.page_size = page_size
        self.compress = compress
        self.final = store.packs / f"{name}{suffix}"
        self.temporary = store.packs / f"{TEMP_PREFIX}{name}{suffix}"
        self.descriptor: int | None = None
        self.entries = 0
        self.offsets = [0]
        """A compressed pack's entry offsets so far (its trailer)."""
        self.keep_free = keep_free
        self.unchecked = 0  # bytes appended since the free space was last looked at

    def append(self, page: bytes) -> int:
        """Append one page; return its entry number in the pack."""
        if self.descriptor is None:
            self.descriptor = os.open(
                self.temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                PRIVATE_FILE_MODE,
            )
        if self.keep_free and self.unchecked == 0:
            self._check_space()
        data = zlib.compress(page, COMPRESSION_LEVEL) if self.compress else page
        self._write(data)
        self.entries += 1
        self.offsets.append(self.offsets[-1] + len(data))
        self.unchecked = (self.unchecked + len(data)) % SPACE_CHECK_BYTES
        return self.entries - 1

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.descriptor, view) :]

    def _check_space(self) -> None:
        # A deduplicated checkpoint cannot know up front how many of its pages are new, so it is
        # not refused for the whole file's size: it stops (and its pack is removed) before the next
        # stretch of new pages would leave less than `keep_free`.
        free = shutil.disk_usage(self.store.packs).free
        if free - SPACE_CHECK_BYTES < self.keep_free:
            raise SpaceError(self.store.packs, free, self.keep_free)

    def finish(self) -> bool:
        """fsync and rename into place; False when no page was new (no pack then)."""
        if self.descriptor is None:
            return False
        if self.compress:
            self._write(
                b"".join(_OFFSET.pack(offset) for offset in self.offsets)
                + _OFFSET.pack(self.entries)
                + ZPACK_MAGIC
            )
        os.fsync(self.descriptor)
        os.close(self.descriptor)
        self.descriptor = None
        os.rename(self.temporary, self.final)
        fsync_path(self.store.packs)
        return True

    def abandon(self) -> None:
        """Close and remove the temporary pack (nothing names it yet)."""
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None
        self.temporary.unlink(missing_ok=True)


@dataclasses.dataclass
class ChunkedSnapshot:
    """A snapshot stored in the store: its index, and what it cost."""

    index: Index
    new_pages: int
    new_bytes: int
    reused_chunks: int
    snapshot: sqlite_copy.SnapshotCopy


class _ChunkingFile:
    """The target file of the backup: pages in, chunks out (nothing of the file is kept whole).

    SQLite writes the pages in order and rewrites page 1 (the header) at the end, so the first chunk
    is held until the file is closed and every other chunk is stored as soon as a write goes past
    it. A write or read landing in a chunk already stored (never seen from the backup API, handled
    all the same) reloads it from the store, so the file reads back as written whatever the order.
    """

    def __init__(self, sink: _Sink):
        self.sink = sink
        self.open: dict[int, bytearray] = {}
        self.size = 0
        self.current: bytearray | None = None
        self.current_number = -1

    def _chunk(self, number: int) -> bytearray:
        chunk = self.open.get(number)
        if chunk is None:
            stored = self.sink.stored_chunk(number)
            chunk = bytearray(stored) if stored is not None else bytearray()
            self.open[number] = chunk
        return chunk

    def _flush_before(self, number: int) -> None:
        for other in [key for key in self.open if 0 < key < number]:
            self.sink.store(other, bytes(self.open.pop(other)))
            if other == self.current_number:
                self.current, self.current_number = None, -1

    def xRead(self, amount: int, offset: int) -> bytes:
        result = bytearray()
        size = self.sink.chunk_bytes
        position = offset
        end = min(offset + amount, self.size)
        while position < end:
            number, within = divmod(position, size)
            chunk = self._chunk(number)
            piece = bytes(chunk[within : within + (end - position)])
            piece += bytes(min(size - within, end - position) - len(piece))
            result += piece
            position += len(piece)
        # A short read must be zero-filled; SQLite checks the length.
        return bytes(result) + bytes(amount - len(result))

    def xWrite(self, data: bytes, offset: int) -> None:
        size = self.sink.chunk_bytes
        # The common case, one page appended to the chunk being filled: no slicing, no search.
        number, within = divmod(offset, size)
        current = self.current
        if (
            current is not None
            and number == self.current_number
            and within == len(current)
            and within + len(data) <= size
        ):
            current += data
            self.size = max(self.size, offset + len(data))
            return
        self._write(data, offset)
        number = (offset + len(data) - 1) // size
        self.current_number, self.current = number, self.open.get(number)

    def _write(self, data: bytes, offset: int) -> None:
        size = self.sink.chunk_bytes
        position, view = offset, memoryview(data)
        while view:
            number, within = divmod(position, size)
            self._flush_before(number)
            chunk = self._chunk(number)
            piece = view[: size - within]
            if len(chunk) < within:
                chunk.extend(bytes(within - len(chunk)))
            chunk[within : within + len(piece)] = piece
            position += len(piece)
            view = view[len(piece) :]
        self.size = max(self.size, position)

    def xTruncate(self, newsize: int) -> None:
        size = self.sink.chunk_bytes
        self.current, self.current_number = None, -1
        for number in list(self.open):
            if number * size >= newsize:
                del self.open[number]
            else:
                del self.open[number][newsize - number * size :]
        self.sink.truncate(-(-newsize // size))
        self.size = newsize

    def xFileSize(self) -> int:
        return self.size

    def xSync(self, flags: int) -> None:
        return None

    def xLock(self, level: int) -> None:
        return None

    def xUnlock(self, level: int) -> None:
        return None

    def xCheckReservedLock(self) -> bool:
        return False

    def xFileControl(self, op: int, pointer: int) -> bool:
        return False

    def xSectorSize(self) -> int:
        return 4096

    def xDeviceCharacteristics(self) -> int:
        return 0

    def xClose(self) -> None:
        for number in sorted(self.open):
            self.sink.store(number, bytes(self.open[number]))
        self.open.clear()
        self.sink.size = self.size


class _MemoryFile(_ChunkingFile):
    """Any other file SQLite opens on the target (none is expected with journal_mode OFF)."""

    def __init__(self):
        self.data = bytearray()
        self.size = 0

    def xRead(self, amount: int, offset: int) -> bytes:
        piece = bytes(self.data[offset : offset + amount])
        return piece + bytes(amount - len(piece))

    def xWrite(self, data: bytes, offset: int) -> None:
        if len(self.data) < offset:
            self.data.extend(bytes(offset - len(self.data)))
        self.data[offset : offset + len(data)] = data
        self.size = len(self.data)

    def xTruncate(self, newsize: int) -> None:
        del self.data[newsize:]
        self.size = len(self.data)

    def xClose(self) -> None:
        self.data.clear()


class _Sink:
    """Where the chunking file's finished chunks go: compared with the previous checkpoint's, and
    their new pages appended to this checkpoint's pack."""

    def __init__(
        self,
        store: ChunkStore,
        chunk_bytes: int,
        pack: str,
        previous: Index | None,
        keep_free: int = 0,
    ):
        self.store_ = store
        self.keep_free = keep_free
        self.chunk_bytes = chunk_bytes
        self.pack_name = pack
        self.previous = previous
        self.page_size: int | None = None
        self.writer: PackWriter | None = None
        # The previous checkpoint's packs keep their numbers, so its records copy over verbatim.
        self.packs: list[str] = list(previous.packs) if previous is not None else []
        self.pack_numbers: dict[str, int] = {name: n for n, name in enumerate(self.packs)}
        self.chunk_digests: dict[int, bytes] = {}
        self.records: dict[int, bytes] = {}
        self.this_run: dict[bytes, bytes] = {}
        """Page digest -> record, for pages new in this run (the free pages' zeros, mostly)."""
        self.new_pages = 0
        self.reused: set[int] = set()
        self.size = 0
        self.space_error: SpaceError | None = None
        """The refusal raised inside SQLite's write callback, which apsw reports as another error."""

    def _pack_number(self, pack: str) -> int:
        number = self.pack_numbers.get(pack)
        if number is None:
            number = self.pack_numbers[pack] = len(self.packs)
            self.packs.append(pack)
        return number

    def _previous_record(self, page: int) -> tuple[bytes, int, str] | None:
        previous = self.previous
        if (
            previous is None
            or previous.page_size != self.page_size
            or page >= previous.page_count()
        ):
            return None
        record = previous.record(page)
        pack_number, entry = RECORD.unpack_from(record, PAGE_DIGEST_BYTES)
        return record[:PAGE_DIGEST_BYTES], entry, previous.packs[pack_number]

    def stored_chunk(self, number: int) -> bytes | None:
        if number not in self.chunk_digests:
            return None
        if self.writer is not None and self.writer.descriptor is not None:
            os.fsync(self.writer.descriptor)  # reading back the temporary pack below
        records = self.records[number]
        return b"".join(
            self._page_bytes(records[offset : offset + RECORD_BYTES])
            for offset in range(0, len(records), RECORD_BYTES)
        )

    def _page_bytes(self, record: bytes) -> bytes:
        pack_number, entry = RECORD.unpack_from(record, PAGE_DIGEST_BYTES)
        pack = self.packs[pack_number]
        if pack == self.pack_name and self.writer is not None:
            with self.writer.temporary.open("rb") as handle:
                handle.seek(entry * self.page_size)
                return handle.read(self.page_size)
        return self.store_.read_page(pack, entry, self.page_size)

    def store(self, number: int, data: bytes) -> None:
        if self.page_size is None:  # set from the source before the copy starts
            raise ChunkError("the page size is not known yet")
        digest = hashlib.sha256(data).digest()
        # A chunk's digest and its records are set together, at the end: a pack write that fails
        # half-way through a chunk (a full disk) must not leave a digest without records, which
        # the truncate SQLite sends while it gives up would trip over.
        self.chunk_digests.pop(number, None)
        self.records.pop(number, None)
        self.reused.discard(number)
        pages_per_chunk = self.chunk_bytes // self.page_size
        first = number * pages_per_chunk
        previous = self.previous
        if (
            previous is not None
            and previous.page_size == self.page_size
            and previous.chunk_bytes == self.chunk_bytes
            and number < len(previous.chunk_digests)
            and previous.chunk_digests[number] == digest
        ):
            # The fast path: the same chunk at the same place, taken as the previous one had it.
            self.reused.add(number)
            pages = -(-len(data) // self.page_size)
            self.records[number] = previous.records[
                first * RECORD_BYTES : (first + pages) * RECORD_BYTES
            ]
            self.chunk_digests[number] = digest
            return
        records = []
        for offset in range(0, len(data), self.page_size):
            page = data[offset : offset + self.page_size]
            page_digest = hashlib.sha256(page).digest()[:PAGE_DIGEST_BYTES]
            before = self._previous_record(first + offset // self.page_size)
            if before is not None and before[0] == page_digest:
                records.append(self._record(page_digest, before[1], before[2]))
                continue
            known = self.this_run.get(page_digest)
            if known is not None:
                records.append(known)
                continue
            if self.writer is None:
                self.writer = PackWriter(
                    self.store_, self.pack_name, self.page_size, self.keep_free
                )
            try:
                entry = self.writer.append(page)
            except SpaceError as error:
                self.space_error = error
                raise
            self.new_pages += 1
            record = self._record(page_digest, entry, self.pack_name)
            self.this_run[page_digest] = record
            records.append(record)
        self.records[number] = b"".join(records)
        self.chunk_digests[number] = digest

    def _record(self, page_digest: bytes, entry: int, pack: str) -> bytes:
        return page_digest + RECORD.pack(self._pack_number(pack), entry)

    def truncate(self, chunk_count: int) -> None:
        for number in [key for key in self.chunk_digests if key >= chunk_count]:
            del self.chunk_digests[number]
            del self.records[number]

    def index(self) -> Index:
        count = len(self.chunk_digests)
        records = b"".join(self.records[number] for number in range(count))
        # Some pack of the previous checkpoint may hold no page of this one: the index names only
        # the packs it needs (so retention can drop the others).
        records, packs = only_used_packs(records, list(self.packs))
        return Index(
            packs,
            self.size,
            self.page_size or 0,
            self.chunk_bytes,
            [self.chunk_digests[number] for number in range(count)],
            records,
        )


def only_used_packs(records: bytes, packs: list[str]) -> tuple[bytes, list[str]]:
    """`records` and `packs` renumbered so that the pack list names only the packs a record uses
    (unchanged when every pack is used)."""
    used = {
        records[offset : offset + 4]
        for offset in range(PAGE_DIGEST_BYTES, len(records), RECORD_BYTES)
    }
    if len(used) == len(packs):
        return records, packs
    keep = sorted(RECORD.unpack(number + bytes(4))[0] for number in used)
    renumber = {old: new for new, old in enumerate(keep)}
    rebuilt = bytearray()
    for offset in range(0, len(records), RECORD_BYTES):
        pack_number, entry = RECORD.unpack_from(records, offset + PAGE_DIGEST_BYTES)
        rebuilt += records[offset : offset + PAGE_DIGEST_BYTES]
        rebuilt += RECORD.pack(renumber[pack_number], entry)
    return bytes(rebuilt), [packs[old] for old in keep]


class ChunkingVFS(apsw.VFS):
    """A VFS whose main database file is a `_ChunkingFile`: registered for one snapshot only."""

    def __init__(self, name: str, sink: _Sink):
        self.sink = sink
        self.name = name
        super().__init__(name, base="")

    def xOpen(self, name, flags):
        if flags[0] & apsw.SQLITE_OPEN_MAIN_DB:
            return _ChunkingFile(self.sink)
        return _MemoryFile()

    def xAccess(self, pathname: str, flags: int) -> bool:
        return False

    def xDelete(self, filename: str, syncdir: bool) -> None:
        return None

    def xFullPathname(self, name: str) -> str:
        return name


def snapshot_to_store(
    source_path: Path,
    store: ChunkStore,
    pack: str,
    previous: Index | None = None,
    tables: Iterable[str] = database.MAIN_TABLES,
    chunk_bytes: int = CHUNK_BYTES,
    on_pages: Callable[[int, int], None] | None = None,
    integrity: bool = False,
    keep_free: int = 0,
) -> tuple[ChunkedSnapshot, str | None]:
    """Store one read snapshot of `source_path`, its new pages in pack `pack` (pages unchanged
    since `previous`, the newest checkpoint's index, are shared); return it, and (when `integrity`)
    the ``PRAGMA integrity_check`` of that same snapshot, run on the source inside the same read
    transaction (so it checks exactly the bytes that were stored).

    Raises apsw errors as the full copy does (a damaged source: apsw.CorruptError), ChunkError or
    OSError when the store cannot be written, SpaceError before new pages would leave less than
    `keep_free` bytes free on the store's filesystem; the temporary pack is removed then.
    """
    store.prepare()
    if previous is not None and not all(store.has(name) for name in previous.packs):
        previous = None  # share nothing with a checkpoint whose packs are gone
    sink = _Sink(store, chunk_bytes, pack, previous, keep_free)
    vfs_name = f"mnemo-ops-chunks-{os.getpid()}-{id(sink)}"
    vfs = ChunkingVFS(vfs_name, sink)
    source = sqlite_copy.open_readonly(source_path)
    target = None
    integrity_result = None
    try:
        sink.page_size = source.execute("PRAGMA page_size").fetchone()[0]
        target = apsw.Connection("snapshot.db", vfs=vfs_name)
        source.execute(f"PRAGMA cache_size = -{sqlite_copy.CACHE_KIB}")
        # Exclusive locking: the copied header says WAL, and WAL without shared memory needs it.
        # The target's pages only pass through: no cache worth keeping, no journal, no syncs.
        target.execute(
            f"PRAGMA page_size = {sink.page_size}; PRAGMA locking_mode = EXCLUSIVE; "
            "PRAGMA cache_size = 16; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF"
        )
        journal_mode = source.execute("PRAGMA journal_mode").fetchone()[0]
        started = time.perf_counter()
        source.execute("BEGIN")  # one snapshot for the counts, the pages and the check
        counts = database.row_counts(source, tables)
        counts_s = time.perf_counter() - started
        started = time.perf_counter()
        with target.backup("main", source, "main") as backup:
            while not backup.step(sqlite_copy.PAGES_PER_STEP):
                if on_pages is not None:
                    on_pages(backup.page_count - backup.remaining, backup.page_count)
            if on_pages is not None:
                on_pages(backup.page_count, backup.page_count)
        page_size = target.execute("PRAGMA page_size").fetchone()[0]
        page_count = target.execute("PRAGMA page_count").fetchone()[0]
        # The header still says WAL (bytes 18-19 come from the source): a restored file is a plain
        # rollback-journal file, as a full-copy checkpoint is.
        target.execute("PRAGMA journal_mode = DELETE")
        target.close()
        target = None
        if sink.writer is not None:
            sink.writer.finish()
        copy_s = time.perf_counter() - started
        if integrity:
            integrity_result = sqlite_copy.integrity_of(source)
        source.execute("COMMIT")
    except BaseException as error:
        if sink.writer is not None:
            sink.writer.abandon()
        if sink.space_error is not None and error is not sink.space_error:
            raise sink.space_error from None
        raise
    finally:
        if target is not None:
            target.close()
        source.close()
        vfs.unregister()
        store.close()
    snapshot = sqlite_copy.SnapshotCopy(
        counts, page_size, page_count, journal_mode, round(copy_s, 3), round(counts_s, 3)
    )
    chunked = ChunkedSnapshot(
        sink.index(), sink.new_pages, sink.new_pages * page_size, len(sink.reused), snapshot
    )
    return chunked, integrity_result


def reassemble(
    store: ChunkStore,
    index: Index,
    target: Path,
    on_bytes: Callable[[int], None] | None = None,
) -> None:
    """Write the checkpoint `index` describes into the new 0600 file `target` (fsynced), checking
    every chunk's sha256 and the total size; ChunkError naming the file at the first problem."""
    descriptor = os.open(
        target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE
    )
    written = 0
    try:
        with os.fdopen(descriptor, "wb") as out:
            for number in range(len(index.chunk_digests)):
                data = store.read_chunk(index, number)
                out.write(data)
                written += len(data)
                if on_bytes is not None:
                    on_bytes(len(data))
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    finally:
        store.close()
    if written != index.size:
        target.unlink(missing_ok=True)
        raise ChunkError(
            f"the chunks of {target.name} add up to {written:,} bytes, not {index.size:,}"
        )


def file_tree_sha256(path: Path, chunk_bytes: int) -> str:
    """The tree hash of a file on disk: its chunk_bytes slices' sha256s, hashed in order."""
    digests = []
    with path.open("rb") as handle:
        while True:
            block = handle.read(chunk_bytes)
            if not block:
                break
            digests.append(hashlib.sha256(block).digest())
    return tree_sha256(digests)


def new_pack_name(name: str) -> str:
    """A pack name for checkpoint `name`: its stamp and a random suffix (never reused)."""
    stamp = "".join(character for character in name if character in "0123456789TZ")[-16:]
    return f"{stamp}-{secrets.token_hex(4)}"


class _ReadingFile(_MemoryFile):
    """A checkpoint's database read straight from the store (read-only: verify writes nothing,
    and needs no free space, however full the disk is). A few recent chunks are kept in memory."""

    CACHED_CHUNKS = 64

    def __init__(self, store: ChunkStore, index: Index):
        self.store_ = store
        self.index = index
        self.size = index.size
        self.chunk_bytes = index.chunk_bytes
        self.cache: dict[int, bytes] = {}

    def _chunk(self, number: int) -> bytes:
        chunk = self.cache.pop(number, None)
        if chunk is None:
            chunk = self.store_.read_chunk(self.index, number)
            if len(self.cache) >= self.CACHED_CHUNKS:
                del self.cache[next(iter(self.cache))]
        self.cache[number] = chunk  # most recent last
        return chunk

    def xRead(self, amount: int, offset: int) -> bytes:
        result = bytearray()
        position, end = offset, min(offset + amount, self.size)
        while position < end:
            number, within = divmod(position, self.chunk_bytes)
            piece = self._chunk(number)[within : within + (end - position)]
            if not piece:
                break
            result += piece
            position += len(piece)
        return bytes(result) + bytes(amount - len(result))

    def xWrite(self, data: bytes, offset: int) -> None:
        raise apsw.ReadOnlyError("a checkpoint is never written")

    def xTruncate(self, newsize: int) -> None:
        raise apsw.ReadOnlyError("a checkpoint is never written")

    def xClose(self) -> None:
        self.cache.clear()


class ReadingVFS(apsw.VFS):
    """A VFS that serves one checkpoint's database from the chunk store, read-only."""

    def __init__(self, name: str, opener: Callable[[], _ReadingFile]):
        self.opener = opener
        super().__init__(name, base="")

    def xOpen(self, name, flags):
        if flags[0] & apsw.SQLITE_OPEN_MAIN_DB:
            return self.opener()
        return _MemoryFile()

    def xAccess(self, pathname: str, flags: int) -> bool:
        return False

    def xDelete(self, filename: str, syncdir: bool) -> None:
        return None

    def xFullPathname(self, name: str) -> str:
        return name


class ChunkedDatabase:
    """``with ChunkedDatabase(store, index) as connection:`` an immutable read-only apsw connection
    on a checkpoint's database, read from the store (every chunk checked as it is read)."""

    def __init__(self, store: ChunkStore, index: Index):
        self.name = f"mnemo-ops-read-{os.getpid()}-{id(self)}"
        self.store = store

        def opener() -> _ReadingFile:
            return _ReadingFile(store, index)

        self.vfs = ReadingVFS(self.name, opener)
        self.connection: apsw.Connection | None = None

    def __enter__(self) -> apsw.Connection:
        self.connection = apsw.Connection(
            "file:checkpoint.db?immutable=1",
            flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI,
            vfs=self.name,
        )
        return self.connection

    def __exit__(self, *exc_info) -> None:
        if self.connection is not None:
            self.connection.close()
        self.vfs.unregister()
        self.store.close()


def check_chunks(
    store: ChunkStore, index: Index, on_bytes: Callable[[int], None] | None = None
) -> None:
    """Read every chunk once, in order, each checked against its sha256, and the sizes against the
    index's: the reassembled file would be exactly the one checkpointed (ChunkError otherwise)."""
    total = 0
    try:
        for number in range(len(index.chunk_digests)):
            length = len(store.read_chunk(index, number))
            total += length
            if on_bytes is not None:
                on_bytes(length)
    finally:
        store.close()
    if total != index.size:
        raise ChunkError(f"the chunks add up to {total:,} bytes, not the recorded {index.size:,}")
