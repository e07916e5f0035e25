"""A stand-in for Hermes' memory tool in a real separate process, writing a block the Hermes way:
blocking ``fcntl.flock(LOCK_EX)`` on ``<file>.lock``, re-read under the lock, append, temp file in
the same folder, fsync, rename. An add past the limit is refused, as Hermes refuses it.

Usage:
    python hermes_writer.py loop BLOCK LIMIT STOP_FILE LOG_FILE
        append "writer note N ..." every few milliseconds until STOP_FILE appears; each entry that
        was written is logged (one line, flushed) after its rename
    python hermes_writer.py hold BLOCK HELD_FILE SECONDS ENTRY
        take the lock, create HELD_FILE, wait SECONDS, append ENTRY, let go
"""

import fcntl
import os
import sys
import tempfile
import time
from pathlib import Path

DELIMITER = "\n§\n"


def read_entries(path: Path) -> list[str]:
    if not path.exists():
        return []
    entries = [entry.strip() for entry in path.read_text(encoding="utf-8").split(DELIMITER)]
    return list(dict.fromkeys(entry for entry in entries if entry))


def write_entries(path: Path, entries: list[str]) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".mem_", suffix=".tmp")
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        stream.write(DELIMITER.join(entries))
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)


def add(path: Path, entry: str, limit: int, hold_s: float = 0.0, held: Path | None = None) -> bool:
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if held is not None:
                held.write_text("held")
            time.sleep(hold_s)
            entries = read_entries(path)
            if entry in entries or len(DELIMITER.join([*entries, entry])) > limit:
                return False  # "Consolidate now": Hermes refuses an add past the limit
            write_entries(path, [*entries, entry])
            return True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def main() -> None:
    mode = sys.argv[1]
    if mode == "loop":
        block, limit, stop, log = (
            Path(sys.argv[2]),
            int(sys.argv[3]),
            Path(sys.argv[4]),
            sys.argv[5],
        )
        number = 0
        with open(log, "a", encoding="utf-8") as written:
            while not stop.exists():
                number += 1
                entry = f"writer note {number}: the agent learned fact number {number} just now"
                if add(block, entry, limit):
                    written.write(entry + "\n")
                    written.flush()
                time.sleep(0.003)
    elif mode == "hold":
        block, held, seconds, entry = Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], sys.argv[5]
        add(block, entry, 10**9, hold_s=float(seconds), held=held)


if __name__ == "__main__":
    main()
