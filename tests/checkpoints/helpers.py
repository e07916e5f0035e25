"""What the checkpoint tests share: a database made corrupt the way a failing disk does it, and
checkpoint folders made by hand."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path


def corrupt_an_index(db_path: Path, index: str = "idx_timestamp") -> None:
    """Overwrite the body of one index page (the database must have no WAL content)."""
    connection = sqlite3.connect(db_path)
    (root,) = connection.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = ?", (index,)
    ).fetchone()
    (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    with db_path.open("r+b") as handle:
        handle.seek((root - 1) * page_size + 8)
        handle.write(b"\xa5" * (page_size - 8))


def write_checkpoint(backups: Path, name: str, created_at: str, ok: bool) -> None:
    """A checkpoint folder as the backup job lays it out (docs/contracts.md), made by hand."""
    folder = backups / name
    folder.mkdir(parents=True, mode=0o700)
    manifest = {
        "name": name,
        "kind": "daily",
        "job": "backup",
        "created_at": created_at,
        "files": {},
        "verification": {
            "ok": ok,
            "integrity_check": "ok" if ok else "malformed",
            "checked_at": created_at,
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
