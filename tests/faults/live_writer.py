"""A stand-in for the live agent: writes memories through Mnemosyne until told to stop.

Usage: python live_writer.py DB_PATH STOP_FILE REPORT_FILE
Writes one memory every few milliseconds through ``Mnemosyne.remember`` (the agent's own code path,
Python's sqlite3 with Mnemosyne's 5 s busy timeout) and, when STOP_FILE appears, writes a JSON report:
how many writes succeeded, which ids, and every error message.
"""

import collections
import json
import sys
import time
import traceback
from pathlib import Path


def main() -> None:
    """Write until the stop file appears, then report."""
    db_path, stop_file, report_file = (Path(arg) for arg in sys.argv[1:4])
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
    written, errors, details, number = [], [], [], 0
    Path(f"{report_file}.started").write_text("1")
    while not stop_file.exists():
        number += 1
        try:
            memory_id = memory.remember(
                f"live agent note number {number} about the garden and the server",
                source="conversation",
                importance=0.3,
            )
            if memory_id:
                written.append(memory_id)
        except Exception as error:  # the point of the test: record, never hide
            errors.append(f"{type(error).__name__}: {error}")
            if len(details) < 3:
                details.append(
                    {
                        "at": time.time(),
                        "where": traceback.format_exc().splitlines()[-3:],
                        "statements": list(recent),
                    }
                )
        time.sleep(0.005)
    report_file.write_text(json.dumps({"written": written, "errors": errors, "details": details}))


if __name__ == "__main__":
    main()
