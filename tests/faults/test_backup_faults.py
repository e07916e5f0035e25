"""Backup under stress: a live writer inserting all the time, and a full disk."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from mnemo_ops.checkpoints import catalog, chunk_store
from mnemo_ops.checkpoints.sqlite_copy import copy_in_one_snapshot, integrity_check
from tests.faults.tmpfs import mounted_tmpfs

# Slow, and about mnemo-ops' own file handling rather than Mnemosyne's behaviour: CI runs it on one
# Mnemosyne line only (the "slow" marker, pyproject.toml).
pytestmark = pytest.mark.slow

WRITER = r"""
import sqlite3, sys, time
from pathlib import Path
db, stop = sys.argv[1], Path(sys.argv[2])
connection = sqlite3.connect(db, isolation_level=None, timeout=5)
connection.execute("PRAGMA journal_mode=WAL")
connection.execute("PRAGMA busy_timeout=5000")
number = 0
print("ready", flush=True)
while not stop.exists():
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(
        "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance, veracity)"
        " VALUES (?, ?, 'conversation', datetime('now'), 'writer', 0.5, 'stated')",
        (f"w{number:015d}", f"writer row {number} about steady tomato watering and compost"))
    connection.execute("COMMIT")
    number += 1
    time.sleep(0.001)
print(number, flush=True)
"""


def pad_database(db_path: Path, rows: int = 12000) -> None:
    """Make the sample big enough (tens of MB, FTS-indexed by Mnemosyne's triggers) that a copy takes a while."""
    rng = random.Random(3)
    words = [
        "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9)))
        for _ in range(3000)
    ]
    connection = sqlite3.connect(db_path)
    with connection:
        connection.executemany(
            "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance)"
            " VALUES (?, ?, 'import', '2026-01-01T00:00:00', 'padding', 0.3)",
            [(f"p{number:015d}", " ".join(rng.choices(words, k=60))) for number in range(rows)],
        )
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


class Writer:
    """A separate process inserting one row per transaction, as fast as a busy agent would."""

    def __init__(self, db_path: Path, directory: Path):
        self.stop_file = directory / "stop-writer"
        self.process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db_path), str(self.stop_file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout.readline().strip() == "ready"

    def finish(self) -> int:
        """Stop the writer; return how many rows it committed."""
        self.stop_file.touch()
        out, _ = self.process.communicate(timeout=60)
        assert self.process.returncode == 0
        return int(out.strip())


def writer_rows(connection: sqlite3.Connection) -> list[str]:
    return [
        row[0]
        for row in connection.execute(
            "SELECT id FROM working_memory WHERE session_id = 'writer' ORDER BY id"
        )
    ]


def count_writer_rows(db_path: Path) -> int:
    """Rows the writer has committed so far.

    Through apsw, the same SQLite library the copy uses: closing a connection of ANOTHER SQLite
    library (Python's sqlite3) in this process would drop this process's POSIX locks on the file,
    including the copy's read lock, and let the writer's checkpoint overwrite pages mid-copy.
    """
    connection = apsw.Connection(
        f"file:{db_path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        return connection.execute(
            "SELECT count(*) FROM working_memory WHERE session_id = 'writer'"
        ).fetchone()[0]
    finally:
        connection.close()


def assert_consistent_snapshot(copy_path: Path) -> int:
    """The copy holds a prefix of the writer's rows (no gaps) and its FTS index agrees with its table."""
    assert integrity_check(copy_path) == "ok"
    connection = sqlite3.connect(f"file:{copy_path}?immutable=1", uri=True)
    try:
        ids = writer_rows(connection)
        assert ids == [f"w{number:015d}" for number in range(len(ids))]
        working = connection.execute("SELECT count(*) FROM working_memory").fetchone()[0]
        indexed = connection.execute("SELECT count(*) FROM fts_working").fetchone()[0]
        assert indexed == working
    finally:
        connection.close()
    return len(ids)


def test_a_stepped_copy_in_one_snapshot_finishes_while_a_writer_commits_between_steps(
    sample, tmp_path
):
    pad_database(sample.db_path)
    writer = Writer(sample.db_path, tmp_path)
    seen: list[int] = []

    def between_steps(done: int, total: int) -> None:
        # One page per step and a pause: the writer commits between steps many times. A backup that
        # restarted on every write would never get here with done == total.
        if done in (1, total) or done % 500 == 0:
            seen.append(count_writer_rows(sample.db_path))
        time.sleep(0.0002)

    try:
        copy = copy_in_one_snapshot(
            sample.db_path, tmp_path / "copy.db", pages_per_step=1, on_pages=between_steps
        )
    finally:
        committed = writer.finish()
    in_copy = assert_consistent_snapshot(tmp_path / "copy.db")
    assert seen[-1] > seen[0], "the writer committed while the copy was in progress"
    assert in_copy <= seen[0] + 1  # the snapshot is the one taken when the copy began
    assert (
        copy.row_counts["working_memory"]
        == sqlite3.connect(tmp_path / "copy.db")
        .execute("SELECT count(*) FROM working_memory")
        .fetchone()[0]
    )
    assert committed >= seen[-1]


def test_backup_run_is_consistent_while_a_writer_inserts(sample, cli, tmp_path):
    pad_database(sample.db_path)
    writer = Writer(sample.db_path, tmp_path)
    results = []
    try:
        for _ in range(3):
            before = count_writer_rows(sample.db_path)
            completed = cli("--json", "run", "backup")
            after = count_writer_rows(sample.db_path)
            results.append((before, json.loads(completed.stdout), after, completed))
    finally:
        committed = writer.finish()
    assert committed > 0
    for before, result, after, completed in results:
        assert completed.returncode == 0 and result["status"] == "ok", completed.stderr
        folder = sample.state_dir / "backups" / result["checkpoint"]
        # The database lives in the chunk store: reassembled (verified) into a file of its own.
        restored = tmp_path / result["checkpoint"] / "mnemosyne.db"
        reassembled = cli("backup", "restore", result["checkpoint"], "--to", str(restored))
        assert reassembled.returncode == 0, reassembled.stderr
        in_copy = assert_consistent_snapshot(restored)
        assert before <= in_copy <= after
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["verification"]["ok"] and manifest["verification"]["row_counts_match"]
    assert results[-1][2] > results[0][0], "the writer kept committing during the backups"


def test_backup_killed_mid_copy_leaves_no_checkpoint_and_the_next_run_completes(sample, cli):
    pad_database(sample.db_path)
    backups = sample.state_dir / "backups"
    process = subprocess.Popen(
        [sys.executable, "-m", "mnemo_ops", "run", "backup"],
        env=sample.environ(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        if backups.is_dir() and any(entry.name.startswith(".tmp-") for entry in backups.iterdir()):
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.001)
    process.wait(timeout=30)
    if process.returncode != -signal.SIGKILL:
        pytest.skip("the backup finished before it could be killed mid-copy on this machine")
    assert [entry.name for entry in backups.iterdir() if catalog.valid_name(entry.name)] == []
    completed = cli("--json", "backup", "list")
    assert json.loads(completed.stdout)["checkpoints"] == []
    assert integrity_check(sample.db_path, immutable=False) == "ok"
    completed = cli("--json", "run", "backup")
    assert completed.returncode == 0, completed.stderr
    assert sorted(entry.name for entry in backups.iterdir()) == [
        json.loads(completed.stdout)["checkpoint"],
        "store",
    ]
    # The store is consistent: no pack half-written, none that no checkpoint references.
    stored = {chunk_store.pack_of(path) for path in chunk_store.ChunkStore(backups).stored()}
    index = backups / json.loads(completed.stdout)["checkpoint"] / chunk_store.INDEX_FILE
    assert stored == set(chunk_store.read_index(index).packs)


# --- a full disk -----------------------------------------------------------------------------------


@pytest.fixture
def small_filesystem(sample):
    """A size-limited tmpfs mounted on <state_dir>/backups (needs root; skipped otherwise)."""
    with mounted_tmpfs(sample.state_dir / "backups", "4m") as mount_point:
        yield mount_point


def _remount(mount_point: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mount_point)], check=True)


def _leftovers(mount_point: Path) -> list[str]:
    return sorted(entry.name for entry in mount_point.iterdir() if entry.name.startswith(".tmp-"))


def test_not_enough_space_fails_before_writing_and_keeps_earlier_checkpoints(
    sample, cli, small_filesystem
):
    completed = cli("--json", "run", "backup")
    assert completed.returncode == 0, completed.stderr
    good = json.loads(completed.stdout)["checkpoint"]
    # Fill the small filesystem until less than one checkpoint fits.
    free = os.statvfs(small_filesystem).f_bavail * os.statvfs(small_filesystem).f_frsize
    (small_filesystem / "filler").write_bytes(b"\0" * (free - 200 * 1024))
    completed = cli("--json", "run", "backup")
    result = json.loads(completed.stdout)
    assert completed.returncode == 1 and result["status"] == "failed"
    assert (
        "not enough free space" in result["error"]
        and "earlier checkpoints are intact" in result["error"]
    )
    assert {warning["code"] for warning in result["warnings"]} >= {"backup-disk-full"}
    assert _leftovers(small_filesystem) == []
    assert [
        entry.name for entry in small_filesystem.iterdir() if catalog.valid_name(entry.name)
    ] == [good]
    assert cli("backup", "verify", good).returncode == 0


def test_disk_full_mid_checkpoint_leaves_nothing_partial(sample, cli, small_filesystem):
    completed = cli("--json", "run", "backup")
    assert completed.returncode == 0, completed.stderr
    good = json.loads(completed.stdout)["checkpoint"]
    # Run out of inodes (ENOSPC, "No space left on device") after three more files: the byte check
    # passes, the checkpoint starts, and fails part-way through.
    stats = os.statvfs(small_filesystem)
    _remount(small_filesystem, f"nr_inodes={stats.f_files - stats.f_ffree + 3}")
    completed = cli("--json", "run", "backup")
    result = json.loads(completed.stdout)
    assert completed.returncode == 1 and result["status"] == "failed", result
    assert "no space left on device" in result["error"]
    assert (
        "partial checkpoint was removed" in result["error"]
        and "earlier checkpoints are intact" in result["error"]
    )
    assert _leftovers(small_filesystem) == []
    assert [
        entry.name for entry in small_filesystem.iterdir() if catalog.valid_name(entry.name)
    ] == [good]
    assert cli("backup", "verify", good).returncode == 0
    # Once there is room again, the next run succeeds.
    _remount(small_filesystem, "nr_inodes=10000")
    assert cli("run", "backup").returncode == 0


# --- a deduplicated checkpoint on a nearly full disk ----------------------------------------------


@pytest.fixture
def roomy_filesystem(sample):
    """A 24 MiB tmpfs on <state_dir>/backups: room for a few MB of database, then filled at will."""
    with mounted_tmpfs(sample.state_dir / "backups", "24m") as mount_point:
        yield mount_point


def _leave_free(mount_point: Path, free_bytes: int) -> None:
    """Size a filler file on the tmpfs so that `free_bytes` are left."""
    filler = mount_point / "filler"
    filler.unlink(missing_ok=True)
    stats = os.statvfs(mount_point)
    with open(filler, "wb") as handle:  # tmpfs allocates on write, not on truncate
        handle.write(b"\0" * max(0, stats.f_bavail * stats.f_frsize - free_bytes))


def _pack_leftovers(mount_point: Path) -> list[str]:
    packs = mount_point / chunk_store.STORE_DIR / chunk_store.PACKS_DIR
    return sorted(entry.name for entry in packs.iterdir() if entry.name.startswith(".tmp-"))


def test_a_deduplicated_checkpoint_needs_room_for_its_new_pages_not_the_whole_file(
    sample, cli, roomy_filesystem
):
    pad_database(sample.db_path, rows=4000)
    database = sample.db_path.stat().st_size
    assert database > 4 * 2**20  # so that half of it is more than the margins below
    first = json.loads(cli("--json", "run", "backup").stdout)
    assert first["status"] == "ok", first
    # The agent writes a little; the disk then has room for about half the file, not all of it.
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.executemany(
            "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance)"
            " VALUES (?, ?, 'conversation', '2026-12-02T08:00:00', 'today', 0.5)",
            [
                (f"today-{number}", f"a short note {number} about the garden")
                for number in range(20)
            ],
        )
    connection.close()
    _leave_free(roomy_filesystem, database // 2 + 3 * 2**20)
    small = cli("--json", "run", "backup")
    result = json.loads(small.stdout)
    assert small.returncode == 0 and result["status"] == "ok", result
    assert cli("backup", "verify", result["checkpoint"]).returncode == 0

    # Now most pages change: more new pages than the disk has room for. The checkpoint stops while
    # it writes them, names the space, and leaves no pack behind; the earlier ones still verify.
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.execute(
            "UPDATE working_memory SET content = content || ' revised' WHERE session_id = 'padding'"
        )
    connection.close()
    checkpoints = sorted(
        entry.name for entry in roomy_filesystem.iterdir() if catalog.valid_name(entry.name)
    )
    _leave_free(roomy_filesystem, database // 2 + 3 * 2**20)
    large = cli("--json", "run", "backup")
    refused = json.loads(large.stdout)
    assert large.returncode == 1 and refused["status"] == "failed", refused
    assert "checkpoint refused" in refused["error"] and "MiB free at" in refused["error"]
    assert "partial checkpoint was removed" in refused["error"]
    assert {warning["code"] for warning in refused["warnings"]} >= {"backup-disk-full"}
    assert _leftovers(roomy_filesystem) == [] and _pack_leftovers(roomy_filesystem) == []
    assert (
        sorted(entry.name for entry in roomy_filesystem.iterdir() if catalog.valid_name(entry.name))
        == checkpoints
    )
    for name in checkpoints:
        assert cli("backup", "verify", name).returncode == 0, name
