"""Memory blocks (Hermes ``MEMORY.md`` and ``USER.md``): size against the Hermes limits, entries, age.

Hermes keeps the blocks as entries separated by ``"\\n§\\n"`` and counts the characters of the entries
joined by that delimiter against ``memory_char_limit`` (2,200) and ``user_char_limit`` (1,375).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from mnemo_ops.selfcare.audits.outcome import AuditOutcome
from mnemo_ops.settings import Settings

CODE_PREFIXES = ("memory-block-",)
ENTRY_DELIMITER = "\n§\n"
MIGRATE_FIX = "mnemo-ops run memory-block-migrate"


def block_limits(settings: Settings) -> dict[str, int]:
    """File name -> character limit, from the config (Hermes' defaults otherwise)."""
    return {
        "MEMORY.md": settings.option("nightly_selfcare.memory_char_limit"),
        "USER.md": settings.option("nightly_selfcare.user_char_limit"),
    }


def measure_block(text: str) -> tuple[int, int, int]:
    """(characters as Hermes counts them, number of entries, number of empty entries) of a block."""
    parts = text.split(ENTRY_DELIMITER)
    entries = [part.strip() for part in parts]
    filled = [entry for entry in entries if entry]
    empty = len(entries) - len(filled) if text.strip() else 0
    return len(ENTRY_DELIMITER.join(filled)), len(filled), empty


def _audit_block(
    outcome: AuditOutcome,
    path: Path,
    limit: int,
    warn_fraction: float,
    stale_days: int,
    now: datetime,
) -> None:
    if not path.exists():
        outcome.warn(
            "memory-block-missing",
            "info",
            f"{path} does not exist (Hermes creates it on first use)",
        )
        return
    if path.is_symlink() or not path.is_file():
        outcome.warn(
            "memory-block-unreadable", "error", f"{path} is not a regular file", fix=f"ls -l {path}"
        )
        return
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        outcome.warn(
            "memory-block-unreadable", "error", f"cannot read {path}: {error}", fix=f"ls -l {path}"
        )
        return
    characters, entries, empty = measure_block(text)
    modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    age_days = max(0.0, (now - modified).total_seconds() / 86400)
    fraction = characters / limit
    outcome.stats[path.name] = {
        "chars": characters,
        "limit": limit,
        "percent": round(100 * fraction, 1),
        "entries": entries,
        "age_days": round(age_days, 1),
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


def audit(settings: Settings, now: datetime) -> AuditOutcome:
    """Check MEMORY.md and USER.md in the memory blocks folder."""
    outcome = AuditOutcome("memory_blocks")
    warn_fraction = settings.option("nightly_selfcare.memory_block_warn_fraction")
    stale_days = settings.option("nightly_selfcare.memory_block_stale_days")
    for name, limit in block_limits(settings).items():
        _audit_block(
            outcome, settings.memory_blocks_dir / name, limit, warn_fraction, stale_days, now
        )
    return outcome
