"""Take verified entries out of a block, the way Hermes writes it, after a copy went into quarantine.

Under Hermes' lock (``memory_blocks.hermes_lock``) the block is read again, so whatever the agent
wrote since the plan is seen: only entries still present with exactly the verified text are taken
out (one the agent changed or removed meanwhile is left alone), the entry now last in the file
stays, and every other entry, the agent's new ones included, is kept in its order. The exact bytes
being replaced go into quarantine first (``quarantine restore`` brings them back); then the new text
is written to a temp file in the same folder with the old file's mode, fsynced and renamed. The lock
is held only for this: a read, a small copy and a small write.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from mnemo_ops.memory_blocks.blocks import Block, BlockProblem, read_block, render_entries, usage
from mnemo_ops.memory_blocks.hermes_lock import block_lock, replace_block


@dataclasses.dataclass
class Rewrite:
    """What one rewrite did."""

    block: str
    removed: list[str] = dataclasses.field(default_factory=list)
    changed_meanwhile: list[str] = dataclasses.field(default_factory=list)
    """Verified entries no longer in the file as they were (the agent changed or removed them)."""
    kept_as_last: list[str] = dataclasses.field(default_factory=list)
    chars_before: int = 0
    chars_after: int = 0
    quarantine_id: str | None = None
    problem: BlockProblem | None = None


def remove_entries(
    path: Path,
    limit: int,
    verified: list[str],
    lock_timeout_s: float,
    preserve: Callable[[Block], str],
) -> Rewrite:
    """Remove the `verified` entries from the block at `path` under Hermes' lock.

    `preserve(block)` stores the exact bytes about to be replaced (in quarantine) and returns the
    quarantine id; it runs under the lock, before the rewrite, only when something is removed.
    """
    outcome = Rewrite(block=path.name)
    with block_lock(path, lock_timeout_s):
        current = read_block(path, limit)
        if current is None:
            outcome.changed_meanwhile = list(verified)
            return outcome
        if isinstance(current, BlockProblem):
            outcome.problem = current
            return outcome
        entries = current.entries
        present = set(entries)
        wanted = set(verified)
        last = entries[-1] if entries else None
        outcome.changed_meanwhile = [text for text in verified if text not in present]
        outcome.kept_as_last = [text for text in verified if text == last]
        removing = {entry for entry in entries if entry in wanted and entry != last}
        outcome.chars_before = outcome.chars_after = usage(entries)
        if not removing:
            return outcome
        kept = [entry for entry in entries if entry not in removing]
        outcome.quarantine_id = preserve(current)
        replace_block(path, render_entries(kept), current.mode, current.uid, current.gid)
        outcome.removed = [entry for entry in entries if entry in removing]
        outcome.chars_after = usage(kept)
    return outcome
