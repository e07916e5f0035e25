"""Recall engines for the retrieval eval.

An engine takes the eval's queries and returns, per query, the memories it recalled in rank order:

- ``mnemosyne``: Mnemosyne's own recall through its Python API, in a child process, on a snapshot
  copy of the database in a temp dir (recall writes counters, and importing Mnemosyne has side
  effects), with the recall options from the config.
- ``builtin``: FTS5 bm25 over the live working and episodic rows, read-only, with queries built only
  by ``database/fts_query.py``. A reference point that does not depend on Mnemosyne's version.
"""

from __future__ import annotations

from mnemo_ops.evaluation.engines.base import Engine, Query
from mnemo_ops.evaluation.engines.builtin import BuiltinEngine
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
from mnemo_ops.foundation.errors import UsageError

ENGINE_NAMES = ("mnemosyne", "builtin")
__all__ = ["ENGINE_NAMES", "Engine", "Query", "make_engine"]


def make_engine(name: str, settings) -> Engine:
    """The engine called `name`, configured from the ``retrieval_eval`` config section."""
    if name == "builtin":
        return BuiltinEngine(settings.db_path)
    if name == "mnemosyne":
        return MnemosyneEngine.from_settings(settings)
    raise UsageError(f"unknown engine {name!r}; engines are: {', '.join(ENGINE_NAMES)}")
