"""Mnemosyne's own embedding code, reached with its side effects contained.

Vectors must come from the same model and encoding Mnemosyne uses for recall, so re-embedding goes
through ``mnemosyne.core.embeddings`` (``available``, ``embed``, ``serialize``, ``_DEFAULT_MODEL``),
never through a model of our own. That module only reads the environment when imported; the model
itself (fastembed, or an OpenAI-compatible API) is loaded on the first ``embed`` call.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mnemo_ops.mnemosyne.api import point_environment_at


@dataclasses.dataclass
class MnemosyneEmbedder:
    """Embeds documents the way Mnemosyne stores them (doc prefix, float32, JSON)."""

    module: Any
    model: str

    def embed(self, texts: list[str]) -> list[str]:
        """Return one serialized vector (Mnemosyne's JSON encoding) per text; raise when the model fails."""
        vectors = self.module.embed(texts)
        if vectors is None or len(vectors) != len(texts):
            raise RuntimeError(f"the embedding model {self.model} returned no vectors")
        return [self.module.serialize(vector) for vector in vectors]


def load_embedder(db_path: Path, hermes_home: Path | None = None) -> MnemosyneEmbedder | None:
    """Mnemosyne's embedder when a model is available in this environment, else None."""
    point_environment_at(db_path, hermes_home)
    try:
        from mnemosyne.core import embeddings
    except Exception:  # an optional dependency broken at import time means: no model
        return None
    try:
        if not embeddings.available():
            return None
    except Exception:
        return None
    return MnemosyneEmbedder(module=embeddings, model=str(embeddings._DEFAULT_MODEL))
