"""Memory blocks (Hermes ``MEMORY.md`` and ``USER.md``): size against the Hermes limits, entries, age,
and what memory-block-migrate moved out of them lately.

Hermes keeps the blocks as entries separated by ``"\\n§\\n"`` and counts the characters of the entries
joined by that delimiter against ``memory_char_limit`` (2,200) and ``user_char_limit`` (1,375), from
its ``config.yaml`` when set there (``mnemo_ops.memory_blocks``: the same reading as the migration).
The audit only reads; nightly-selfcare records the entries' first-seen dates in state.db.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from mnemo_ops.core import state
from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.jobs.nightly_selfcare.audits.outcome import AuditOutcome
from mnemo_ops.memory_blocks import entry_history
from mnemo_ops.memory_blocks.blocks import ENTRY_DELIMITER, Block, BlockProblem, read_block
from mnemo_ops.memory_blocks.limits import block_limits as hermes_block_limits
from mnemo_ops.settings import Settings

CODE_PREFIXES = ("memory-block-",)
MIGRATE_FIX = "mnemo-ops run memory-block-migrate"
MOVED_PERIOD = timedelta(hours=24)


def block_limits(settings: Settings) -> dict[str, int]:
    """File name -> character limit: Hermes' config.yaml when it sets one, else our config."""
    return dict(hermes_block_limits(settings).chars)


def measure_block(text: str) -> tuple[int, int, int]:
    """(characters as Hermes counts them, number of entries, number of empty entries) of a block."""
    parts = text.split(ENTRY_DELIMITER)
    entries = [part.strip() for part in parts]
    filled = [entry for entry in entries if entry]
    empty = len(entries) - len(filled) if text.strip() else 0
    return len(ENTRY_DELIMITER.join(filled)), len(filled), empty


def _moved_lately(settings: Settings, now: datetime) -> dict[str, dict[str, int]]:
    """Block -> entries and characters memory-block-migrate moved in the last 24 hours."""
    ledger = state.open_state_readonly(settings.state_db_path)
    try:
        moved: dict[str, dict[str, int]] = {}
        for row in entry_history.moved_since(ledger, isoformat(now - MOVED_PERIOD)):
            figures = moved.setdefault(row["block"], {"entries": 0, "chars": 0})
            figures["entries"] += 1
            figures["chars"] += row["chars"] or 0
        return moved
    finally:
        if ledger is not None:
            ledger.close()


def _audit_block(
    outcome: AuditOutcome,
    path: Path,
    limit: int,
    warn_fraction: float,
    stale_days: int,
    now: datetime,
    moved: dict[str, int] | None,
) -> None:
    block = read_block(path, limit)
    if block is None:
        outcome.warn(
            "memory-block-missing",
            "info",
            f"{path} does not exist (Hermes creates it on first use)",
        )
        return
    if isinstance(block, BlockProblem):
        code = "memory-block-over-limit" if block.code == "oversize" else "memory-block-unreadable"
        outcome.warn(code, "error", block.message, fix=f"ls -l {path}")
        return
    _measure(outcome, path, block, limit, warn_fraction, stale_days, now, moved)


def _measure(
    outcome: AuditOutcome,
    path: Path,
    block: Block,
    limit: int,
    warn_fraction: float,
    stale_days: int,
    now: datetime,
    moved: dict[str, int] | None,
) -> None:
    characters, entries, empty = measure_block(block.text)
    modified = datetime.fromtimestamp(block.mtime, UTC)
    age_days = max(0.0, (now - modified).total_seconds() / 86400)
    fraction = characters / limit
    outcome.stats[path.name] = {
        "chars": characters,
        "limit": limit,
        "percent": round(100 * fraction, 1),
        "entries": entries,
        "age_days": round(age_days, 1),
        "moved_last_24h": moved or {"entries": 0, "chars": 0},
    }
    if fraction > 1:
        outcome.warn(
            "memory-block-over-limit",
            "error",
            f"{path.name} holds {characters:,} characters, over its limit of {limit:,} "
            f"({fraction:.0%}); Hermes refuses new entries",
            fix=MIGRATE_FIX,
        )
    elif fraction >= warn_fraction:
        outcome.warn(
            "memory-block-near-limit",
            "warning",
            f"{path.name} holds {characters:,} of {limit:,} characters ({fraction:.0%})",
            fix=MIGRATE_FIX,
        )
    if empty:
        outcome.warn(
            "memory-block-empty-entry",
            "info",
            f"{path.name} has {empty} empty entr{'y' if empty == 1 else 'ies'}",
            fix=f"$EDITOR {path}",
        )
    if age_days > stale_days:
        outcome.warn(
            "memory-block-stale",
            "info",
            f"{path.name} has not changed for {age_days:.0f} days (the agent may not be saving memories)",
        )
    if moved and moved["entries"]:
        outcome.warn(
            "memory-block-entries-moved",
            "info",
            f"{path.name}: {moved['entries']} entr{'y' if moved['entries'] == 1 else 'ies'} "
            f"({moved['chars']:,} characters) moved into Mnemosyne in the last 24 h; it now holds "
            f"{characters:,} of {limit:,} ({fraction:.0%})",
            fix="mnemo-ops quarantine list (the file as it was before)",
        )


def audit(settings: Settings, now: datetime) -> AuditOutcome:
    """Check MEMORY.md and USER.md in the memory blocks folder."""
    outcome = AuditOutcome("memory_blocks")
    warn_fraction = settings.nightly_selfcare.memory_block_warn_fraction
    stale_days = settings.nightly_selfcare.memory_block_stale_days
    folder = settings.memory_blocks_dir
    if folder.is_symlink():
        outcome.warn(
            "memory-block-unreadable",
            "error",
            f"{folder} is a symlink; memory blocks are not read through it",
            fix=f"ls -l {folder}",
        )
        return outcome
    moved = _moved_lately(settings, now)
    for name, limit in block_limits(settings).items():
        _audit_block(outcome, folder / name, limit, warn_fraction, stale_days, now, moved.get(name))
    return outcome
