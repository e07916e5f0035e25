"""Recall engines for the retrieval eval.

An engine takes the eval's queries and returns, per query, the memories it recalled in rank order:

- ``mnemosyne``: Mnemosyne's own recall through its Python API, in a child process, on a snapshot
  copy of the database in a temp dir (recall writes counters, and importing Mnemosyne has side
  effects), with the recall options from the config.
- ``builtin``: FTS5 bm25 over the live working and episodic rows, read-only, with queries built only
  by ``core/fts_query.py``. A reference point that does not depend on Mnemosyne's version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from mnemo_ops.core.errors import UsageError
from mnemo_ops.evaluation.metrics import Retrieved

ENGINE_NAMES = ("mnemosyne", "builtin")


@dataclasses.dataclass(frozen=True)
class Query:
    """One recall request: the text, how many results, and the session to recall as (may be None)."""

    text: str
    k: int
    session: str | None = None


class Engine(Protocol):
    """What the eval needs from an engine."""

    name: str

    def version(self) -> str:
        """A version string recorded in baselines (a change explains a metric change)."""

    def describe(self) -> dict[str, Any]:
        """Name, version and the options that shape its ranking."""

    def recall_many(self, queries: Sequence[Query], progress=None) -> list[list[Retrieved]]:
        """Ranked results for every query, in order; `progress(n)` is called as queries finish."""


def make_engine(name: str, settings) -> Engine:
    """The engine called `name`, configured from the ``retrieval_eval`` config section."""
    if name == "builtin":
        from mnemo_ops.engines.builtin import BuiltinEngine

        return BuiltinEngine(settings.db_path)
    if name == "mnemosyne":
        from mnemo_ops.engines.mnemosyne import MnemosyneEngine

        return MnemosyneEngine.from_settings(settings)
    raise UsageError(f"unknown engine {name!r}; engines are: {', '.join(ENGINE_NAMES)}")
