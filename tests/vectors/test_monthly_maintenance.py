"""monthly-maintenance on a vector home: the audit counts sqlite-vec vectors against live rows, and
the repair writes the missing ones the way Mnemosyne writes them, counted, dry run alike."""

from __future__ import annotations

import json

import pytest

from tests.purity import assert_unchanged, sample_snapshot
from tests.vectors.environment import stdlib_loads_extensions
from tests.vectors.inspection import open_with_vectors, read_state

JOB = "monthly-maintenance"


def _run(vector_cli, *arguments: str, env: dict[str, str] | None = None) -> dict:
    completed = vector_cli("--json", "run", JOB, "--force", *arguments, env=env)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return json.loads(completed.stdout)


def _codes(result: dict) -> set[str]:
    return {warning["code"] for warning in result["warnings"]}


@pytest.mark.heavy
def test_the_vector_home_is_whole_and_the_audit_counts_it(vector_home, vector_cli):
    state = read_state(vector_home.db_path)
    assert state.live and state.live_without_vector == set()
    assert state.live_without_embedding == set() and state.orphan_vectors == 0

    result = _run(vector_cli)

    assert result["status"] == "ok"
    assert result["changes"] == {}
    assert result["stats"]["vectors"]["working_live"] == len(state.live)
    assert result["stats"]["vectors"]["working_with_vector"] == len(state.live)
    assert not {code for code in _codes(result) if "vector" in code}


@pytest.mark.e2e
def test_lost_vectors_are_written_back_through_mnemosyne_and_counted(vector_home, vector_cli):
    state = read_state(vector_home.db_path)
    lost_index, lost_both = sorted(state.live)[:3], sorted(state.live)[3:5]
    connection = open_with_vectors(vector_home.db_path, readonly=False)
    for memory_id in lost_index + lost_both:
        # Damage to the vector stores only (no memory row is touched): what an interrupted write,
        # or a home used for a while without sqlite-vec, leaves.
        rowid = connection.execute(
            "SELECT rowid FROM working_memory WHERE id = ?", (memory_id,)
        ).fetchone()[0]
        connection.execute("DELETE FROM vec_working WHERE rowid = ?", (rowid,))
    for memory_id in lost_both:
        connection.execute("DELETE FROM memory_embeddings WHERE memory_id = ?", (memory_id,))
    connection.close()
    before = sample_snapshot(vector_home)

    planned = _run(vector_cli, "--dry-run")

    assert_unchanged(before, sample_snapshot(vector_home))
    assert planned["status"] == "dry-run"
    assert planned["changes"]["vectors_reembedded"] == len(lost_both)
    assert planned["changes"]["vectors_indexed"] == len(lost_index) + len(lost_both)
    assert {"vectors-missing", "vectors-unindexed"} <= _codes(planned)
    assert planned["stats"]["vectors"]["working_with_vector"] == len(state.live) - 5

    real = _run(vector_cli)

    assert real["changes"]["vectors_reembedded"] == planned["changes"]["vectors_reembedded"]
    assert real["changes"]["vectors_indexed"] == planned["changes"]["vectors_indexed"]
    after = read_state(vector_home.db_path)
    assert after.live_without_vector == set() and after.live_without_embedding == set()
    again = _run(vector_cli)
    assert again["changes"] == {}


@pytest.mark.heavy
def test_vectors_are_written_as_mnemosyne_writes_them(vector_home, vector_cli):
    """The repaired vector is the one Mnemosyne stored (same quantised bytes in vec_working)."""
    memory_id = sorted(read_state(vector_home.db_path).live)[0]
    connection = open_with_vectors(vector_home.db_path, readonly=False)
    rowid = connection.execute(
        "SELECT rowid FROM working_memory WHERE id = ?", (memory_id,)
    ).fetchone()[0]
    original = connection.execute(
        "SELECT embedding FROM vec_working WHERE rowid = ?", (rowid,)
    ).fetchone()[0]
    connection.execute("DELETE FROM vec_working WHERE rowid = ?", (rowid,))
    connection.close()

    assert _run(vector_cli)["changes"]["vectors_indexed"] == 1

    connection = open_with_vectors(vector_home.db_path)
    repaired = connection.execute(
        "SELECT embedding FROM vec_working WHERE rowid = ?", (rowid,)
    ).fetchone()[0]
    connection.close()
    assert repaired == original


@pytest.mark.heavy
def test_without_sqlite_vec_the_gap_is_one_warning_and_nothing_is_written(vector_home, vector_cli):
    if stdlib_loads_extensions():
        pytest.skip("this Python's own sqlite3 loads extensions: there is no plain Python to use")
    connection = open_with_vectors(vector_home.db_path, readonly=False)
    connection.execute(
        "DELETE FROM vec_working WHERE rowid IN (SELECT rowid FROM vec_working LIMIT 2)"
    )
    connection.close()

    # This machine's Python without the pysqlite3 swap: its sqlite3 cannot load extensions.
    result = _run(vector_cli, env={"PYTHONPATH": ""})

    assert "vectors-unindexed-no-sqlite-vec" in _codes(result)
    assert "vectors_indexed" not in result["changes"]
    assert len(read_state(vector_home.db_path).live_without_vector) == 2
