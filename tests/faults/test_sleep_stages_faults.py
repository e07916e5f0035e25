"""The sleep stages under faults: kill -9 before, inside or after any write batch, then the next run
converges to exactly what one uninterrupted run makes; and a night beside a live agent writing
through Mnemosyne, which sees no error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time

from mnemo_ops.core import state
from mnemo_ops.jobs.evening_batch.sleep import edges, store
from tests.conftest import copy_sample
from tests.jobs.evening_batch.sleep.conftest import chatter, query, run_sleep, settings_for
from tests.jobs.evening_batch.sleep.homes import build
from tests.jobs.evening_batch.sleep.test_reinforcement import (
    CANONICAL,
    CONTRADICTIONS,
    RESTATEMENTS,
    TRIPLES,
)

EDGES_ON = "sleep:\n  confirmation_edges: true\n"
"""Every kind of write of the stages, the optional confirmation edges included, is killed here."""
ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("live_writer.py")
CHATTER = [
    {
        "key": f"chatter-{number}",
        # Content-free: forgetting archives only rows that carry no fact.
        "content": chatter(number),
        "importance": 0.1,
        "days_ago": 150,
        "session": f"old-{number % 4}",
    }
    for number in range(30)
]
MOMENT = datetime.now().replace(microsecond=0)
NIGHTS = {1: MOMENT, 2: MOMENT + timedelta(days=1)}
"""Night 1 confirms, closes contradictions and links; night 2 archives the chatter and downscales."""
WRITES = {1: 3, 2: 2}
"""Write batches per night: confirmations, contradictions, edges; then forgetting, edges."""


@pytest.fixture(scope="module")
def fault_template(tmp_path_factory):
    spec = {
        "memories": RESTATEMENTS + CONTRADICTIONS + CHATTER,
        "triples": TRIPLES,
        "canonical": CANONICAL,
    }
    return build(tmp_path_factory.mktemp("faults") / "home", spec)[0]


def picture(layout) -> dict:
    """What a night leaves, without the times of day it ran at."""
    with freeze_time(NIGHTS[2] + timedelta(hours=1), tick=True):
        now = datetime.now().isoformat()
    working = {
        row[0]: (bool(row[1]) and row[1] <= now, row[2])
        for row in query(
            layout.db_path, "SELECT id, valid_until, superseded_by FROM working_memory"
        )
    }
    ours = {
        (row[0], row[1], row[2]): round(row[3], 9)
        for row in query(
            layout.db_path,
            f"SELECT source, target, edge_type, weight FROM graph_edges WHERE {edges.OWNED_CONDITION}",
        )
    }
    foreign = query(
        layout.db_path,
        f"SELECT id, edge_type, weight FROM graph_edges WHERE NOT ({edges.OWNED_CONDITION}) ORDER BY id",
    )
    db = state.open_state(layout.state_dir / "state.db")
    try:
        confirmations = sorted(
            db.execute(
                f"SELECT restatement_key, original_key FROM {store.CONFIRMATIONS}"
            ).fetchall()
        )
        archive = sorted(
            db.execute(
                f"SELECT memory_key, reason, night FROM {store.ARCHIVE} WHERE applied = 1"
            ).fetchall()
        )
        memories = sorted(
            db.execute(
                f"SELECT memory_key, live, confirmations, reinforced, round(prominence, 9), band "
                f"FROM {store.MEMORIES}"
            ).fetchall()
        )
    finally:
        db.close()
    integrity = query(layout.db_path, "PRAGMA integrity_check")[0][0]
    return {
        "working": working,
        "ours": ours,
        "foreign": foreign,
        "confirmations": confirmations,
        "archive": archive,
        "memories": memories,
        "integrity": integrity,
    }


def night(layout, tmp_path, number: int, minutes_later: int = 0):
    """Night `number`, `minutes_later` into it (a rerun comes after the killed run: time goes on)."""
    with freeze_time(NIGHTS[number] + timedelta(minutes=minutes_later), tick=True):
        result = run_sleep(settings_for(layout, tmp_path, EDGES_ON))
    assert result.status == "ok", result.error
    return result


@pytest.fixture(scope="module")
def reference(fault_template, tmp_path_factory):
    folder = tmp_path_factory.mktemp("reference")
    layout = copy_sample(fault_template, folder / "home")
    first = night(layout, folder, 1)
    after_first = picture(layout)
    # The home as night 1 left it: where every kill in night 2 starts (one night 1 for all of them).
    first_night_home = copy_sample(layout, folder / "after-night-1")
    second = night(layout, folder, 2)
    assert first.changes["confirmations"] == 3 and first.changes["memories_superseded"] == 3
    assert second.changes["memories_archived"] == 30 and second.changes["edges_downscaled"] == 6
    return {1: after_first, 2: picture(layout), "after_night_1": first_night_home}


CASES = [
    (number, call, point)
    for number in (1, 2)
    for call in range(WRITES[number])
    for point in ("before", "inside", "after")
]


@pytest.mark.parametrize(("number", "call", "point"), CASES)
def test_kill_9_at_any_write_then_the_next_run_converges(
    fault_template, reference, tmp_path, number, call, point
):
    start = fault_template if number == 1 else reference["after_night_1"]
    layout = copy_sample(start, tmp_path / "home")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.faults.sleep_kill_child",
            str(layout.directory),
            NIGHTS[number].isoformat(),
            str(call),
            point,
        ],
        cwd=ROOT,
        env={**layout.environ(), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == -9, (completed.stdout, completed.stderr[-2000:])
    middle = picture(layout)
    assert middle["integrity"] == "ok"
    assert set(middle["working"]) == set(reference[number]["working"])  # nothing lost
    assert middle["foreign"] == reference[number]["foreign"]  # Mnemosyne's edges untouched
    rerun = night(layout, tmp_path, number, minutes_later=10)
    assert picture(layout) == reference[number]
    again = night(layout, tmp_path, number, minutes_later=20)
    assert all(count == 0 for count in again.changes.values()), (rerun.changes, again.changes)


def test_a_night_beside_a_live_agent(fault_template, tmp_path):
    layout = copy_sample(fault_template, tmp_path / "home")
    night(layout, tmp_path, 1)
    stop_file, report_file = layout.directory / "stop", layout.directory / "writer.json"
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(layout.db_path), str(stop_file), str(report_file)],
        env=layout.environ(),
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{report_file}.started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        results = [night(layout, tmp_path, 2, minutes_later=10 * run) for run in range(3)]
    finally:
        stop_file.write_text("stop")
        writer.wait(timeout=60)
    report = json.loads(report_file.read_text())
    assert report["errors"] == [], json.dumps(report["details"], indent=1)
    assert report["written"], "the writer wrote nothing: the test proved nothing"
    assert results[0].changes["memories_archived"] == 30
    present = {row[0] for row in query(layout.db_path, "SELECT id FROM working_memory")}
    assert set(report["written"]) <= present
    assert os.path.exists(layout.db_path)
