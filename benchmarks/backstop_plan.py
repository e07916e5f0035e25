"""The canonical backstop's plan (its read-only part) at 10k / 100k / 1M realistic rows, side by side.

Run by hand (not part of the test suite):

    python benchmarks/backstop_plan.py                       # 10k, 100k and 1M
    python benchmarks/backstop_plan.py --sizes 10000,100000

On a database that predates the trigger (the realistic homes of ``benchmarks/``, built once and
shared with the other benchmarks), every qualifying stated fact is to be promoted: about 29% of
the rows. The plan is read on a read-only connection, as the job reads it, and timed together with
its size; printed per size: the rows to promote, the time, the time per promotion, and the growth
per 10x rows (flat cost per row: about 10x). Before the fix the plan checked each candidate against
a list of the promotions found so far, which made it quadratic: 290k promotions at 1M rows passed
memory-maintain's 30 min timeout before the first write.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

import apsw  # noqa: E402

from devtools.samples.realistic_memories import cached_realistic_home  # noqa: E402
from mnemo_ops.foundation.clock import local_timestamp  # noqa: E402
from mnemo_ops.jobs.memory_maintain import backstop  # noqa: E402
from mnemo_ops.mnemosyne.sample_home import SampleLayout  # noqa: E402
from mnemo_ops.settings import load_settings  # noqa: E402


def plan_time(layout: SampleLayout) -> tuple[int, float]:
    """(rows to promote, seconds) for the backstop's full plan on `layout`'s database."""
    owner = load_settings(db=layout.db_path, environ=layout.environ()).owner
    connection = apsw.Connection(str(layout.db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        started = time.perf_counter()
        plan = backstop.plan(connection, owner, local_timestamp())
        return len(plan.promote), time.perf_counter() - started
    finally:
        connection.close()


def main() -> None:
    """Time the plan at every size and print the growth per 10x rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mnemo-ops-bench")
    arguments = parser.parse_args()
    arguments.dir.mkdir(parents=True, exist_ok=True)
    measured = []
    for size in (int(size) for size in arguments.sizes.split(",")):
        promotions, seconds = plan_time(cached_realistic_home(arguments.dir, size))
        measured.append((size, seconds))
        print(
            f"{size:>9,} rows  {promotions:>8,} to promote  plan {seconds:7.2f} s  "
            f"{seconds / max(promotions, 1) * 1e6:6.1f} us per promotion",
            flush=True,
        )
    for (small, small_s), (large, large_s) in zip(measured, measured[1:]):
        print(f"  {small:,} -> {large:,} rows: time x{large_s / max(small_s, 1e-9):.1f}")


if __name__ == "__main__":
    main()
