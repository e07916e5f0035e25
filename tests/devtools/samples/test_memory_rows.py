"""Generated rows written by SQL into the schema the real Mnemosyne created, batch by batch."""

from __future__ import annotations

import pytest

from devtools.samples.memory_rows import EPISODIC_COLUMNS, WORKING_COLUMNS, append_rows
from mnemo_ops import database


def working_row(number: int) -> tuple:
    """Generated working row `number`, its values in `WORKING_COLUMNS` order."""
    return (
        f"gen{number:04d}",
        f"the allotment gate hinge number {number} needs oil",
        "conversation",
        f"2026-01-01T00:{number // 60:02d}:{number % 60:02d}",
        "generated",
        0.4,
        "{}",
        "unknown",
        "fact",
        None,
    )


def test_batches_are_written_counted_and_indexed_by_mnemosyne(sample):
    connection = database.open_memory_db(sample.db_path, readonly=True)
    before = database.row_counts(connection)
    connection.close()  # append_rows writes through sqlite3: one SQLite library at a time
    summary = ("epgen0000", "the gate hinges", "consolidation", "2026-01-02T00:00:00", "generated")
    batches = [
        ([working_row(number) for number in range(0, 30)], [(*summary, 0.6, "{}", "gen0000")]),
        ([working_row(number) for number in range(30, 50)], []),
    ]
    assert len(batches[0][0][0]) == len(WORKING_COLUMNS)
    assert len(batches[0][1][0]) == len(EPISODIC_COLUMNS)
    assert append_rows(sample.db_path, iter(batches)) == {"working": 50, "episodic": 1}
    connection = database.open_memory_db(sample.db_path, readonly=True)
    after = database.row_counts(connection)
    matched = connection.execute(
        "SELECT count(*) FROM fts_working WHERE fts_working MATCH 'hinge'"
    ).fetchone()[0]
    summary_of = connection.execute(
        "SELECT summary_of FROM episodic_memory WHERE id = 'epgen0000'"
    ).fetchone()[0]
    connection.close()
    assert after["working_memory"] - before["working_memory"] == 50
    assert after["episodic_memory"] - before["episodic_memory"] == 1
    assert matched == 50 and summary_of == "gen0000"
    # The WAL was checkpointed into the file: nothing is left only in the -wal.
    wal = sample.db_path.with_name(sample.db_path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_failing_batch_is_rolled_back_and_the_earlier_ones_kept(sample):
    duplicate = [working_row(1), working_row(1)]  # the same id twice: the primary key refuses it
    with pytest.raises(Exception, match="UNIQUE"):
        append_rows(sample.db_path, [([working_row(0)], []), (duplicate, [])])
    connection = database.open_memory_db(sample.db_path, readonly=True)
    ids = [
        row[0] for row in connection.execute("SELECT id FROM working_memory WHERE id LIKE 'gen%'")
    ]
    connection.close()
    assert ids == ["gen0000"]
