"""What Hermes puts in every prompt from its memory blocks: the entries of MEMORY.md and USER.md.

The agent receives these in every turn of every conversation, whatever recall injects, so the eval
and the recall guard count them as received. A block that cannot be read safely (a symlink, invalid
UTF-8, far over its limit: ``blocks.read_block``) is counted as empty, as it gives the agent
nothing mnemo-ops could vouch for.
"""

from __future__ import annotations

from pathlib import Path

from mnemo_ops.memory_blocks.blocks import BLOCK_NAMES, Block, read_block, usage
from mnemo_ops.memory_blocks.limits import block_limits
from mnemo_ops.settings import Settings


def prompt_entries(settings: Settings, folder: Path | None = None) -> tuple[tuple[str, ...], int]:
    """The entries of both blocks (MEMORY.md first) in `folder` (default: the settings' memory
    blocks folder) and their characters as Hermes counts them, block by block."""
    folder = Path(folder) if folder is not None else settings.memory_blocks_dir
    limits = block_limits(settings)
    entries: list[str] = []
    chars = 0
    if folder.is_symlink() or not folder.is_dir():
        return (), 0
    for name in BLOCK_NAMES:
        block = read_block(folder / name, limits.of(name))
        if isinstance(block, Block):
            entries.extend(block.entries)
            chars += usage(block.entries)
    return tuple(entries), chars
