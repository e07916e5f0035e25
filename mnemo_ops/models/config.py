"""The ``models`` settings section as one object (the schema in ``mnemo_ops.settings`` is the truth)."""

from __future__ import annotations

import dataclasses
from typing import Any

from mnemo_ops.settings import Settings

EXTRACTIVE = "extractive"
"""The ``method`` of everything made by a deterministic fallback instead of a model."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """What the config says about the model (see the ``models`` section of the settings schema)."""

    model: str | None
    options: dict[str, Any]
    calls_per_night: int
    seconds_per_night: int
    timeout_seconds: int
    remote: bool
    send_private_to_remote: bool
    max_prompt_chars: int

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelConfig:
        """The resolved ``models`` section (config file over the schema defaults)."""
        section = settings.option("models")
        return cls(
            model=section["model"] or None,
            options=dict(section["options"] or {}),
            calls_per_night=int(section["calls_per_night"]),
            seconds_per_night=int(section["seconds_per_night"]),
            timeout_seconds=int(section["timeout_seconds"]),
            remote=bool(section["remote"]),
            send_private_to_remote=bool(section["send_private_to_remote"]),
            max_prompt_chars=int(section["max_prompt_chars"]),
        )

    @property
    def withholds_private(self) -> bool:
        """True when private evidence must not reach this model."""
        return self.remote and not self.send_private_to_remote
