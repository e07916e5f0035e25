"""Shared helpers for the memory-block-migrate tests: full blocks on a real home, and what is where.

The database is read with Python's sqlite3 only, and only while no apsw connection of this process
is open (docs/contracts.md: one SQLite library per process per database); the job itself always
runs as a real CLI subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

from mnemo_ops.foundation.resources import resource_dir
from mnemo_ops.memory_blocks.blocks import parse_entries, usage
from mnemo_ops.mnemosyne.sample_home import SampleLayout
from tests.conftest import run_cli

LIMITS = {"MEMORY.md": 2200, "USER.md": 1375}
FULL_BLOCKS = resource_dir("fixtures") / "memory_blocks"
"""MEMORY.md at 90% of 2,200 characters, USER.md at 85% of 1,375 (Hermes' default limits)."""


def install_full_blocks(layout: SampleLayout, mode: int = 0o640) -> dict[str, list[str]]:
    """Copy the full blocks into the home (with `mode`); return their entries."""
    layout.memory_blocks_dir.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name in LIMITS:
        target = layout.memory_blocks_dir / name
        shutil.copyfile(FULL_BLOCKS / name, target)
        os.chmod(target, mode)
        entries[name] = block_entries(layout, name)
    return entries


def block_entries(layout: SampleLayout, name: str) -> list[str]:
    """The entries of a block as Hermes reads them."""
    return parse_entries((layout.memory_blocks_dir / name).read_text(encoding="utf-8"))


def block_usage(layout: SampleLayout, name: str) -> float:
    """The block's share of its default limit."""
    return usage(block_entries(layout, name)) / LIMITS[name]


def stored_rows(db_path: Path) -> list[dict]:
    """Every row the migration stored (found by its metadata key), with whether it is live."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT id, content, source, veracity, importance, scope, valid_until, "
            "json_extract(metadata_json, '$._memory_block.key'), "
            "json_extract(metadata_json, '$._memory_block.block') FROM working_memory "
            "WHERE json_valid(metadata_json) "
            "AND json_extract(metadata_json, '$._memory_block.key') IS NOT NULL"
        ).fetchall()
    finally:
        connection.close()
    names = ("id", "content", "source", "veracity", "importance", "scope", "valid_until", "key")
    return [dict(zip((*names, "block"), row)) for row in rows]


def live_stored_contents(db_path: Path) -> Counter:
    """Content -> number of live stored rows."""
    return Counter(row["content"] for row in stored_rows(db_path) if row["valid_until"] is None)


def write_config(directory: Path, text: str) -> Path:
    """A mnemo-ops config file."""
    path = directory / "mnemo-ops.yaml"
    path.write_text(text, encoding="utf-8")
    return path


GUARD_OFF = "guard:\n  enabled: false\n"
"""For tests about the files and the database, not about recall: the guard has its own tests."""


def run_migrate(layout: SampleLayout, *args: str, config: Path | None = None, timeout=300):
    """``mnemo-ops --json run memory-block-migrate ARGS``; (completed process, parsed JSON)."""
    prefix = ["--config", str(config)] if config else []
    completed = run_cli(
        layout, *prefix, "--json", "run", "memory-block-migrate", *args, timeout=timeout
    )
    try:
        data = json.loads(completed.stdout)
    except ValueError:
        data = {}
    return completed, data


def warning_codes(data: dict) -> dict[str, str]:
    """code -> severity of a result's warnings."""
    return {warning["code"]: warning["severity"] for warning in data.get("warnings", [])}
