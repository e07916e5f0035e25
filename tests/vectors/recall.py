"""Test tool: Mnemosyne's own recall on a vector home, through the eval's engine (a child process on
a snapshot copy), with the vector voice checked on."""

from __future__ import annotations

from pathlib import Path

from mnemo_ops.evaluation.engines.base import Query
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine


def recall_ids(db_path: Path, texts: list[str], k: int = 10) -> list[list[str]]:
    """The ids plain recall returns for each text, across sessions; fails unless every query got a
    vector (the engine refuses a vector home's recall without one)."""
    engine = MnemosyneEngine(db_path, profile="plain", cross_session=True, cost_sample=0)
    ranked = engine.recall_many([Query(text=text, k=k, session=None) for text in texts])
    dense = engine.last_dense or {}
    assert dense.get("home_keeps_vectors") and dense.get("embedded") == len(texts), dense
    return [[item.id for item in items] for items in ranked]
