"""Freshness findings: maps built on memories that have since changed, and memory blocks that still
carry a canonical fact that has been superseded (a stale fact injected into every turn)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import apsw
from rapidfuzz import fuzz

from mnemo_ops.database import table_names
from mnemo_ops.database.fts_query import tokens
from mnemo_ops.jobs.evening_batch.topics.changes import MapDiff

BLOCK_FILES = ("MEMORY.md", "USER.md")
ENTRY_SEPARATOR = "\n§\n"
MIN_FACT_TOKENS = 3
"""A superseded body shorter than this ("coffee") would match far too many entries to mean anything."""
REFRESH_FIX = "mnemo-ops run evening-batch"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One freshness finding (becomes a result warning)."""

    code: str
    severity: str
    message: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as in a result's warnings."""
        data = {"code": self.code, "severity": self.severity, "message": self.message}
        if self.fix:
            data["fix"] = self.fix
        return data


def map_staleness(
    diff: MapDiff | None, topic_build: dict | None, seed_build: dict | None, fraction: float
) -> tuple[list[Finding], dict[str, Any]]:
    """Findings for maps that are missing, or built on memories of which more than `fraction` changed since.

    `diff` is ``changes.diff_since_map`` (None when no map is stored).
    """
    findings: list[Finding] = []
    if diff is None or topic_build is None:
        findings.append(
            Finding(
                "topic-map-missing", "info", "the topic map has not been built yet", REFRESH_FIX
            )
        )
        return findings, {"changed_memories": None, "live_memories": None, "changed_share": None}
    share = diff.share
    figures = {
        "changed_memories": diff.count,
        "live_memories": diff.live_count,
        "changed_share": round(share, 4),
    }
    if share > fraction:
        findings.append(
            Finding(
                "topic-map-stale",
                "warning",
                f"the topic map is stale: {diff.count} of {diff.live_count} live memories "
                f"({share:.0%}) changed since it "
                f"was built at {topic_build['built_at']} (threshold {fraction:.0%})",
                REFRESH_FIX,
            )
        )
    if seed_build is None:
        findings.append(
            Finding("seed-map-missing", "info", "the seed map has not been built yet", REFRESH_FIX)
        )
    elif share > fraction or (seed_build["built_at"] or "") < (topic_build["built_at"] or ""):
        findings.append(
            Finding(
                "seed-map-stale",
                "warning",
                f"the seed map is stale: built at {seed_build['built_at']}, on memories or a "
                "topic map that changed since",
                REFRESH_FIX,
            )
        )
    return findings, figures


def read_block_entries(blocks_dir: Path) -> tuple[list[tuple[str, str]], list[Finding]]:
    """(file name, entry) pairs of the memory blocks, and findings for blocks that cannot be read."""
    entries: list[tuple[str, str]] = []
    findings: list[Finding] = []
    for name in BLOCK_FILES:
        path = blocks_dir / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            findings.append(
                Finding("memory-block-unreadable", "warning", f"cannot read {path}: {error}")
            )
            continue
        entries.extend(
            (name, entry.strip()) for entry in text.split(ENTRY_SEPARATOR) if entry.strip()
        )
    return entries, findings


def superseded_facts(connection: apsw.Connection, owner: str) -> list[dict[str, Any]]:
    """Canonical facts of `owner` closed by a newer version of the same slot, with that newer current fact."""
    if "canonical_facts" not in table_names(connection):
        return []
    rows = connection.execute(
        "SELECT old.category, old.name, old.body, old.version, old.valid_until, new.body, new.version "
        "FROM canonical_facts AS old JOIN canonical_facts AS new "
        "ON new.owner_id = old.owner_id AND new.category = old.category AND new.name = old.name "
        "AND new.valid_until IS NULL AND new.version > old.version "
        "WHERE old.owner_id = ? AND old.valid_until IS NOT NULL ORDER BY old.category, old.name, old.version",
        (owner,),
    )
    return [
        {
            "category": row[0],
            "name": row[1],
            "body": row[2],
            "version": row[3],
            "closed_at": row[4],
            "current_body": row[5],
            "current_version": row[6],
        }
        for row in rows
    ]


def _comparable(text: str) -> str:
    return " ".join(tokens(text, limit=512))


def stale_block_entries(
    connection: apsw.Connection, blocks_dir: Path, owner: str, similarity: float
) -> list[Finding]:
    """Entries of MEMORY.md/USER.md that match a superseded canonical fact better than its newer version."""
    facts = superseded_facts(connection, owner)
    entries, findings = read_block_entries(blocks_dir)
    if not facts:
        return findings
    for file_name, entry in entries:
        entry_text = _comparable(entry)
        for fact in facts:
            old_text = _comparable(fact["body"])
            if len(old_text.split()) < MIN_FACT_TOKENS:
                continue
            old_score = fuzz.token_set_ratio(entry_text, old_text)
            if (
                old_score < similarity
                or fuzz.token_set_ratio(entry_text, _comparable(fact["current_body"])) >= old_score
            ):
                continue
            findings.append(
                Finding(
                    "memory-block-superseded-fact",
                    "warning",
                    f'{file_name} entry "{_short(entry)}" matches canonical fact {fact["category"]}/{fact["name"]} '
                    f'v{fact["version"]} "{_short(fact["body"])}", superseded on {fact["closed_at"]} by '
                    f'v{fact["current_version"]} "{_short(fact["current_body"])}"',
                    f"edit {blocks_dir / file_name}",
                )
            )
            break  # one finding per entry: the best-known superseded slot is enough to act on
    return findings


def _short(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
