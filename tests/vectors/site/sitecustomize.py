"""Test tool, not product code: make ``import sqlite3`` load pysqlite3 in the vector tests' child
processes.

This machine's Python is built without ``enable_load_extension``, so Mnemosyne could never load
sqlite-vec and would keep its vectors only in the ``memory_embeddings`` fallback. The vector tests
put this folder on ``PYTHONPATH`` (``tests/vectors/environment.py``); at start-up Python imports
this module, which registers pysqlite3's DB-API module (a SQLite built with extension loading) under
the names ``sqlite3`` and ``sqlite3.dbapi2`` before anything imports the standard one. Where
pysqlite3 is missing, or the standard module can already load extensions, it changes nothing.
"""

import sys


def _swap() -> None:
    if "sqlite3" in sys.modules:
        return
    import sqlite3

    if hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        return
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        return
    del sys.modules["sqlite3"]
    sys.modules.pop("sqlite3.dbapi2", None)
    sys.modules["sqlite3"] = dbapi2
    sys.modules["sqlite3.dbapi2"] = dbapi2


_swap()
