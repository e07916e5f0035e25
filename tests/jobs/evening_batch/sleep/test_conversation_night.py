"""A night with the sleep stages on the aged multi-session conversation home, under the recall guard:
recall stays within tolerance, only what the rules allow is archived (no pinned row, no row holding
a canonical lineage, no eval answer), nothing is deleted, and a second run that night changes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta

import apsw
import pytest
from freezegun import freeze_time

from mnemo_ops.jobs import run_job
from tests.conftest import run_cli
from tests.jobs.evening_batch.sleep.conftest import (
    live_working_ids,
    query,
    row_counts,
    run_sleep,
    settings_for,
)

EXTRA_AGE_DAYS = 60
"""The home's sessions are 20 to 40 days old; sixty days more make its chatter forgettable."""
PINNED = 8


def _age_and_pin(db_path) -> set[str]:
    """Age every row by EXTRA_AGE_DAYS and pin the oldest low-importance turns; return those ids."""
    connection = apsw.Connection(str(db_path))
    try:
        connection.execute(
            "UPDATE working_memory SET timestamp = strftime('%Y-%m-%dT%H:%M:%f', timestamp, ?)",
            (f"-{EXTRA_AGE_DAYS} days",),
        )
        pinned = [
            row[0]
            for row in connection.execute(
                "SELECT id FROM working_memory WHERE importance <= 0.35 ORDER BY timestamp, id LIMIT ?",
                (PINNED,),
            )
        ]
        connection.executemany(
            "UPDATE working_memory SET pinned = 1 WHERE id = ?", [(i,) for i in pinned]
        )
    finally:
        connection.close()
    return set(pinned)


@pytest.mark.e2e
def test_a_night_on_an_aged_conversation_home(conversations, tmp_path):
    layout = conversations
    pinned = _age_and_pin(layout.db_path)
    assert run_cli(layout, "trigger", "install").returncode == 0
    quick = settings_for(layout, tmp_path, "guard:\n  enabled: false\n")
    assert run_job(quick, "memory-maintain", show_progress=False).status == "ok"  # lineages
    lineage = {
        row[0][len("auto:") :]
        for row in query(
            layout.db_path,
            "SELECT source FROM canonical_facts WHERE source LIKE 'auto:%' AND valid_until IS NULL",
        )
    }
    assert lineage, "the stated facts of the home hold canonical lineages"
    answers = {
        line.split('"relevant": ["')[1].split('"')[0]
        for line in (layout.state_dir / "eval" / "suite.jsonl").read_text().splitlines()
    }
    counts_before = row_counts(layout.db_path)

    # The first night the sleep stages see these memories, right after they were written.
    with freeze_time(datetime.now() - timedelta(days=EXTRA_AGE_DAYS), tick=True):
        assert run_sleep(quick).changes["memories_archived"] == 0

    settings = settings_for(layout, tmp_path, "guard:\n  probes: 80\n")
    live_before = live_working_ids(layout.db_path)
    night = run_job(settings, "evening-batch", show_progress=False)
    assert night.status == "ok", night.error
    guard = night.stats["guard"]
    assert guard["verdict"] == "ok" and not guard["problems"], guard
    for name, value in guard["before"].items():
        assert guard["after"][name] >= value - 0.01
    if "suite" in guard:
        assert not guard["suite"]["newly_failing"]

    archived = live_before - live_working_ids(layout.db_path)
    assert 0 < len(archived) <= 50 and night.changes["memories_archived"] == len(archived)
    assert not archived & pinned and not archived & lineage and not archived & answers
    records = query(
        layout.db_path,
        f"SELECT id, importance FROM working_memory WHERE id IN ({','.join('?' * len(archived))})",
        tuple(archived),
    )
    assert all(
        importance < 0.6 for _id, importance in records
    )  # importance 0.6 never decays that far
    counts_after = row_counts(layout.db_path)
    assert all(counts_after[table] >= counts_before[table] for table in counts_before)

    again = run_job(settings, "evening-batch", show_progress=False)
    assert again.status == "ok", again.error
    assert all(count == 0 for count in again.changes.values()), again.changes
    assert live_working_ids(layout.db_path) == live_before - archived
