"""Which summaries the repair changes: only those a sleep stamped later than their sources."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

import sqlite_utils

from mnemo_ops import database
from mnemo_ops.jobs.evening_batch.consolidation import summary_repair


def _add_summaries(db_path):
    """Three summaries of the sample's first working rows, as three writers leave them.

    - "sleep": Mnemosyne 3.15's sleep (tier 1, stamped days after its sources: it buries them);
    - "dated": tier 1 but dated by its sources (a minute after the newest: no recency edge);
    - "repaired": already tier 3 with its newest source's time (Mnemosyne 4.0, or a repair).
    """
    connection = sqlite3.connect(db_path)
    try:
        rows = connection.execute(
            "SELECT id, timestamp FROM working_memory ORDER BY timestamp LIMIT 3"
        ).fetchall()
        sources = ",".join(row[0] for row in rows)
        newest = max(row[1] for row in rows)
        later = (datetime.fromisoformat(newest) + timedelta(days=4)).isoformat()
        just_after = (datetime.fromisoformat(newest) + timedelta(minutes=1)).isoformat()
        with connection:
            for episodic_id, tier, timestamp in (
                ("ep-sleep", 1, later),
                ("ep-dated", 1, just_after),
                ("ep-repaired", 3, newest),
            ):
                connection.execute(
                    "INSERT INTO episodic_memory (id, content, source, timestamp, summary_of, tier) "
                    "VALUES (?, ?, 'consolidation', ?, ?, ?)",
                    (episodic_id, f"summary {episodic_id}", timestamp, sources, tier),
                )
    finally:
        connection.close()
    return newest, later


def test_only_a_summary_stamped_later_than_its_sources_is_repaired(sample, tmp_path):
    newest, later = _add_summaries(sample.db_path)
    connection = database.open_memory_db(sample.db_path)
    try:
        planned = summary_repair.plan(connection, tier=3)
        # Not "ep-dated": moving a summary dated by its sources down a tier can leave its facts
        # unreachable (the guard measured it), and it has no recency edge to take away.
        assert [repair.episodic_id for repair in planned] == ["ep-sleep"]
        assert (planned[0].tier_before, planned[0].timestamp_before) == (1, later)
        assert (planned[0].tier_after, planned[0].timestamp_after) == (3, newest)

        state_db = sqlite_utils.Database(tmp_path / "state.db")
        assert summary_repair.apply(connection, state_db, "db", planned) == 1
        assert summary_repair.plan(connection, tier=3) == []  # idempotent
        row = connection.execute(
            "SELECT tier, timestamp FROM episodic_memory WHERE id = 'ep-sleep'"
        ).fetchone()
        assert tuple(row) == (3, newest)

        assert summary_repair.revert(connection, state_db, "db", dry_run=False) == {
            "reverted": 1,
            "changed_since": 0,
        }
        row = connection.execute(
            "SELECT tier, timestamp FROM episodic_memory WHERE id = 'ep-sleep'"
        ).fetchone()
        assert tuple(row) == (1, later)
    finally:
        connection.close()


def test_a_time_that_does_not_parse_is_dated_by_the_sources():
    assert summary_repair._stamped_later("not a time", "2026-10-01T00:00:00")
    assert summary_repair._stamped_later(None, "2026-10-01T00:00:00")
    assert not summary_repair._stamped_later("2026-10-01T00:30:00", "2026-10-01T00:00:00")
    assert summary_repair._stamped_later("2026-10-01T01:30:00+00:00", "2026-10-01T00:00:00")
