"""Run ``mnemo-ops ARGS`` in this process and log when connections to the memory database open and close.

Usage: MNEMO_OPS_TEST_DB=PATH CONNECTION_LOG=FILE python drain_connection_log.py ARGS...
Writes one JSON list of [library, event] in order ("apsw" or "sqlite3"; "open" or "close"), counting
only connections to MNEMO_OPS_TEST_DB. apsw closes are seen through a subclass; sqlite3 connections are
only counted when they open (Mnemosyne never closes its own).
"""

import atexit
import json
import os
import runpy
import sqlite3
import sys

import apsw


def main() -> None:
    """Wrap both libraries' connection constructors, then run the CLI."""
    database = os.path.abspath(os.environ["MNEMO_OPS_TEST_DB"])
    events: list[list[str]] = []

    def write_log() -> None:
        with open(os.environ["CONNECTION_LOG"], "w") as log:
            log.write(json.dumps(events))

    atexit.register(write_log)
    original_connect = sqlite3.connect

    def connect(*args, **kwargs):
        if os.path.abspath(str(args[0] if args else kwargs.get("database"))) == database:
            events.append(["sqlite3", "open"])
        return original_connect(*args, **kwargs)

    class Connection(apsw.Connection):
        def __init__(self, filename, *args, **kwargs):
            self.counted = os.path.abspath(filename) == database
            super().__init__(filename, *args, **kwargs)
            if self.counted:
                events.append(["apsw", "open"])

        def close(self, *args):
            if self.counted and not getattr(self, "closed_once", False):
                self.closed_once = True
                events.append(["apsw", "close"])
            return super().close(*args)

    sqlite3.connect = connect
    apsw.Connection = Connection
    sys.argv = ["mnemo-ops", *sys.argv[1:]]
    runpy.run_module("mnemo_ops", run_name="__main__")


if __name__ == "__main__":
    main()
