"""Test tool, not product code: the environment of a vector home (the Hermes plugin's users' path).

``vector_variables(server)`` is what the agent's process would have: embeddings through the test
embedding server (``embedding_server.py``), ``MNEMOSYNE_NO_EMBEDDINGS`` unset, and this folder's
``site/`` on ``PYTHONPATH`` so every child Python imports pysqlite3 as ``sqlite3`` and Mnemosyne
really loads sqlite-vec (``site/sitecustomize.py``). ``vector_support()`` says why not, when this
Python lacks what the path needs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.vectors.embedding_server import EmbeddingServer

SITE = Path(__file__).resolve().parent / "site"

_DISABLING = ("MNEMOSYNE_NO_EMBEDDINGS", "MNEMOSYNE_SKIP_EMBEDDINGS", "MNEMOSYNE_EMBEDDINGS_OFF")


def stdlib_loads_extensions() -> bool:
    """True when this Python's own sqlite3 can load extensions (no swap needed)."""
    import sqlite3

    return hasattr(sqlite3.connect(":memory:"), "enable_load_extension")


def vector_support() -> str | None:
    """None when this Python can run the vector path; else the reason it cannot."""
    for module in ("numpy", "sqlite_vec"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[test]' installs it)"
    if not stdlib_loads_extensions() and importlib.util.find_spec("pysqlite3") is None:
        return "this Python's sqlite3 cannot load extensions and pysqlite3 is not installed"
    return None


def vector_variables(server: EmbeddingServer) -> dict[str, str]:
    """The variables a vector home's processes run with (added to a home's environment)."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        "MNEMOSYNE_EMBEDDINGS_VIA_API": "1",
        "MNEMOSYNE_EMBEDDING_API_URL": server.url,
        "PYTHONPATH": os.pathsep.join(p for p in (str(SITE), path) if p),
    }


@contextlib.contextmanager
def embeddings_switched_on() -> Iterator[None]:
    """Within the block, this process's environment has none of Mnemosyne's off switches (CI sets
    one for the rest of the suite), so children built from it embed."""
    saved = {name: os.environ.pop(name) for name in _DISABLING if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def vector_environment(base: Mapping[str, str], server: EmbeddingServer) -> dict[str, str]:
    """`base` (a home's environment) with the vector variables on and every off switch removed."""
    environment = {k: v for k, v in base.items() if k not in _DISABLING}
    environment.update(vector_variables(server))
    return environment
