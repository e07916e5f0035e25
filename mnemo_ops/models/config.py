"""Names the model layer shares with its callers (the options are the ``models`` settings section)."""

from __future__ import annotations

EXTRACTIVE = "extractive"
"""The ``method`` of everything made by a deterministic fallback instead of a model."""
