"""NREM and REM read the edges stage's typed result (``SleepRun.edge_pass``), never its stats."""

from __future__ import annotations

from datetime import datetime

from mnemo_ops.jobs.evening_batch.sleep import edges, store
from mnemo_ops.jobs.evening_batch.sleep.context import EdgePass, SleepRun
from mnemo_ops.jobs.evening_batch.sleep.dream_steps import _settling_edge_pass
from mnemo_ops.jobs.evening_batch.sleep.night import night_of
from mnemo_ops.settings.sections import SleepOptions


def _run(tmp_path, edge_pass: EdgePass | None, writes: list[str]) -> SleepRun:
    return SleepRun(
        db_path=tmp_path / "memory.db",
        state_db_path=tmp_path / "state.db",
        options=SleepOptions(),
        night=night_of(datetime(2026, 11, 29, 23, 0)),
        since=datetime(2026, 11, 28, 23, 0),
        owner="user",
        count=lambda name, amount: None,
        before_write=lambda: writes.append("checkpoint"),
        edge_pass=edge_pass,
    )


def test_only_an_edge_pass_of_this_run_that_found_no_work_is_settled_before_the_first_write(
    tmp_path,
):
    writes: list[str] = []
    for untouched in (None, EdgePass(planned=3, changed=3), EdgePass(done_before=True)):
        run = _run(tmp_path, untouched, writes)
        assert _settling_edge_pass(run) is run
    settled = _settling_edge_pass(_run(tmp_path, EdgePass(planned=0), writes))
    state_db = settled.open_state()
    try:
        assert not store.stage_done(state_db, settled.night.key, edges.STAGE)
        settled.before_write()
        assert writes == ["checkpoint"]
        assert store.stage_done(state_db, settled.night.key, edges.STAGE)
    finally:
        state_db.close()
    assert EdgePass(planned=2, strengthened=1, downscaled=1, changed=2).to_stats() == {
        "done_before": False,
        "planned": 2,
        "strengthened": 1,
        "downscaled": 1,
        "changed": 2,
    }
