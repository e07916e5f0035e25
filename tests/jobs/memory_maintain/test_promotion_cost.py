"""The cost of one canonical promotion stays flat as canonical_facts grows (issue 20).

Measured in SQLite's own unit of work, the virtual-machine steps a statement runs (a progress
handler called every step), so the figures are exact and do not depend on the machine's load:

- the backstop, without the trigger installed (no lineage index: the case that made each
  promotion scan canonical_facts, ~6 ms per promotion at 10k facts and 1.5 to 4.4 s per 500-row
  transaction in the issue's measurement);
- the trigger, on the agent's own inserts, run through Python's sqlite3 (the SQLite library and
  version Mnemosyne writes with) in a child process.
"""

from __future__ import annotations

import json
import subprocess
import sys

import apsw

from mnemo_ops.foundation.clock import local_timestamp
from mnemo_ops.jobs.memory_maintain import backstop, trigger

SMALL, LARGE = 500, 20_000


def _add_closed_lineages(db_path, count: int, start: int) -> None:
    """`count` closed auto lineage rows of other (fake) working ids: a long promotion history."""
    connection = apsw.Connection(str(db_path))
    with connection:
        connection.executemany(
            "INSERT INTO canonical_facts (owner_id, category, name, body, source, confidence, "
            "version, valid_from, valid_until) VALUES ('default', ?, ?, 'old body', ?, 0.8, 1, "
            "'2026-01-01T00:00:00', '2026-01-02T00:00:00')",
            [
                (f"auto:{('fact', 'preference', 'event')[n % 3]}", f"{n:016x}", f"auto:{n:016x}")
                for n in range(start, start + count)
            ],
        )
    connection.close()


def _add_qualifying_rows(db_path, prefix: str, count: int = 40) -> None:
    connection = apsw.Connection(str(db_path))
    with connection:
        connection.executemany(
            "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance, "
            "veracity, memory_type) VALUES (?, ?, 'user', '2026-06-01T00:00:00', 's', 0.8, "
            "'stated', 'fact')",
            [(f"{prefix}{n:012x}", f"Dana stated fact number {prefix} {n}") for n in range(count)],
        )
    connection.close()


def _backstop_steps_per_promotion(db_path) -> float:
    connection = apsw.Connection(str(db_path))
    plan = backstop.plan(connection, "default", local_timestamp())
    steps = [0]

    def count() -> bool:
        steps[0] += 1
        return False

    connection.set_progress_handler(count, 1)
    _, promoted = backstop.apply(connection, "default", plan, local_timestamp())
    connection.close()
    assert promoted == len(plan.promote) > 0
    return steps[0] / promoted


def test_backstop_promotion_cost_does_not_grow_with_canonical_facts(sample):
    _add_closed_lineages(sample.db_path, SMALL, 0)
    _add_qualifying_rows(sample.db_path, "aaaa")
    small = _backstop_steps_per_promotion(sample.db_path)
    _add_closed_lineages(sample.db_path, LARGE - SMALL, SMALL)
    _add_qualifying_rows(sample.db_path, "bbbb")
    large = _backstop_steps_per_promotion(sample.db_path)
    # 40x the facts; a scan per promotion would cost about 40x the steps.
    assert large <= 1.5 * small, (small, large)


TRIGGER_STEPS = r"""
import json, sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
steps = [0]
def count():
    steps[0] += 1
    return 0
connection.set_progress_handler(count, 1)
prefix = sys.argv[2]
for n in range(40):
    connection.execute(
        "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance, "
        "veracity, memory_type) VALUES (?, ?, 'user', '2026-06-01T00:00:00', 's', 0.8, 'stated', 'fact')",
        (f"{prefix}{n:012x}", f"Dana stated fact number {prefix} {n}"),
    )
measured = steps[0]
connection.set_progress_handler(None, 1)
promoted = connection.execute(
    "SELECT count(*) FROM canonical_facts WHERE source LIKE 'auto:' || ? || '%'", (prefix,)
).fetchone()[0]
print(json.dumps({"steps": measured, "promoted": promoted, "sqlite": sqlite3.sqlite_version}))
"""


def _trigger_steps_per_insert(db_path, prefix: str) -> float:
    output = subprocess.run(
        [sys.executable, "-c", TRIGGER_STEPS, str(db_path), prefix],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    measured = json.loads(output)
    assert measured["promoted"] == 40
    return measured["steps"] / 40


def test_trigger_promotion_cost_on_the_agents_inserts_does_not_grow(sample):
    connection = apsw.Connection(str(sample.db_path))
    trigger.install(connection, "default")
    connection.close()
    _add_closed_lineages(sample.db_path, SMALL, 0)
    small = _trigger_steps_per_insert(sample.db_path, "cccc")
    _add_closed_lineages(sample.db_path, LARGE - SMALL, SMALL)
    large = _trigger_steps_per_insert(sample.db_path, "dddd")
    assert large <= 1.5 * small, (small, large)
