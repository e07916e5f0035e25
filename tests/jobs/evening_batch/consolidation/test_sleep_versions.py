"""The sleep hooks per Mnemosyne line: what counts as old enough to consolidate follows the installed
line's clock (3.15: naive local time; 4.0: naive UTC), checked against Mnemosyne's own dry run."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import apsw

from mnemo_ops.database import transactions
from mnemo_ops.jobs.evening_batch.consolidation.episodic import working_memory_ttl_hours
from mnemo_ops.mnemosyne import versions
from tests.conftest import run_cli

ZONE = "Asia/Kolkata"  # UTC+05:30 all year: local and UTC cut-offs differ by 5.5 hours


def _add_row(db_path, memory_id: str, timestamp: datetime) -> None:
    connection = apsw.Connection(str(db_path))
    with transactions.immediate_transaction(connection):
        connection.execute(
            "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance) "
            "VALUES (?, ?, 'conversation', ?, 'clock-test', 0.5)",
            (
                memory_id,
                f"a turn about the kiln firing schedule {memory_id}",
                timestamp.isoformat(),
            ),
        )
    connection.close()


def test_the_eligible_rows_are_the_ones_mnemosynes_own_sleep_takes(sample):
    hours = working_memory_ttl_hours() // 2
    utc_now = datetime.now(UTC).replace(tzinfo=None)
    local_now = utc_now + timedelta(hours=5, minutes=30)
    # Older than the cut-off on a local clock (3.15), younger on a UTC one (4.0).
    _add_row(sample.db_path, "c10c0000000000a1", utc_now - timedelta(hours=hours - 2))
    # Younger than either cut-off.
    _add_row(sample.db_path, "c10c0000000000b2", local_now - timedelta(hours=hours - 2))

    completed = run_cli(sample, "--json", "run", "evening-batch", "--dry-run", env={"TZ": ZONE})

    result = json.loads(completed.stdout)
    assert completed.returncode == 0, completed.stderr
    # Our count (which decides whether a checkpoint is taken and sleep runs) is Mnemosyne's own.
    assert result["stats"]["consolidation"]["eligible"] == result["changes"]["items_consolidated"]
    local_clock = versions.installed_line() == "3.15"
    cutoff = datetime.fromisoformat(result["stats"]["consolidation"]["cutoff"])
    expected = (local_now if local_clock else utc_now) - timedelta(hours=hours)
    assert abs(cutoff - expected) < timedelta(minutes=5)
