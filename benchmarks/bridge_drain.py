"""Benchmark: bridge-drain items/s vs ``mnemosyne import`` of the same items, side by side in one run.

Usage: python benchmarks/bridge_drain.py [--items 10000] [--sessions 10]

Two identical sample homes are built by the real Mnemosyne API. Into one, the items are dropped as
spool files (.jsonl, 1,000 items each) and drained with ``mnemo-ops run bridge-drain``; into the other,
the same items are written as a Mnemosyne export (format 1.3, ``working_memory`` and
``legacy_memories`` sections, as ``Mnemosyne.import_from_file`` reads it) and loaded with
``mnemosyne import``. Both are timed as whole CLI processes (start-up included) and both databases
are checked to hold every item once. What differs: the drain validates each item, checks its
idempotency key and calls ``Mnemosyne.remember`` (dedup, classification, temporal triple, graph and
veracity enrichment, legacy row); the import inserts prepared rows as they are, with no enrichment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mnemo_ops.mnemosyne.sample_home import build_sample  # noqa: E402


def make_items(count: int, sessions: int) -> list[dict]:
    """Distinct items spread over `sessions` sessions (Mnemosyne caps each session at 10,000 rows)."""
    return [
        {
            "content": f"benchmark memory {number}: the kettle was descaled on day {number % 365}",
            "source": "bridge",
            "importance": round((number % 10) / 10, 1),
            "veracity": "imported",
            "session_id": f"bench-{number % sessions}",
        }
        for number in range(count)
    ]


def drop_spool(layout, items: list[dict]) -> None:
    new = layout.state_dir / "queue" / "new"
    for path in new.iterdir():  # the sample's own three items would skew the count
        path.rename(layout.state_dir / "queue" / "tmp" / path.name)
    for start in range(0, len(items), 1000):
        chunk = items[start : start + 1000]
        (new / f"{1_700_000_000 + start}.bench.jsonl").write_text(
            "\n".join(json.dumps(item) for item in chunk) + "\n", encoding="utf-8"
        )


def write_export(path: Path, items: list[dict]) -> None:
    now = datetime.now().isoformat()
    rows = []
    for number, item in enumerate(items):
        memory_id = hashlib.sha256(f"{item['content']}{number}".encode()).hexdigest()[:16]
        rows.append(
            {
                "id": memory_id,
                "content": item["content"],
                "source": item["source"],
                "timestamp": now,
                "session_id": item["session_id"],
                "importance": item["importance"],
                "metadata_json": "{}",
                "scope": "session",
                "veracity": item["veracity"],
                "created_at": now,
            }
        )
    path.write_text(
        json.dumps(
            {
                "mnemosyne_export": {"version": "1.3", "export_date": now},
                "working_memory": rows,
                "legacy_memories": rows,
            }
        ),
        encoding="utf-8",
    )


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    completed = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        raise SystemExit(
            f"{command[0]} failed ({completed.returncode}): {completed.stderr.strip()[-500:]}"
        )
    return elapsed


def count_rows(db_path: Path) -> int:
    connection = sqlite3.connect(db_path)
    try:
        return connection.execute(
            "SELECT count(DISTINCT content) FROM working_memory "
            "WHERE content LIKE 'benchmark memory %'"
        ).fetchone()[0]
    finally:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=10)
    arguments = parser.parse_args()
    items = make_items(arguments.items, arguments.sessions)
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as directory:
        drain_home = build_sample(Path(directory) / "drain")
        import_home = build_sample(Path(directory) / "import")
        drop_spool(drain_home, items)
        export = Path(directory) / "export.json"
        write_export(export, items)
        mnemosyne = str(Path(sys.executable).with_name("mnemosyne"))

        drain_s = timed(
            [sys.executable, "-m", "mnemo_ops", "--json", "run", "bridge-drain"],
            drain_home.environ(),
        )
        import_s = timed([mnemosyne, "import", str(export)], import_home.environ())
        drained, imported = count_rows(drain_home.db_path), count_rows(import_home.db_path)
        if drained != len(items) or imported != len(items):
            raise SystemExit(
                f"row check failed: drained {drained}, imported {imported}, expected {len(items)}"
            )
    drain_rate, import_rate = len(items) / drain_s, len(items) / import_s
    print(
        f"items: {len(items)} over {arguments.sessions} sessions (both databases hold every item once)"
    )
    print(
        f"bridge-drain       {drain_rate:10,.0f} items/s  ({drain_s:.2f} s, validation + key check + "
        f"Mnemosyne.remember per item)"
    )
    print(
        f"mnemosyne import   {import_rate:10,.0f} items/s  ({import_s:.2f} s, prepared rows inserted as is)"
    )
    print(f"ratio drain/import: {drain_rate / import_rate:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
