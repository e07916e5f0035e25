"""The deduplicated checkpoint store: a database snapshot split into fixed page-aligned chunks,
each stored once under its sha256.

Layout, inside the backups folder (folders 0700, files 0600, never a symlink followed)::

    <backups>/store/chunks/<first two hex digits>/<sha256>    one chunk (CHUNK_BYTES or less)
    <backups>/<name>/mnemosyne.db.chunks                       a checkpoint's index: one sha256 a line

Why fixed chunks and not content-defined ones: SQLite never shifts bytes inside its file, a changed
row rewrites its page in place (or a new page at the end), so page-aligned chunks see exactly the
pages that changed; content-defined chunking would only add cost.

The snapshot is taken by SQLite's backup API inside one read transaction (as for the full copy),
but the target is a file of `ChunkingVFS`: the pages SQLite writes are cut into chunks in memory,
hashed, and only the chunks the store does not hold yet are written. No full copy is ever written,
so a checkpoint after 1% churn writes about the chunks that changed.

A checkpoint's database hash (`tree_sha256`) is the sha256 of its index (the chunks' sha256s in file
order): every chunk is checked against its own sha256 as it is read back, so a reassembled file
whose chunks all match and whose index matches is the exact file that was checkpointed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import apsw

from mnemo_ops import database
from mnemo_ops.checkpoints import sqlite_copy
from mnemo_ops.foundation.private_files import PRIVATE_FILE_MODE, ensure_private_dir, fsync_path

STORE_DIR = "store"
CHUNKS_DIR = "chunks"
INDEX_FILE = "mnemosyne.db.chunks"
CHUNK_BYTES = 64 * 1024
"""64 KiB: 16 pages of 4 KiB. Chosen by benchmarks/checkpoint_store.py: after 1% churn smaller
chunks write little less, larger ones write much more (see benchmarks/README.md)."""
TEMP_PREFIX = ".tmp-"
_HEX = frozenset("0123456789abcdef")


class ChunkError(Exception):
    """A chunk is missing, unreadable or not what its name says; the message names its file."""


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise ChunkError(f"{path} is a symlink; the checkpoint store never follows one")


def _private_dir(path: Path) -> Path:
    _refuse_link(path)
    return ensure_private_dir(path)


def valid_digest(text: str) -> bool:
    """True for a lowercase hex sha256 (so an index line can never name a path outside the store)."""
    return len(text) == 64 and set(text) <= _HEX


class ChunkStore:
    """The chunks of every deduplicated checkpoint in one backups folder."""

    def __init__(self, backups_dir: Path):
        self.root = backups_dir / STORE_DIR
        self.chunks = self.root / CHUNKS_DIR

    def path_for(self, digest: str) -> Path:
        """Where the chunk `digest` lives (its name checked: no path can leave the store)."""
        if not valid_digest(digest):
            raise ChunkError(f"not a chunk name: {digest!r}")
        return self.chunks / digest[:2] / digest

    def prepare(self) -> None:
        """Create the store's folders (0700), refusing symlinks in their place."""
        _private_dir(self.root)
        _private_dir(self.chunks)

    def has(self, digest: str, size: int) -> bool:
        """True when the chunk is stored as a regular file of the expected size."""
        try:
            info = os.lstat(self.path_for(digest))
        except FileNotFoundError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size == size

    def put(self, digest: str, data: bytes) -> Path:
        """Store `data` under `digest`: a 0600 temporary file, fsynced, renamed into place.

        A kill at any point leaves either no chunk or a complete one (and maybe a temporary file the
        next checkpoint removes).
        """
        final = self.path_for(digest)
        folder = final.parent
        if not folder.is_dir() or folder.is_symlink():
            _private_dir(folder)
        temporary = folder / f"{TEMP_PREFIX}{digest}-{os.getpid()}"
        descriptor = os.open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
            PRIVATE_FILE_MODE,
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.rename(temporary, final)
        return final

    def read(self, digest: str) -> bytes:
        """The bytes of chunk `digest`, checked against its sha256; ChunkError naming the file."""
        path = self.path_for(digest)
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise ChunkError(f"chunk {path} is missing") from None
        except OSError as error:
            raise ChunkError(f"chunk {path} cannot be read: {error.strerror}") from None
        try:
            with os.fdopen(descriptor, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise ChunkError(f"chunk {path} cannot be read: {error.strerror}") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise ChunkError(f"chunk {path} is corrupt: its sha256 differs from its name")
        return data

    def stored(self) -> Iterable[Path]:
        """Every chunk file in the store (temporary files left by a kill included)."""
        if not self.chunks.is_dir() or self.chunks.is_symlink():
            return
        for folder in sorted(self.chunks.iterdir()):
            if folder.is_symlink() or not folder.is_dir():
                continue
            yield from sorted(folder.iterdir())

    def remove_temporaries(self) -> int:
        """Remove the temporary chunk files a killed checkpoint left (the writer lock is ours)."""
        removed = 0
        for path in list(self.stored()):
            if path.name.startswith(TEMP_PREFIX) and not path.is_dir():
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def collect_garbage(self, referenced: set[str]) -> tuple[int, int]:
        """Remove every chunk no index in `referenced` names; return (files, bytes) removed."""
        files = size = 0
        touched: set[Path] = set()
        for path in list(self.stored()):
            if path.is_symlink() or not path.is_file() or path.name in referenced:
                continue
            size += path.stat().st_size
            path.unlink()
            files += 1
            touched.add(path.parent)
        for folder in touched:
            fsync_path(folder)
        return files, size

    def size_bytes(self) -> int:
        """Bytes of every chunk stored."""
        return sum(path.stat().st_size for path in self.stored() if path.is_file())


def read_index(path: Path) -> list[str]:
    """The chunk list of a checkpoint (ChunkError when missing, a symlink or malformed)."""
    _refuse_link(path)
    try:
        lines = path.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError) as error:
        raise ChunkError(f"index {path} cannot be read: {error}") from None
    if not all(valid_digest(line) for line in lines):
        raise ChunkError(f"index {path} is malformed")
    return lines


def index_bytes(digests: list[str]) -> bytes:
    """The index file's content: one sha256 a line."""
    return "".join(f"{digest}\n" for digest in digests).encode("ascii")


def tree_sha256(digests: list[str]) -> str:
    """The database hash recorded in the manifest: the sha256 of the index."""
    return hashlib.sha256(index_bytes(digests)).hexdigest()


@dataclasses.dataclass
class ChunkedSnapshot:
    """A snapshot stored as chunks: their sha256s in file order, and what it cost."""

    digests: list[str]
    size: int
    chunk_bytes: int
    new_chunks: int
    new_bytes: int
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
    """Where the chunking file's finished chunks go: hashed, and stored when new."""

    def __init__(self, store: ChunkStore, chunk_bytes: int):
        self.store_ = store
        self.chunk_bytes = chunk_bytes
        self.digests: dict[int, str] = {}
        self.new_chunks = 0
        self.new_bytes = 0
        self.size = 0
        self.hash_s = 0.0
        self.write_s = 0.0

    def stored_chunk(self, number: int) -> bytes | None:
        digest = self.digests.get(number)
        return self.store_.read(digest) if digest is not None else None

    def store(self, number: int, data: bytes) -> None:
        started = time.perf_counter()
        digest = hashlib.sha256(data).hexdigest()
        hashed = time.perf_counter()
        self.hash_s += hashed - started
        self.digests[number] = digest
        if not self.store_.has(digest, len(data)):
            self.store_.put(digest, data)
            self.new_chunks += 1
            self.new_bytes += len(data)
        self.write_s += time.perf_counter() - hashed

    def truncate(self, chunk_count: int) -> None:
        for number in [key for key in self.digests if key >= chunk_count]:
            del self.digests[number]


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
    tables: Iterable[str] = database.MAIN_TABLES,
    chunk_bytes: int = CHUNK_BYTES,
    on_pages: Callable[[int, int], None] | None = None,
    integrity: bool = False,
) -> tuple[ChunkedSnapshot, str | None]:
    """Store one read snapshot of `source_path` as chunks; return it, and (when `integrity`) the
    ``PRAGMA integrity_check`` of that same snapshot, run on the source inside the same read
    transaction (so it checks exactly the bytes that were stored).

    Raises apsw errors as the full copy does (a damaged source: apsw.CorruptError), ChunkError or
    OSError when the store cannot be written.
    """
    store.prepare()
    sink = _Sink(store, chunk_bytes)
    vfs_name = f"mnemo-ops-chunks-{os.getpid()}-{id(sink)}"
    vfs = ChunkingVFS(vfs_name, sink)
    source = sqlite_copy.open_readonly(source_path)
    target = None
    integrity_result = None
    try:
        target = apsw.Connection("snapshot.db", vfs=vfs_name)
        source.execute(f"PRAGMA cache_size = -{sqlite_copy.CACHE_KIB}")
        # The target's pages only pass through: no cache worth keeping, no journal, no syncs.
        # Exclusive locking: the copied header says WAL, and WAL without shared memory needs it.
        target.execute(
            "PRAGMA locking_mode = EXCLUSIVE; PRAGMA cache_size = 16; "
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF"
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
        copy_s = time.perf_counter() - started
        if integrity:
            rows = [row[0] for row in source.execute("PRAGMA integrity_check(20)")]
            integrity_result = "ok" if rows == ["ok"] else "; ".join(str(row) for row in rows)
        source.execute("COMMIT")
    finally:
        if target is not None:
            target.close()
        source.close()
        vfs.unregister()
    digests = [sink.digests[number] for number in range(len(sink.digests))]
    snapshot = sqlite_copy.SnapshotCopy(
        counts, page_size, page_count, journal_mode, round(copy_s, 3), round(counts_s, 3)
    )
    chunked = ChunkedSnapshot(
        digests, sink.size, chunk_bytes, sink.new_chunks, sink.new_bytes, snapshot
    )
    return chunked, integrity_result


def reassemble(
    store: ChunkStore,
    digests: list[str],
    target: Path,
    size: int,
    on_bytes: Callable[[int], None] | None = None,
) -> None:
    """Write the chunks `digests` in order into the new 0600 file `target` (fsynced), checking each
    chunk's sha256 and the total size; ChunkError naming the file at the first problem."""
    descriptor = os.open(
        target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE
    )
    written = 0
    try:
        with os.fdopen(descriptor, "wb") as out:
            for digest in digests:
                data = store.read(digest)
                out.write(data)
                written += len(data)
                if on_bytes is not None:
                    on_bytes(len(data))
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    if written != size:
        target.unlink(missing_ok=True)
        raise ChunkError(f"the chunks of {target.name} add up to {written:,} bytes, not {size:,}")


def file_tree_sha256(path: Path, chunk_bytes: int) -> str:
    """The tree hash of a file on disk (its chunk_bytes slices' sha256s, one a line, hashed)."""
    digests = []
    with path.open("rb") as handle:
        while True:
            block = handle.read(chunk_bytes)
            if not block:
                break
            digests.append(hashlib.sha256(block).hexdigest())
    return tree_sha256(digests)


def fsync_store(store: ChunkStore) -> None:
    """fsync the store's folders, so every chunk renamed into place survives a crash."""
    if store.chunks.is_dir():
        for folder in store.chunks.iterdir():
            if folder.is_dir() and not folder.is_symlink():
                fsync_path(folder)
        fsync_path(store.chunks)
        fsync_path(store.root)


class _ReadingFile(_MemoryFile):
    """A checkpoint's database read straight from its chunks (read-only: verify writes nothing,
    and needs no free space, however full the disk is). A few recent chunks are kept in memory."""

    CACHED_CHUNKS = 64

    def __init__(self, store: ChunkStore, digests: list[str], size: int, chunk_bytes: int):
        self.store_ = store
        self.digests = digests
        self.size = size
        self.chunk_bytes = chunk_bytes
        self.cache: dict[int, bytes] = {}

    def _chunk(self, number: int) -> bytes:
        chunk = self.cache.pop(number, None)
        if chunk is None:
            chunk = self.store_.read(self.digests[number])
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
    """``with ChunkedDatabase(store, digests, size, chunk_bytes) as connection:`` an immutable
    read-only apsw connection on a checkpoint's database, read from its chunks; a bad chunk
    surfaces as ChunkError (the message names its file)."""

    def __init__(self, store: ChunkStore, digests: list[str], size: int, chunk_bytes: int):
        self.name = f"mnemo-ops-read-{os.getpid()}-{id(self)}"
        self.errors: list[ChunkError] = []

        def opener() -> _ReadingFile:
            return _ReadingFile(store, digests, size, chunk_bytes)

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


def check_chunks(
    store: ChunkStore, digests: list[str], size: int, on_bytes: Callable[[int], None] | None = None
) -> None:
    """Read every chunk once, in order, each checked against its sha256, and the sizes against
    `size`: the reassembled file would be exactly the one checkpointed (ChunkError otherwise)."""
    total = 0
    for digest in digests:
        length = len(store.read(digest))
        total += length
        if on_bytes is not None:
            on_bytes(length)
    if total != size:
        raise ChunkError(f"the chunks add up to {total:,} bytes, not the recorded {size:,}")
