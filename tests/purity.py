"""Dry-run purity: hash everything a dry run must leave byte-identical, before and after.

What is compared: the database file; its WAL (a WAL that is absent and one that is empty count as
the same: SQLite creates an empty one when a read-only connection opens a WAL database, and that
changes no data); every other file beside the database (nothing new may appear next to it); the
whole state dir (paths, modes, contents); the memory blocks folder; and the sample's HOME. The
``-shm`` file is SQLite's shared-memory index, which every reader updates, so it is skipped.

The hashing runs in a child process: opening and closing the database file in the test process would
drop the POSIX locks of any SQLite connection that process holds on it (docs/contracts.md, "The writer lock").
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from mnemo_ops.mnemosyne.sample_home import SampleLayout


def _hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _tree(root: Path) -> dict[str, str]:
    if not root.exists():
        return {}
    entries = {}
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        mode = oct(path.lstat().st_mode)
        if path.is_symlink():
            entries[relative] = f"link {path.readlink()} {mode}"
        elif path.is_dir():
            entries[relative] = f"dir {mode}"
        else:
            entries[relative] = f"file {_hash(path)} {mode}"
    return entries


def snapshot(
    db_path: Path, state_dir: Path, memory_blocks_dir: Path, extra_dirs: tuple[Path, ...] = ()
) -> dict:
    """A comparable picture of everything a dry run must not change (computed in a child process)."""
    arguments = json.dumps(
        [str(db_path), str(state_dir), str(memory_blocks_dir), [str(d) for d in extra_dirs]]
    )
    completed = subprocess.run(
        [sys.executable, __file__, arguments], capture_output=True, text=True, check=True
    )
    return json.loads(completed.stdout)


def _snapshot_here(
    db_path: Path, state_dir: Path, memory_blocks_dir: Path, extra_dirs: tuple[Path, ...] = ()
) -> dict:
    wal = Path(f"{db_path}-wal")
    wal_state = _hash(wal) if wal.exists() and wal.stat().st_size else "empty"
    beside_db = {
        name: value
        for name, value in _tree(db_path.parent).items()
        if name not in (db_path.name, f"{db_path.name}-wal", f"{db_path.name}-shm")
    }
    picture = {
        "db": _hash(db_path),
        "wal": wal_state,
        "beside_db": beside_db,
        "state_dir": _tree(state_dir),
        "memory_blocks": _tree(memory_blocks_dir),
    }
    for directory in extra_dirs:
        picture[str(directory)] = _tree(directory)
    return picture


def sample_snapshot(layout: SampleLayout) -> dict:
    """`snapshot` for a sample home, including its HOME folder."""
    return snapshot(
        layout.db_path,
        layout.state_dir,
        layout.memory_blocks_dir,
        extra_dirs=(layout.directory / "home",),
    )


def assert_unchanged(before: dict, after: dict) -> None:
    """Fail with the first differing key when two snapshots differ."""
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            if isinstance(before.get(key), dict) and isinstance(after.get(key), dict):
                changed = sorted(
                    k
                    for k in set(before[key]) | set(after[key])
                    if before[key].get(k) != after[key].get(k)
                )
                raise AssertionError(f"dry run changed {key}: {changed[:10]}")
            raise AssertionError(
                f"dry run changed {key}: {before.get(key)!r} -> {after.get(key)!r}"
            )


if __name__ == "__main__":
    db, state, blocks, extras = json.loads(sys.argv[1])
    print(
        json.dumps(
            _snapshot_here(Path(db), Path(state), Path(blocks), tuple(Path(d) for d in extras))
        )
    )
