"""memory-block-migrate under faults: kill -9 at random moments, and the live agent writing the block
(the Hermes way, in a real separate process) and the database (through Mnemosyne) while it runs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.block_migration.helpers import (
    GUARD_OFF,
    LIMITS,
    block_entries,
    block_usage,
    install_full_blocks,
    live_stored_contents,
    run_migrate,
    stored_rows,
    write_config,
)

HERMES_WRITER = Path(__file__).parents[1] / "memory_blocks" / "hermes_writer.py"
LIVE_WRITER = Path(__file__).with_name("live_writer.py")


def _assert_nothing_lost(sample, expected: dict[str, list[str]]) -> None:
    """Every entry is in its file or (live, once) in the database; no key is stored twice."""
    keys = Counter(row["key"] for row in stored_rows(sample.db_path))
    assert not [key for key, count in keys.items() if count > 1], keys
    stored = live_stored_contents(sample.db_path)
    for name, entries in expected.items():
        present = set(block_entries(sample, name))
        lost = [entry for entry in entries if entry not in present and stored[entry] != 1]
        assert lost == [], (name, lost)


def _migrate_process(sample, config) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mnemo_ops",
            "--config",
            str(config),
            "--json",
            "run",
            "memory-block-migrate",
        ],
        env=sample.environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


WORKERS = (b"block_migration.store_worker", b"engines.mnemosyne_worker")


def _worker_started(pid: int) -> bool:
    """True once the process runs its store worker or its recall worker (not the checkpoint's)."""
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != pid:
                continue
            command = (stat_file.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if any(worker in command for worker in WORKERS):
            return True
    return False


def test_kill_dash_nine_at_random_moments_then_the_rerun_converges(sample, tmp_path):
    """Kills land at random moments: during start-up and planning, and (after the run started its
    store or recall worker) while entries are stored, recalled or the files rewritten. When a run
    gets through, the agent writes the full blocks back and the next run has work again (their
    entries are then already stored: the rerun path)."""
    original = install_full_blocks(sample)
    config = write_config(tmp_path, GUARD_OFF)
    randomness = random.Random(20261203)
    kills, progress = 0, []
    for number in range(8):
        if block_usage(sample, "MEMORY.md") < 0.6 and block_usage(sample, "USER.md") < 0.6:
            install_full_blocks(sample)
        process = _migrate_process(sample, config)
        if number % 3 == 0:
            time.sleep(randomness.uniform(0.3, 3.5))
        else:
            deadline = time.monotonic() + 60
            while process.poll() is None and not _worker_started(process.pid):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            time.sleep(randomness.uniform(0.0, 4.0))
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            kills += 1
        process.communicate(timeout=60)
        _assert_nothing_lost(sample, original)
        progress.append(
            (
                len(live_stored_contents(sample.db_path)),
                sum(len(original[n]) - len(block_entries(sample, n)) for n in LIMITS),
            )
        )
    print("stored, moved after each run:", progress, "kills", kills)
    assert kills >= 4, progress  # the kills really interrupted runs
    assert any(stored for stored, _ in progress), progress  # some landed after the first store
    completed, data = run_migrate(sample, config=config)
    assert completed.returncode == 0, (data.get("error"), completed.stderr[-2000:])
    _assert_nothing_lost(sample, original)
    assert block_usage(sample, "MEMORY.md") < 0.6 and block_usage(sample, "USER.md") < 0.6
    stored = live_stored_contents(sample.db_path)
    moved = [e for name in LIMITS for e in original[name] if e not in block_entries(sample, name)]
    assert set(moved) <= set(stored) and set(stored.values()) == {1}
    # A killed rewrite's temp file never stays behind once a run got through.
    assert not list(sample.memory_blocks_dir.glob(".mnemo-ops-*"))


def test_the_agent_writing_the_block_and_the_database_meanwhile_loses_nothing(sample, tmp_path):
    original = install_full_blocks(sample)
    config = write_config(tmp_path, GUARD_OFF)
    stop = tmp_path / "stop"
    log = tmp_path / "written.txt"
    log.touch()
    block = sample.memory_blocks_dir / "MEMORY.md"
    hermes = subprocess.Popen(
        [sys.executable, str(HERMES_WRITER), "loop", str(block), "2200", str(stop), str(log)]
    )
    report = tmp_path / "agent.json"
    agent = subprocess.Popen(
        [sys.executable, str(LIVE_WRITER), str(sample.db_path), str(stop), str(report)],
        env=sample.environ(),
    )
    try:
        deadline = time.monotonic() + 60
        while not log.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        results = []
        for _ in range(2):
            written_before = len(log.read_text().splitlines())
            completed, data = run_migrate(sample, config=config)
            assert completed.returncode == 0, (data.get("error"), completed.stderr[-2000:])
            results.append((data, len(log.read_text().splitlines()) - written_before))
    finally:
        stop.write_text("stop")
        hermes.wait(timeout=60)
        agent.wait(timeout=60)
    written = log.read_text().splitlines()
    assert written and all(added > 0 for _, added in results)  # the agent wrote during each run
    assert sum(data["changes"]["entries_moved"] for data, _ in results) > 0
    _assert_nothing_lost(sample, {"MEMORY.md": original["MEMORY.md"] + written})
    _assert_nothing_lost(sample, {"USER.md": original["USER.md"]})
    agent_report = json.loads(report.read_text())
    assert agent_report["errors"] == [] and agent_report["written"]
