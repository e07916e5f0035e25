"""Each block's character limit: Hermes' own setting when its ``config.yaml`` has one.

Hermes refuses an add past ``memory.memory_char_limit`` (MEMORY.md) or ``memory.user_char_limit``
(USER.md) of ``$HERMES_HOME/config.yaml``; without them it uses 2,200 and 1,375, which are also the
defaults of ``nightly_selfcare.memory_char_limit`` / ``user_char_limit``. The file Hermes enforces
wins over our config, since it is the limit the agent actually meets. Read with ``yaml.safe_load``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from mnemo_ops.memory_blocks.blocks import MEMORY_BLOCK, USER_BLOCK
from mnemo_ops.settings import Settings

HERMES_KEYS = {MEMORY_BLOCK: "memory_char_limit", USER_BLOCK: "user_char_limit"}
"""Block -> its key in the ``memory`` section of Hermes' config.yaml (and in ``nightly_selfcare``)."""
MAX_CONFIG_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Limits:
    """The limit of each block, where it came from, and any problem reading Hermes' config."""

    chars: dict[str, int]
    sources: dict[str, str]
    problem: str | None = None

    def of(self, block: str) -> int:
        """The character limit of `block` (``MEMORY.md`` or ``USER.md``)."""
        return self.chars[block]


def hermes_config_path(settings: Settings) -> Path:
    """``$HERMES_HOME/config.yaml``."""
    return settings.hermes_home / "config.yaml"


def _hermes_memory_section(path: Path) -> tuple[dict, str | None]:
    """The ``memory`` mapping of Hermes' config (empty when absent) and a problem, if any."""
    try:
        if not path.is_file():
            return {}, None
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return {}, f"{path} is larger than {MAX_CONFIG_BYTES:,} bytes; its limits were not read"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        return {}, f"cannot read Hermes' limits from {path}: {type(error).__name__}"
    section = data.get("memory") if isinstance(data, dict) else None
    return (section if isinstance(section, dict) else {}), None


def block_limits(settings: Settings) -> Limits:
    """The limits Hermes enforces: its config.yaml's when set (positive integers), else ours."""
    path = hermes_config_path(settings)
    section, problem = _hermes_memory_section(path)
    chars, sources = {}, {}
    ours = {
        MEMORY_BLOCK: settings.nightly_selfcare.memory_char_limit,
        USER_BLOCK: settings.nightly_selfcare.user_char_limit,
    }
    for block, key in HERMES_KEYS.items():
        value = section.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            chars[block], sources[block] = value, f"{path}: memory.{key}"
        else:
            if value is not None and problem is None:
                problem = f"{path}: memory.{key} is not a positive integer ({value!r}); ignored"
            chars[block] = ours[block]
            sources[block] = f"nightly_selfcare.{key}"
    return Limits(chars=chars, sources=sources, problem=problem)
