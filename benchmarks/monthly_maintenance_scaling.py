"""How monthly-maintenance's cost grows with the database: a dry run and a real run at N and 4N rows.

Run by hand (not part of the test suite): ``python benchmarks/monthly_maintenance_scaling.py [N]``.
Each size gets a fresh sample home (built by the real Mnemosyne API) plus N imported working rows, with
10% of their fts_working entries lost and one overlapping triple pair per 100 rows. It prints only
ratios measured side by side in this run: linear growth gives about 4.0, quadratic about 16.0.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

from mnemo_ops.mnemosyne.sample_home import build_sample


def prepare(directory: Path, rows: int):
    """A sample home with `rows` extra working rows and damage proportional to them."""
    layout = build_sample(directory)
    with closing(sqlite3.connect(layout.db_path)) as connection:
        connection.executemany(
            "INSERT INTO working_memory(id, content, source, timestamp) VALUES (?, ?, 'import', '2026-01-01T00:00:00')",
            (
                (f"{index:016x}", f"imported note {index} about tomatoes, frost and raised beds")
                for index in range(rows)
            ),
        )
        connection.execute("DELETE FROM fts_working WHERE rowid % 10 = 0")
        connection.executemany(
            "INSERT INTO triples(subject, predicate, object, valid_from) VALUES (?, 'lives_in', ?, ?)",
            (
                (f"person{index // 2}", f"city{index}", f"2025-01-{1 + index % 2:02d}")
                for index in range(rows // 50)
            ),
        )
        connection.commit()
    return layout


def timed_run(layout, *flags: str) -> tuple[float, dict]:
    """Run the job in a subprocess; return its own duration_s and changes."""
    completed = subprocess.run(
        [sys.executable, "-m", "mnemo_ops", "--json", "run", "monthly-maintenance", *flags],
        env=layout.environ(),
        capture_output=True,
        text=True,
        check=False,
    )
    result = json.loads(completed.stdout)
    return float(result["duration_s"]), result["changes"]


def main() -> None:
    """Measure both sizes in this run and print the ratios."""
    small = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    timings = {}
    with tempfile.TemporaryDirectory() as temporary:
        for rows in (small, 4 * small):
            layout = prepare(Path(temporary) / f"n{rows}", rows)
            dry, planned = timed_run(layout, "--dry-run")
            real, done = timed_run(layout)
            assert planned == done, (planned, done)
            timings[rows] = (dry, real)
            print(f"{rows} rows: changes {done}")
    (dry_small, real_small), (dry_large, real_large) = timings[small], timings[4 * small]
    print(
        f"dry run  {4 * small} vs {small} rows: x{dry_large / dry_small:.1f} (linear 4.0, quadratic 16.0)"
    )
    print(
        f"real run {4 * small} vs {small} rows: x{real_large / real_small:.1f} (linear 4.0, quadratic 16.0)"
    )


if __name__ == "__main__":
    main()
