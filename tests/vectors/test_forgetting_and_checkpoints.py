"""Closing, restoring and checkpoints on a vector home.

- The sleep's forgetting archives rows by ``valid_until`` and deletes nothing, so their vectors stay
  in vec_working; recall, vector voice included, must not return them, and ``forgotten restore``
  must make them recallable again with the same vectors.
- A checkpoint and its restore bring back the sqlite-vec tables byte for byte, and recall's vector
  voice works on the restored file.
"""

from __future__ import annotations

import json

import pytest

from mnemo_ops.jobs import run_job
from tests.conftest import run_cli
from tests.jobs.evening_batch.sleep.conftest import settings_for
from tests.jobs.evening_batch.sleep.test_forgetting import first_night
from tests.vectors.inspection import open_with_vectors, read_state
from tests.vectors.recall import recall_ids


def _contents(db_path, ids: list[str]) -> dict[str, str]:
    connection = open_with_vectors(db_path)
    try:
        return {
            memory_id: connection.execute(
                "SELECT content FROM working_memory WHERE id = ?", (memory_id,)
            ).fetchone()[0]
            for memory_id in ids
        }
    finally:
        connection.close()


def _vector_rows(db_path) -> dict[str, list[tuple]]:
    connection = open_with_vectors(db_path)
    try:
        return {
            table: list(connection.execute(f"SELECT rowid, embedding FROM {table} ORDER BY rowid"))
            for table in ("vec_working", "vec_episodes", "vec_facts")
        }
    finally:
        connection.close()


@pytest.mark.e2e
def test_archived_rows_are_not_recalled_and_restore_brings_them_back(
    vector_experiment, vector_env, tmp_path
):
    layout, ids = vector_experiment
    noise = {ids[key] for key in ids if key.startswith("noise-")}
    settings = settings_for(layout, tmp_path, "guard:\n  probes: 40\n")
    with first_night():
        assert run_job(settings, "evening-batch", show_progress=False).status == "ok"
    later = run_job(settings, "evening-batch", show_progress=False)
    assert later.status == "ok", later.error
    assert later.stats["guard"]["vectors"]["before"]["embedded"] > 0

    state = read_state(layout.db_path)
    archived = noise - state.live
    assert len(archived) >= 45
    assert archived <= state.indexed  # nothing deleted: the vectors are still there
    chosen = sorted(archived)[:8]
    texts = _contents(layout.db_path, chosen)
    found = recall_ids(layout.db_path, [texts[memory_id] for memory_id in chosen])
    assert not {memory_id for ranked in found for memory_id in ranked} & archived

    night = later.stats["sleep"]["night"]
    restored = run_cli(layout, "--json", "forgotten", "restore", "--night", night)
    assert restored.returncode == 0, restored.stderr
    after = read_state(layout.db_path)
    assert archived <= after.live and archived <= after.indexed
    found = recall_ids(layout.db_path, [texts[memory_id] for memory_id in chosen])
    assert all(memory_id in ranked for memory_id, ranked in zip(chosen, found))


@pytest.mark.e2e
def test_checkpoint_round_trip_keeps_the_vector_tables(vector_home, vector_cli, vector_env):
    vectors_before, state_before = (
        _vector_rows(vector_home.db_path),
        read_state(vector_home.db_path),
    )
    assert vectors_before["vec_working"]
    backup = vector_cli("--json", "run", "backup")
    assert backup.returncode == 0, backup.stderr
    name = json.loads(backup.stdout)["checkpoint"]
    drained = vector_cli("--json", "run", "bridge-drain")  # rows with vectors written after it
    assert json.loads(drained.stdout)["changes"]["items_ingested"] > 0
    assert _vector_rows(vector_home.db_path) != vectors_before

    restored = vector_cli("backup", "restore", name)

    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert _vector_rows(vector_home.db_path) == vectors_before
    assert read_state(vector_home.db_path) == state_before
    one = sorted(state_before.live)[0]
    text = _contents(vector_home.db_path, [one])[one]
    assert one in recall_ids(vector_home.db_path, [text])[0]
