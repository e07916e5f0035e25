"""A stand-in for the live agent: writes memories through Mnemosyne until told to stop.

Usage: python live_writer.py DB_PATH STOP_FILE REPORT_FILE [INTERVAL_S]
Writes one memory every INTERVAL_S seconds (default 0.005; 0.02 is the Hermes plugin's 50 writes/s)
through ``Mnemosyne.remember`` (the agent's own code path, Python's sqlite3 with Mnemosyne's 5 s busy
timeout) and, when STOP_FILE appears, writes a JSON report: how many writes succeeded, which ids,
every error message, and the latency of every write in milliseconds. Every fourth write is a
user-stated fact of importance 0.8, the kind the canonical promotion trigger promotes.

Mnemosyne itself deletes a session's oldest working-memory rows beyond ``MNEMOSYNE_WM_MAX_ITEMS``
(10,000 by default; ``BeamMemory._trim_working_memory`` after each remember). A slow job beside this
writer (a busy-core run takes minutes at 50 writes/s) passes that count, and the agent's own trim then
removes its first writes: the check "every row the agent wrote is there" would blame the job for
Mnemosyne's retention. The writer therefore raises the limit for its own process (unless the caller
set one), and the report says which limit it wrote under.
"""

import collections
import json
import os
import sys
import time
import traceback
from pathlib import Path

WRITES_KEPT = 10_000_000
"""The working-memory limit the writer runs under: more writes than any test makes."""


def main() -> None:
    """Write until the stop file appears, then report."""
    db_path, stop_file, report_file = (Path(arg) for arg in sys.argv[1:4])
    interval_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.005
    # Read by Mnemosyne when its module is imported, so set before the import below.
    os.environ.setdefault("MNEMOSYNE_WM_MAX_ITEMS", str(WRITES_KEPT))
    from mnemosyne.core.memory import Mnemosyne

    memory = Mnemosyne(session_id="live-agent", db_path=db_path)
    # The last statements each of Mnemosyne's connections ran, to explain an error when one happens.
    recent = collections.deque(maxlen=10)
    memory.beam.conn.set_trace_callback(
        lambda sql: recent.append("beam: " + " ".join(sql.split())[:100])
    )
    memory.conn.set_trace_callback(
        lambda sql: recent.append("legacy: " + " ".join(sql.split())[:100])
    )
    written, errors, details, latencies_ms, error_times, number = [], [], [], [], [], 0
    Path(f"{report_file}.started").write_text("1")
    while not stop_file.exists():
        number += 1
        fact = number % 4 == 0
        started = time.perf_counter()
        try:
            memory_id = memory.remember(
                f"live agent note number {number} about the garden and the server",
                source="user" if fact else "conversation",
                importance=0.8 if fact else 0.3,
                veracity="stated" if fact else "unknown",
            )
            if memory_id:
                written.append(memory_id)
        except Exception as error:  # the point of the test: record, never hide
            errors.append(f"{type(error).__name__}: {error}")
            error_times.append(time.time())
            if len(details) < 3:
                details.append(
                    {
                        "at": time.time(),
                        # ~5000 ms: a wait past the busy timeout; ~0: refused at once (a stale
                        # snapshot or a schema change), the two causes need different fixes.
                        "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
                        "in_transaction": memory.beam.conn.in_transaction,
                        "where": traceback.format_exc().splitlines()[-3:],
                        "statements": list(recent),
                    }
                )
        elapsed = time.perf_counter() - started
        latencies_ms.append(round(elapsed * 1000, 3))
        time.sleep(max(0.0, interval_s - elapsed) if interval_s >= 0.02 else interval_s)
    report_file.write_text(
        json.dumps(
            {
                "written": written,
                "errors": errors,
                "details": details,
                "latencies_ms": latencies_ms,
                "error_times": error_times,
                "wm_max_items": int(os.environ["MNEMOSYNE_WM_MAX_ITEMS"]),
            }
        )
    )


if __name__ == "__main__":
    main()
