"""Property tests of the checkpoint store (docs/checkpoints-format.md): any sequence of writes to a
small real SQLite database, checkpoints, compactions, retention, dropped checkpoints and simulated
kills leaves every kept checkpoint restoring the database bytes of the moment it was taken, and
verifying.

A kill is simulated in-process: the store's own code runs until a chosen call (a page appended to
a pack, a pack renamed into place, an index written, a checkpoint folder or a rewritten index pair
renamed, an unused pack removed), which raises instead of returning; from then on every call a
killed process could not make raises too, and the clean-up a dead process never runs (the
temporary pack and folder removal) does nothing, so the files on disk are the ones a SIGKILL at
that call would leave. tests/checkpoints/test_chunk_store.py kills a real child process the same
way once; here hypothesis chooses where.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import apsw
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mnemo_ops.checkpoints import catalog, chunk_store, compaction, create
from mnemo_ops.checkpoints.create import CheckpointError, create_checkpoint
from mnemo_ops.checkpoints.restore import restore_checkpoint
from mnemo_ops.checkpoints.verify import reassemble_database, verify_checkpoint
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.settings import Config, Settings
from tests.checkpoints.test_round_trip import WAL_SWITCH_HEADER_BYTES

START = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
JOB = "memory-maintain"

SNAPSHOT_HEADER_BYTES = frozenset({18, 19, *range(24, 28), *range(40, 44), *range(92, 100)})
"""Page 1 bytes a snapshot legitimately differs in from the live file (SQLite's file format, "The
Database Header"): the read/write versions (the checkpoint is a rollback-journal file, the live
one is WAL), the change counter, the schema cookie the backup API bumps, and the
version-valid-for number and SQLite version of the library that wrote the copy. Every other byte
of every page must be the live file's."""


class Killed(BaseException):
    """The simulated SIGKILL (a BaseException, as a signal is: no handler of the store's catches it
    as an ordinary error)."""


# The calls where a kill can land, by the operation they belong to.
CHECKPOINT_KILLS = ("pack-append", "pack-rename", "index-write", "folder-rename")
COMPACTION_KILLS = ("pack-append", "pack-rename", "rewrite-write", "rewrite-rename", "pack-unlink")
RETENTION_KILLS = ("pack-unlink",)


@dataclasses.dataclass
class Kill:
    """Where the kill lands: the kind of call, and how many such calls succeed before it."""

    point: str
    countdown: int
    fired: bool = False


@contextlib.contextmanager
def killed_at(kill: Kill, backups: Path) -> Iterator[None]:
    """Run the block as a process that is killed at `kill` (nothing it would do after that
    happens; what it wrote before stays on disk)."""
    packs_dir = backups / chunk_store.STORE_DIR / chunk_store.PACKS_DIR

    def lethal(original: Callable, point: str, matches: Callable[..., bool]) -> Callable:
        def wrapper(*args, **kwargs):
            if kill.fired:
                raise Killed
            if kill.point == point and matches(*args):
                if kill.countdown == 0:
                    kill.fired = True
                    raise Killed
                kill.countdown -= 1
            return original(*args, **kwargs)

        return wrapper

    def dead_is_silent(original: Callable) -> Callable:
        # Clean-up on the way out of an error: a killed process never gets to run it.
        def wrapper(*args, **kwargs):
            if kill.fired:
                return None
            return original(*args, **kwargs)

        return wrapper

    def abandon(writer: chunk_store.PackWriter) -> None:
        if kill.fired:
            # The kernel closes a dead process's files; the temporary pack stays.
            if writer.descriptor is not None:
                os.close(writer.descriptor)
                writer.descriptor = None
            return
        original_abandon(writer)

    def renames(point: str) -> Callable[..., bool]:
        tests = {
            "pack-rename": lambda source: Path(source).parent == packs_dir,
            "folder-rename": lambda source: (
                Path(source).parent == backups and Path(source).name.startswith(catalog.TEMP_PREFIX)
            ),
            "rewrite-rename": lambda source: str(source).endswith(catalog.REWRITE_SUFFIX),
        }
        return lambda source, target: tests[point](source)

    original_abandon = chunk_store.PackWriter.abandon
    real_rename, real_unlink = os.rename, Path.unlink
    rename_points = ("pack-rename", "folder-rename", "rewrite-rename")
    rename = real_rename
    for point in rename_points:
        rename = lethal(rename, point, renames(point))
    patches = [
        mock.patch.object(
            chunk_store.PackWriter,
            "append",
            lethal(chunk_store.PackWriter.append, "pack-append", lambda writer, page: True),
        ),
        mock.patch.object(chunk_store.PackWriter, "abandon", abandon),
        mock.patch.object(os, "rename", rename),
        mock.patch.object(
            Path,
            "unlink",
            lethal(
                real_unlink,
                "pack-unlink",
                lambda path, *rest: (
                    path.parent == packs_dir and not path.name.startswith(chunk_store.TEMP_PREFIX)
                ),
            ),
        ),
        mock.patch.object(
            create,
            "write_new_private",
            lethal(
                create.write_new_private,
                "index-write",
                lambda path, data: path.name == chunk_store.INDEX_FILE,
            ),
        ),
        mock.patch.object(
            catalog,
            "write_new_private",
            lethal(catalog.write_new_private, "rewrite-write", lambda path, data: True),
        ),
        mock.patch.object(create, "remove_tree", dead_is_silent(create.remove_tree)),
    ]
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        try:
            yield
        except (Killed, CheckpointError, apsw.Error, chunk_store.ChunkError):
            # A kill inside SQLite's write callback comes out as SQLite's error, and the
            # checkpoint reports that as its own: only a kill that fired may end the block early.
            if not kill.fired:
                raise


def _settings(root: Path) -> Settings:
    """Settings for a database and state folder under `root`, keeping few checkpoints of each kind
    so that retention has work to do."""
    return Settings(
        db_path=root / "data" / "mnemosyne.db",
        state_dir=root / "state",
        config_file=None,
        hermes_home=root,
        memory_blocks_dir=root / "no-blocks",
        owner="default",
        config=Config(),
        sources={},
    ).updated(backup={"keep": 2, "manual_keep": 1, "pre_write_keep": 1})


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode = WAL")  # Mnemosyne's mode
    return connection


def _make_database(path: Path, page_size: int) -> None:
    path.parent.mkdir(parents=True)
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA page_size = {page_size}")
    connection.execute("PRAGMA journal_mode = WAL")
    # The tables a restore looks for (Mnemosyne's core ones), the rows in the first.
    connection.execute("CREATE TABLE working_memory (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    connection.execute("CREATE INDEX working_memory_body ON working_memory (substr(body, 1, 8))")
    connection.execute("CREATE TABLE episodic_memory (id INTEGER PRIMARY KEY)")
    connection.execute("CREATE TABLE fts_working (id INTEGER PRIMARY KEY)")
    connection.commit()
    connection.close()


def _write(path: Path, seed: int, inserts: int, updates: int, deletes: int) -> None:
    """Insert, update and delete a few rows (some bodies span several pages), then fold the WAL
    into the file, as Mnemosyne's own checkpoints do."""
    rng = random.Random(seed)
    connection = _connect(path)
    with connection:
        ids = [row[0] for row in connection.execute("SELECT id FROM working_memory")]
        for row_id in rng.sample(ids, min(deletes, len(ids))):
            connection.execute("DELETE FROM working_memory WHERE id = ?", (row_id,))
        ids = [row[0] for row in connection.execute("SELECT id FROM working_memory")]
        for row_id in rng.sample(ids, min(updates, len(ids))):
            body = rng.randbytes(rng.choice((40, 300, 2500, 9000)))
            connection.execute("UPDATE working_memory SET body = ? WHERE id = ?", (body, row_id))
        for _ in range(inserts):
            body = rng.randbytes(rng.choice((40, 300, 2500, 9000)))
            connection.execute("INSERT INTO working_memory (body) VALUES (?)", (body,))
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def _vacuum(path: Path, page_size: int | None) -> None:
    """VACUUM (the file shrinks); with `page_size`, change the page size on the way (possible only
    outside WAL mode, so the mode is switched off and back)."""
    connection = sqlite3.connect(path)
    if page_size is not None:
        connection.execute("PRAGMA journal_mode = DELETE")
        connection.execute(f"PRAGMA page_size = {page_size}")
    connection.execute("VACUUM")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


writes = st.tuples(
    st.just("write"),
    st.integers(0, 2**16),
    st.integers(0, 8),
    st.integers(0, 6),
    st.integers(0, 4),
)
kinds = st.sampled_from(("daily", "manual", "pre-write"))
# How many calls of the kind succeed before the kill: a checkpoint appends many pages but renames
# its pack once; a compaction writes and renames two files per checkpoint it rewrites.
countdowns = {
    "pack-append": st.integers(0, 40),
    "pack-rename": st.just(0),
    "index-write": st.just(0),
    "folder-rename": st.just(0),
    "rewrite-write": st.integers(0, 5),
    "rewrite-rename": st.integers(0, 5),
    "pack-unlink": st.integers(0, 3),
}


def kills(operation: str, points: tuple[str, ...], *rest: st.SearchStrategy) -> st.SearchStrategy:
    """`operation` killed at one of `points`, after a number of calls suited to the point."""
    return st.one_of(
        *(
            st.tuples(st.just(operation), st.just(point), countdowns[point], *rest)
            for point in points
        )
    )


operations = st.one_of(
    writes,
    st.tuples(st.just("vacuum"), st.sampled_from((None, None, 1024, 4096))),
    st.tuples(st.just("checkpoint"), kinds),
    st.tuples(st.just("day"), st.integers(0, 2**16)),
    st.tuples(st.just("day"), st.integers(0, 2**16)),
    st.tuples(st.just("compact"), st.sampled_from((0.01, 0.1, 0.3))),
    st.tuples(st.just("retention")),
    st.tuples(st.just("drop"), st.integers(0, 10)),
    kills("killed-checkpoint", CHECKPOINT_KILLS, kinds),
    kills("killed-compaction", COMPACTION_KILLS),
    kills("killed-compaction", COMPACTION_KILLS),
    kills("killed-retention", RETENTION_KILLS),
)


class Model:
    """The database, the store, and what each checkpoint must restore to."""

    def __init__(self, root: Path, page_size: int):
        self.root = root
        self.settings = _settings(root)
        self.db = self.settings.db_path
        _make_database(self.db, page_size)
        _write(self.db, seed=0, inserts=30, updates=0, deletes=0)
        self.expected: dict[str, bytes] = {}
        """Checkpoint name -> the live file's bytes when it was taken."""
        self.moment = START
        self.pending_recovery = False
        """A kill left work for the next writer (a half-renamed index pair, a temporary pack or
        folder): until a writer ran, a checkpoint may be refused, never restored wrong."""

    def _next_moment(self) -> datetime:
        self.moment += timedelta(hours=13)
        return self.moment

    def _take(self, kind: str) -> None:
        create_checkpoint(
            self.settings,
            kind,
            job=JOB if kind == "pre-write" else None,
            moment=self._next_moment(),
        )

    def run(self, operation: tuple) -> None:
        """Carry out one operation, then bring the expectations up to date."""
        name, *arguments = operation
        before = self.db.read_bytes()
        if name == "write":
            _write(self.db, *arguments)
            return
        if name == "vacuum":
            _vacuum(self.db, *arguments)
            return
        if name == "day":
            # What a night of the agent and the nightly backup do: some rows change, a daily
            # checkpoint, retention, compaction as eager as it goes.
            for step in (
                ("write", arguments[0], 3, 4, 2),
                ("checkpoint", "daily"),
                ("retention",),
                ("compact", 0.01),
            ):
                self.run(step)
            return
        kill = None
        if name == "checkpoint":
            self._take(*arguments)
        elif name == "compact":
            done = compaction.compact(self.settings, *arguments)
            event(f"compaction rewrote {min(done.rewritten, 2)}+ indexes")
        elif name == "retention":
            catalog.apply_retention(self.settings)
        elif name == "drop":
            listed = catalog.list_checkpoints(self.settings)
            if listed:
                catalog.remove_checkpoints([listed[arguments[0] % len(listed)]])
                catalog.collect_chunks(self.settings)
        else:
            if name in ("killed-compaction", "killed-retention"):
                # A night whose backup is killed during its retention or compaction: its daily
                # checkpoint makes pages of the older ones unused first.
                self.run(("write", arguments[1], 3, 4, 2))
                self.run(("checkpoint", "daily"))
                before = self.db.read_bytes()
                if name == "killed-compaction":
                    self.run(("retention",))
            kill = Kill(arguments[0], arguments[1])
            with killed_at(kill, self.settings.backups_dir):
                if name == "killed-checkpoint":
                    self._take(arguments[2])
                elif name == "killed-compaction":
                    compaction.compact(self.settings, 0.01)
                else:
                    catalog.apply_retention(self.settings)
        self.pending_recovery = kill is not None and kill.fired
        if kill is not None:
            event(f"{name} at {kill.point}: {'killed' if kill.fired else 'finished'}")
        listed = {info.name: info for info in catalog.list_checkpoints(self.settings)}
        assert not any(info.failed for info in listed.values())
        for new in set(listed) - set(self.expected):
            # Taken by this operation (a kill after its folder's rename still made it).
            assert name in ("checkpoint", "killed-checkpoint"), new
            self.expected[new] = before
        for gone in set(self.expected) - set(listed):
            assert name in ("retention", "drop", "killed-retention"), gone
            del self.expected[gone]

    def check(self) -> None:
        """Every listed checkpoint restores its moment's bytes and verifies; right after a kill,
        one may instead be refused (until the next writer finishes what the kill left)."""
        folder = self.root / "reassembled"
        folder.mkdir(exist_ok=True)
        for name, expected in self.expected.items():
            info = catalog.find_checkpoint(self.settings, name)
            target = folder / f"{name}.db"
            try:
                reassemble_database(info, target, ProgressReporter(False))
            except chunk_store.ChunkError:
                assert self.pending_recovery, f"{name} cannot be reassembled"
                continue
            restored = target.read_bytes()
            target.unlink()
            assert_same_database(restored, expected, name)
            event("a checkpoint restored byte-exact")
            report = verify_checkpoint(info)
            assert report.ok or self.pending_recovery, (name, report.problems)

    def settle(self) -> None:
        """One last clean checkpoint and retention: every kill's leftovers are gone, the store
        holds exactly the packs the kept checkpoints name, and each of those restores."""
        before = self.db.read_bytes()
        self._take("manual")
        catalog.apply_retention(self.settings)
        self.pending_recovery = False
        listed = {info.name for info in catalog.list_checkpoints(self.settings)}
        for new in listed - set(self.expected):
            self.expected[new] = before
        for gone in set(self.expected) - listed:
            del self.expected[gone]
        self.check()
        backups = self.settings.backups_dir
        store = chunk_store.ChunkStore(backups)
        assert {chunk_store.pack_of(path) for path in store.stored()} == (
            catalog.referenced_packs(backups)
        )
        leftovers = [
            path
            for path in backups.rglob("*")
            if path.name.startswith(catalog.TEMP_PREFIX)
            or path.name.endswith(catalog.REWRITE_SUFFIX)
        ]
        assert leftovers == []
        # The full restore path once: over a database file, switched to WAL, moved into place.
        name = sorted(self.expected)[-1]
        target = self.root / "restored" / "mnemosyne.db"
        restore_checkpoint(self.settings, name, target=target)
        restored = target.read_bytes()
        reference = self.root / "reference.db"
        reassemble_database(
            catalog.find_checkpoint(self.settings, name), reference, ProgressReporter(False)
        )
        differing = {
            offset
            for offset, (left, right) in enumerate(zip(restored, reference.read_bytes()))
            if left != right
        }
        assert len(restored) == reference.stat().st_size
        assert differing <= WAL_SWITCH_HEADER_BYTES


def assert_same_database(restored: bytes, live: bytes, name: str) -> None:
    """`restored` is `live` byte for byte, but for the header fields a snapshot rewrites."""
    assert len(restored) == len(live), f"{name}: {len(restored)} bytes, expected {len(live)}"
    differing = {
        offset for offset in range(100) if restored[offset] != live[offset]
    } - SNAPSHOT_HEADER_BYTES
    assert not differing, f"{name}: header bytes {sorted(differing)} differ"
    assert restored[100:] == live[100:], f"{name}: the pages differ"


def run_sequence(page_size: int, sequence: list[tuple]) -> None:
    """Run `sequence` on a new database of `page_size` and check the store after every step."""
    with tempfile.TemporaryDirectory(prefix="mnemo-ops-properties-") as folder:
        model = Model(Path(folder), page_size)
        for operation in sequence:
            model.run(operation)
            if operation[0] not in ("write", "vacuum"):
                model.check()
        model.settle()


sequences = st.lists(operations, min_size=1, max_size=14)
page_sizes = st.sampled_from((1024, 4096))


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@pytest.mark.heavy
@given(page_size=page_sizes, sequence=sequences)
def test_any_sequence_of_writes_kills_and_compactions_restores_every_kept_checkpoint(
    page_size, sequence
):
    run_sequence(page_size, sequence)


@pytest.mark.e2e
@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(page_size=page_sizes, sequence=st.lists(operations, min_size=1, max_size=30))
def test_longer_sequences_of_writes_kills_and_compactions(page_size, sequence):
    run_sequence(page_size, sequence)
