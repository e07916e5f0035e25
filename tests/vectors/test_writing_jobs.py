"""The writing jobs on a vector home: the rows they write get vectors as Mnemosyne writes them, or
monthly-maintenance writes them in its next run and counts them.

- bridge-drain and memory-block-migrate store through Mnemosyne's ``remember``: vectors at once.
- evening-batch: Mnemosyne's own consolidation embeds its episodes; our NREM summaries are written
  by SQL without a vector, and monthly-maintenance embeds them (``episode_vectors_added``).
- memory-maintain writes edges and canonical facts, no memory rows: the vector stores stay as they
  were.
"""

from __future__ import annotations

import json

import pytest

from tests.vectors.inspection import read_state


def _run(vector_cli, job: str, *arguments: str, config=None) -> dict:
    prefix = ("--config", str(config)) if config else ()
    completed = vector_cli(*prefix, "--json", "run", job, "--force", *arguments)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    result = json.loads(completed.stdout)
    assert result["status"] == ("dry-run" if "--dry-run" in arguments else "ok"), result
    return result


def test_bridge_drain_rows_get_both_vectors_at_once(vector_home, vector_cli):
    before = read_state(vector_home.db_path)

    result = _run(vector_cli, "bridge-drain")

    after = read_state(vector_home.db_path)
    new = after.live - before.live
    assert len(new) == result["changes"]["items_ingested"] > 0
    assert new <= after.embedded and new <= after.indexed
    assert after.live_without_vector == set()


@pytest.mark.heavy
def test_memory_maintain_leaves_the_vector_stores_as_they_were(vector_home, vector_cli):
    before = read_state(vector_home.db_path)

    result = _run(vector_cli, "memory-maintain")

    assert result["changes"].get("edges_created", 0) > 0
    assert read_state(vector_home.db_path) == before


@pytest.mark.e2e
def test_evening_batch_summaries_get_vectors_by_the_next_monthly_maintenance(
    vector_home, vector_cli
):
    batch = _run(vector_cli, "evening-batch")
    assert batch["stats"]["guard"]["verdict"] == "ok"
    state = read_state(vector_home.db_path)
    assert state.episodes, "the sample consolidates into episodes"
    assert state.live_without_vector == set()  # working rows keep theirs
    missing = state.episodes - state.episodes_indexed
    # Mnemosyne's own consolidation embedded its summaries; ours (NREM) have none yet.
    assert len(missing) == batch["changes"]["summaries_fused"] > 0

    planned = _run(vector_cli, "monthly-maintenance", "--dry-run")
    assert planned["changes"]["episode_vectors_added"] == len(missing)
    repaired = _run(vector_cli, "monthly-maintenance")

    assert repaired["changes"]["episode_vectors_added"] == len(missing)
    assert "episode-vectors-missing" in {w["code"] for w in repaired["warnings"]}
    after = read_state(vector_home.db_path)
    assert after.episodes_indexed == after.episodes
    assert _run(vector_cli, "monthly-maintenance")["changes"] == {}


@pytest.mark.e2e
def test_memory_block_migrate_moves_entries_with_vectors(vector_home, vector_cli, tmp_path):
    before = read_state(vector_home.db_path)

    # Low water marks, so the sample's blocks have entries to move into the database; the guard
    # off, because what is tested is the rows' vectors, not whether moving this many entries
    # keeps the sample's probes (on 4.0 it does not, and the guard rightly refuses).
    config = tmp_path / "no-guard.yaml"
    config.write_text("guard:\n  enabled: false\n", encoding="utf-8")
    result = _run(
        vector_cli,
        "memory-block-migrate",
        "--option",
        "high_water=0.05",
        "--option",
        "low_water=0.02",
        config=config,
    )

    after = read_state(vector_home.db_path)
    new = after.live - before.live
    assert result["changes"]["entries_stored"] > 0
    assert new and new <= after.embedded and new <= after.indexed
    assert after.live_without_vector == set()
