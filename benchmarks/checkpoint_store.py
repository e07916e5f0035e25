"""Benchmark: a pre-write checkpoint into the deduplicated store against a bare ``sqlite3 .backup``,
side by side, and the size of seven daily checkpoints at 1% churn a day against one database.

On a generated Mnemosyne-schema database (generate_database.py; copied into the work folder, so
the churn never touches the generated file) it measures in one run:

1. time: for --repeat rounds, 1% churn (half new memories through Mnemosyne's FTS triggers, half
   recall bumps on existing ones, as the agent's recalls do), then in alternating order the bare
   ``sqlite3 DB ".backup FILE"`` and our pre-write checkpoint through the real path (the checkpoint
   worker child, ``backup.layout: deduplicated``, the store holding the previous one); medians;
   with --full-copy also the full-copy checkpoint (copy + integrity_check + hashes) for context;
2. size: seven days of 1% churn, one checkpoint a day, retention applied: the store and the
   checkpoint folders against the database's size;
3. with --chunk-kib, the bytes a checkpoint after 1% churn writes at each chunk size;
4. with --days N, N days of churn and one checkpoint a day, retention applied, into two stores side
   by side: one compacted after retention as ``run backup`` does (``backup.compact_dead_share``
   0.3), one not; the size of each against the database, and compaction's time and bytes.

    python benchmarks/checkpoint_store.py --size-mb 100
    python benchmarks/checkpoint_store.py --size-mb 1000 --repeat 3
    python benchmarks/checkpoint_store.py --size-mb 100 --repeat 1 --skip-seven --days 60
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import apsw

TARGETS = {"checkpoint_vs_cli": 1.5, "seven_vs_db": 1.5}


def churn(db: Path, fraction: float, seed: int) -> int:
    """Change `fraction` of the working memories: half new rows, half recall bumps; return rows."""
    rng = random.Random(seed)
    connection = apsw.Connection(str(db))
    connection.set_busy_timeout(5000)
    (count,) = connection.execute("SELECT count(*) FROM working_memory").fetchone()
    (top,) = connection.execute("SELECT max(rowid) FROM working_memory").fetchone()
    changed = max(2, int(count * fraction))
    words = [row[0] for row in connection.execute("SELECT content FROM working_memory LIMIT 200")]
    vocabulary = " ".join(words).split()
    with connection:
        connection.executemany(
            "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance)"
            " VALUES (?, ?, 'conversation', ?, ?, ?)",
            [
                (
                    f"churn-{seed}-{number}",
                    " ".join(rng.choices(vocabulary, k=rng.randint(25, 70))),
                    f"2026-12-{1 + seed % 28:02d}T10:00:00",
                    f"session-churn-{seed}-{number // 40}",
                    round(rng.random(), 3),
                )
                for number in range(changed // 2)
            ],
        )
        connection.executemany(
            "UPDATE working_memory SET recall_count = recall_count + 1, last_recalled = ?"
            " WHERE rowid = ?",
            [
                (f"2026-12-{1 + seed % 28:02d}T11:00:00", rng.randint(1, top))
                for _ in range(changed // 2)
            ],
        )
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return changed


def measure(command: list[str], stdin: bytes | None = None, env=None) -> tuple[float, bytes]:
    """Wall seconds of `command` (and its stdout); exits when it fails."""
    started = time.perf_counter()
    completed = subprocess.run(command, input=stdin, capture_output=True, env=env)
    wall = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{command[:3]} failed: {completed.stderr.decode()[-500:]}")
    return wall, completed.stdout


def bare_backup(db: Path, work: Path, sqlite3: str) -> float:
    target = work / "cli-copy.db"
    target.unlink(missing_ok=True)
    wall, _ = measure([sqlite3, str(db), f".backup '{target}'"])
    target.unlink(missing_ok=True)
    return wall


def checkpoint(db: Path, state: Path, layout: str, moment: str) -> tuple[float, dict]:
    """One pre-write checkpoint through the checkpoint worker child, as a job's hook takes it."""
    payload = {
        "db": str(db),
        "state_dir": str(state),
        "memory_blocks_dir": str(state / "no-blocks"),
        "kind": "pre-write",
        "job": "memory-maintain",
        "moment": moment,
        "backup": {"layout": layout},
    }
    wall, out = measure(
        [sys.executable, "-m", "mnemo_ops.checkpoints.worker"], json.dumps(payload).encode()
    )
    messages = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    answer = next(message["data"] for message in messages if message.get("kind") == "result")
    if "error" in answer:
        raise SystemExit(f"checkpoint failed: {answer['error']}")
    return wall, answer["stats"]


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files under `path`."""
    return sum(
        (Path(folder) / name).stat().st_size
        for folder, _dirs, files in os.walk(path)
        for name in files
    )


def seven_days(db: Path, work: Path, fraction: float) -> dict:
    """Seven daily checkpoints at `fraction` churn a day, retention applied; sizes."""
    from datetime import UTC, datetime, timedelta

    from freezegun import freeze_time

    from mnemo_ops.checkpoints import catalog
    from mnemo_ops.checkpoints.create import create_checkpoint

    state = work / "seven-state"
    shutil.rmtree(state, ignore_errors=True)
    settings = _settings(db, work, state)
    start = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    written = []
    for day in range(7):
        if day:
            churn(db, fraction, seed=100 + day)
        with freeze_time(start + timedelta(days=day)):
            # kind pre-write: the size does not depend on the integrity_check a daily also runs
            outcome = create_checkpoint(settings, "pre-write", job="memory-maintain")
            catalog.apply_retention(settings)
        written.append(outcome.stats["new_bytes"])
    kept = [info.name for info in catalog.list_checkpoints(settings)]
    backups = tree_bytes(settings.backups_dir)
    size = db.stat().st_size
    shutil.rmtree(state, ignore_errors=True)
    return {
        "kept": len(kept),
        "backups_bytes": backups,
        "db_bytes": size,
        "seven_vs_db": round(backups / size, 3),
        "written_per_day_percent": [round(100 * value / size, 2) for value in written],
    }


def _settings(db: Path, work: Path, state: Path):
    from mnemo_ops.settings import Config, Settings

    return Settings(
        db_path=db,
        state_dir=state,
        config_file=None,
        hermes_home=work,
        memory_blocks_dir=work / "no-blocks",
        owner="default",
        config=Config(),
        sources={},
    )


def long_run(db: Path, work: Path, fraction: float, days: int, dead_share: float) -> dict:
    """`days` daily checkpoints at `fraction` churn, retention applied, into a store compacted
    after retention and one that is not, side by side; sizes, compaction's time and bytes."""
    from datetime import UTC, datetime, timedelta

    from freezegun import freeze_time

    from mnemo_ops.checkpoints import catalog, chunk_store, compaction
    from mnemo_ops.checkpoints.create import create_checkpoint

    stores = {}
    for name in ("compacted", "plain"):
        shutil.rmtree(work / f"long-{name}", ignore_errors=True)
        stores[name] = _settings(db, work, work / f"long-{name}")
    start = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    compact_s, compact_bytes, checkpoint_bytes, runs = 0.0, 0, 0, 0
    ratios: dict[str, list[float]] = {name: [] for name in stores}
    for day in range(days):
        if day:
            churn(db, fraction, seed=1000 + day)
        with freeze_time(start + timedelta(days=day)):
            for settings in stores.values():
                outcome = create_checkpoint(settings, "pre-write", job="memory-maintain")
                catalog.apply_retention(settings)
        checkpoint_bytes += outcome.stats["new_bytes"]
        # Outside freeze_time, which stops perf_counter too.
        started = time.perf_counter()
        done = compaction.compact(stores["compacted"], dead_share)
        if done.pack is not None:
            compact_s += time.perf_counter() - started
            compact_bytes += done.plan.bytes_written
            runs += 1
        for name, settings in stores.items():
            size = chunk_store.ChunkStore(settings.backups_dir).size_bytes()
            ratios[name].append(size / db.stat().st_size)
        print(
            f"  day {day + 1:>3}: store / database  compacted {ratios['compacted'][-1]:.2f}x, "
            f"not compacted {ratios['plain'][-1]:.2f}x",
            flush=True,
        )
    for settings in stores.values():
        shutil.rmtree(settings.state_dir, ignore_errors=True)
    return {
        "days": days,
        "dead_share": dead_share,
        "compacted_vs_db": round(ratios["compacted"][-1], 3),
        "plain_vs_db": round(ratios["plain"][-1], 3),
        "compacted_max_vs_db": round(max(ratios["compacted"]), 3),
        "compactions": runs,
        "compaction_s": round(compact_s, 2),
        "compaction_bytes": compact_bytes,
        "checkpoint_bytes": checkpoint_bytes,
    }


def chunk_sizes(db: Path, work: Path, sizes: list[int], fraction: float) -> list[dict]:
    """The bytes a checkpoint after `fraction` churn writes, for each chunk size (KiB)."""
    from mnemo_ops.checkpoints import chunk_store

    rows = []
    copy = work / "chunks-db" / "mnemosyne.db"
    for kib in sizes:
        shutil.rmtree(copy.parent, ignore_errors=True)
        copy.parent.mkdir(parents=True)
        shutil.copyfile(db, copy)
        store = chunk_store.ChunkStore(work / f"chunks-{kib}")
        shutil.rmtree(store.root.parent, ignore_errors=True)
        store.root.parent.mkdir(parents=True)
        chunk_store.snapshot_to_store(copy, store, chunk_bytes=kib * 1024)
        churn(copy, fraction, seed=7)
        started = time.perf_counter()
        second, _ = chunk_store.snapshot_to_store(copy, store, chunk_bytes=kib * 1024)
        rows.append(
            {
                "chunk_kib": kib,
                "chunks": len(second.digests),
                "written_percent": round(100 * second.new_bytes / second.size, 2),
                "seconds": round(time.perf_counter() - started, 2),
            }
        )
        shutil.rmtree(store.root.parent, ignore_errors=True)
    shutil.rmtree(copy.parent, ignore_errors=True)
    return rows


def main() -> None:
    """Generate (or reuse) the database, run the measures, print the ratios against the targets."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/mnemo-ops-bench"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--churn", type=float, default=0.01, help="fraction of rows a day")
    parser.add_argument("--full-copy", action="store_true", help="also time the full-copy layout")
    parser.add_argument("--chunk-kib", type=int, nargs="*", default=[])
    parser.add_argument("--skip-seven", action="store_true")
    parser.add_argument("--days", type=int, default=0, help="the long run with compaction")
    parser.add_argument("--dead-share", type=float, default=0.3, help="compaction's threshold")
    arguments = parser.parse_args()
    generated = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("generate_database.py")),
            "--size-mb",
            str(arguments.size_mb),
            "--dir",
            str(arguments.dir.absolute()),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    source = Path(generated.stdout.strip().splitlines()[-1])
    work = arguments.dir.absolute() / f"store-{arguments.size_mb}mb"
    shutil.rmtree(work, ignore_errors=True)
    (work / "data").mkdir(parents=True)
    db = work / "data" / "mnemosyne.db"
    shutil.copyfile(source, db)
    sqlite3 = shutil.which("sqlite3")
    if sqlite3 is None:
        raise SystemExit("the sqlite3 command-line shell is needed (apt-get install sqlite3)")
    (count,) = apsw.Connection(str(db)).execute("SELECT count(*) FROM working_memory").fetchone()
    print(f"database: {db} ({db.stat().st_size / 1e6:,.0f} MB, {count:,} working rows)")
    report: dict = {"size_mb": round(db.stat().st_size / 1e6), "working_rows": count}

    state = work / "state"
    first_wall, first = checkpoint(db, state, "deduplicated", "2026-12-01T00:00:00+00:00")
    print(f"first deduplicated checkpoint (empty store): {first_wall:.2f} s")
    report["first_checkpoint_s"] = round(first_wall, 2)
    cli_times, ours, full = [], [], []
    for number in range(arguments.repeat):
        churn(db, arguments.churn, seed=number + 1)
        moment = f"2026-12-01T{1 + number:02d}:00:00+00:00"
        steps = [
            lambda: cli_times.append(bare_backup(db, work, sqlite3)),
            lambda moment=moment: ours.append(checkpoint(db, state, "deduplicated", moment)),
        ]
        if number % 2:
            steps.reverse()
        for step in steps:
            step()
        if arguments.full_copy:
            full_state = work / "full-state"
            shutil.rmtree(full_state, ignore_errors=True)
            full.append(checkpoint(db, full_state, "full-copy", moment))
            shutil.rmtree(full_state, ignore_errors=True)
    cli_median = statistics.median(cli_times)
    our_median = statistics.median(wall for wall, _ in ours)
    written = statistics.median(stats["new_bytes"] for _, stats in ours)
    report.update(
        {
            "cli_backup_s": round(cli_median, 2),
            "checkpoint_s": round(our_median, 2),
            "checkpoint_vs_cli": round(our_median / cli_median, 2),
            "written_percent": round(100 * written / db.stat().st_size, 2),
            "copy_s": statistics.median(stats["copy_s"] for _, stats in ours),
        }
    )
    print(
        f"after {arguments.churn:.0%} churn: sqlite3 .backup {cli_median:.2f} s, our pre-write "
        f"checkpoint {our_median:.2f} s (writes {report['written_percent']}% of the file)"
    )
    if full:
        full_median = statistics.median(wall for wall, _ in full)
        report["full_copy_s"] = round(full_median, 2)
        report["full_copy_vs_cli"] = round(full_median / cli_median, 2)
        print(f"full-copy checkpoint (copy, integrity_check, hashes): {full_median:.2f} s")
    shutil.rmtree(state, ignore_errors=True)
    if not arguments.skip_seven:
        report["seven"] = seven_days(db, work, arguments.churn)
        print(
            f"seven daily checkpoints at {arguments.churn:.0%} churn: "
            f"{report['seven']['backups_bytes'] / 1e6:,.0f} MB for a "
            f"{report['seven']['db_bytes'] / 1e6:,.0f} MB database"
        )
    if arguments.chunk_kib:
        report["chunk_sizes"] = chunk_sizes(db, work, arguments.chunk_kib, arguments.churn)
        for row in report["chunk_sizes"]:
            print(f"  chunk {row['chunk_kib']:>5} KiB: writes {row['written_percent']}%")
    if arguments.days:
        report["long_run"] = long_run(
            db, work, arguments.churn, arguments.days, arguments.dead_share
        )
        run = report["long_run"]
        print(
            f"{run['days']} days: store {run['compacted_vs_db']:.2f}x the database compacted "
            f"(at most {run['compacted_max_vs_db']:.2f}x), {run['plain_vs_db']:.2f}x not; "
            f"{run['compactions']} compactions, {run['compaction_s']:.1f} s, "
            f"{run['compaction_bytes'] / 1e6:,.0f} MB copied (checkpoints wrote "
            f"{run['checkpoint_bytes'] / 1e6:,.0f} MB)"
        )
    print("\nratios (target in brackets):")
    verdict = "ok" if report["checkpoint_vs_cli"] <= TARGETS["checkpoint_vs_cli"] else "MISSED"
    print(
        f"  pre-write checkpoint / sqlite3 .backup  {report['checkpoint_vs_cli']:.2f}x [<= 1.5x] {verdict}"
    )
    if "seven" in report:
        ratio = report["seven"]["seven_vs_db"]
        verdict = "ok" if ratio <= TARGETS["seven_vs_db"] else "MISSED"
        print(f"  seven checkpoints / one database        {ratio:.2f}x [<= 1.5x] {verdict}")
    print(json.dumps(report))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
