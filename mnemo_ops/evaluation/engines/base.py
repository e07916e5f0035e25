"""What every recall engine shares: the query it is asked and the protocol it answers."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from mnemo_ops.evaluation.metrics import Retrieved


@dataclasses.dataclass(frozen=True)
class Query:
    """One recall request: the text, how many results, and the session to recall as (None: no
    session; ``new``: a brand-new conversation)."""

    text: str
    k: int
    session: str | None = None


class Engine(Protocol):
    """What the eval needs from an engine."""

    name: str
    db_path: Path
    """The database it recalls from (the eval reads where each case's evidence lives there)."""

    def version(self) -> str:
        """A version string recorded in baselines (a change explains a metric change)."""

    def describe(self) -> dict[str, Any]:
        """Name, version and the options that shape its ranking."""

    def recall_many(self, queries: Sequence[Query], progress=None) -> list[list[Retrieved]]:
        """Ranked results for every query, in order; `progress(n)` is called as queries finish."""
