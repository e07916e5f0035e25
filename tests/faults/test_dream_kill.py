"""kill -9 inside and right after an NREM summary's transaction and a REM edge batch: no half-written
summary (a summary and its derives edges land together or not at all), and the next run finishes the
night exactly as an uninterrupted one (same summaries, same edges, each once)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import copy_sample
from tests.jobs.evening_batch.sleep.conftest import query, settings_for
from tests.jobs.evening_batch.sleep.dreams import run_night
from tests.jobs.evening_batch.sleep.test_nrem_rem import dream_template

__all__ = ["dream_template"]  # the fixture, used by name below
ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("live_writer.py")


def picture(layout) -> dict:
    """What NREM and REM wrote: summaries (id, content, summary_of) and our new edges."""
    return {
        "summaries": query(
            layout.db_path,
            "SELECT id, content, summary_of, tier, timestamp FROM episodic_memory "
            "WHERE source = 'sleep-nrem' ORDER BY id",
        ),
        "edges": query(
            layout.db_path,
            "SELECT source, target, edge_type, weight FROM graph_edges WHERE edge_type IN "
            "('mnemo:derives', 'mnemo:extends') ORDER BY source, target, edge_type",
        ),
        "working": query(layout.db_path, "SELECT * FROM working_memory ORDER BY id"),
    }


@pytest.fixture(scope="module")
def reference(dream_template, tmp_path_factory):
    """The uninterrupted night's picture."""
    layout = copy_sample(dream_template[0], tmp_path_factory.mktemp("dream-reference") / "home")
    result = run_night(settings_for(layout, layout.directory))
    assert result.status == "ok" and result.changes["summaries_fused"] == 2
    return picture(layout)


@pytest.mark.parametrize(
    ("label", "call", "point"),
    [("sleep-nrem", 0, "inside"), ("sleep-nrem", 1, "after"), ("sleep-rem", 0, "inside")],
)
def test_a_killed_night_finishes_as_if_never_interrupted(
    dream_template, reference, tmp_path, label, call, point
):
    layout = copy_sample(dream_template[0], tmp_path / "home")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.faults.dream_kill_child",
            str(layout.directory),
            label,
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
    summary_ids = {row[0] for row in middle["summaries"]}
    derived_from = {edge[0] for edge in middle["edges"] if edge[2] == "mnemo:derives"}
    assert derived_from == summary_ids  # no summary without its edges, no edge without its summary
    assert middle["working"] == reference["working"]
    rerun = run_night(settings_for(layout, layout.directory))
    assert rerun.status == "ok", rerun.error
    assert picture(layout) == reference


def test_nrem_and_rem_beside_a_live_agent(dream_template, reference, tmp_path):
    """A live agent writes through Mnemosyne the whole night long: none of its writes fails, every
    one is kept, and the night writes what the quiet night wrote."""
    layout = copy_sample(dream_template[0], tmp_path / "home")
    stop_file, report_file = layout.directory / "stop", layout.directory / "writer.json"
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(layout.db_path), str(stop_file), str(report_file)],
        env=layout.environ(),
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{report_file}.started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = run_night(settings_for(layout, layout.directory))
    finally:
        stop_file.write_text("stop")
        writer.wait(timeout=60)
    assert result.status == "ok", result.error
    report = json.loads(report_file.read_text())
    assert report["errors"] == [], json.dumps(report["details"], indent=1)
    assert report["written"], "the writer wrote nothing: the test proved nothing"
    present = {row[0] for row in query(layout.db_path, "SELECT id FROM working_memory")}
    assert set(report["written"]) <= present
    assert picture(layout)["summaries"] == reference["summaries"]
