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
from collections.abc import Callable
from pathlib import Path

from tests.jobs.memory_block_migrate.helpers import (
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


STORE_WORKER = b"mnemo_ops.jobs.memory_block_migrate.store_worker"
RECALL_WORKER = b"mnemo_ops.mnemosyne.worker"


def _child_running(pid: int, module: bytes) -> bool:
    """True while a child of `pid` runs `module` (the store worker or the recall worker)."""
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != pid:
                continue
            command = (stat_file.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if module in command:
            return True
    return False


def _quarantined_copies(sample) -> int:
    folder = sample.state_dir / "quarantine"
    return sum(1 for name in LIMITS for _ in folder.rglob(name)) if folder.exists() else 0


KILL_POINTS = ("start-up", "storing", "recalling", "rewriting")
"""Where a kill lands. Each point is recognised by what the run has visibly done, not by a time
after its start, so the kills land in every step on a fast machine and on a loaded one alike (the
4.0 line starts its workers seconds later than 3.15)."""


def _kill_at(process: subprocess.Popen, point: str, sample, randomness: random.Random) -> str:
    """Wait until the run reaches `point` (plus a random extra moment) and kill -9 it; return where
    the kill landed ("completed" when the run ended first)."""
    stored_before = sum(live_stored_contents(sample.db_path).values())
    copies_before = _quarantined_copies(sample)
    reached: dict[str, Callable[[], bool]] = {
        "start-up": lambda: True,
        # A new row is committed: the kill lands among the entries being stored.
        "storing": lambda: (
            sum(live_stored_contents(sample.db_path).values()) > stored_before
            or _child_running(process.pid, RECALL_WORKER)
        ),
        "recalling": lambda: _child_running(process.pid, RECALL_WORKER),
        # A copy went into quarantine: the kill lands around a block's rewrite.
        "rewriting": lambda: _quarantined_copies(sample) > copies_before,
    }
    extra = {"start-up": (0.2, 2.5), "storing": (0.0, 0.3), "recalling": (0.0, 1.0)}
    deadline = time.monotonic() + 120
    while process.poll() is None and not reached[point]():
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    low, high = extra.get(point, (0.0, 0.0))
    time.sleep(randomness.uniform(low, high))
    if process.poll() is not None:
        return "completed"
    os.kill(process.pid, signal.SIGKILL)
    return point


def test_kill_dash_nine_at_random_moments_then_the_rerun_converges(sample, tmp_path):
    """Kills land in each step: start-up and planning, while entries are stored, while they are
    recalled, and around the rewrite of a block. When a run gets through, the agent writes the
    full blocks back and the next run has work again (their entries are then already stored: the
    rerun path). After every run, every entry is in its file or once, live, in the database."""
    original = install_full_blocks(sample)
    config = write_config(tmp_path, GUARD_OFF)
    randomness = random.Random(20261203)
    landed = []
    for point in (*KILL_POINTS, "storing", "recalling"):
        if block_usage(sample, "MEMORY.md") < 0.6 and block_usage(sample, "USER.md") < 0.6:
            install_full_blocks(sample)
        process = _migrate_process(sample, config)
        landed.append(_kill_at(process, point, sample, randomness))
        process.communicate(timeout=60)
        _assert_nothing_lost(sample, original)
    print("kills landed:", landed)
    kills = [point for point in landed if point != "completed"]
    assert len(kills) >= 4, landed  # the kills really interrupted runs
    assert {"storing", "recalling"} <= set(kills), landed
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
