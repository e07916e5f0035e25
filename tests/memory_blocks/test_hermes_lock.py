"""Hermes' lock convention, against a real second process that writes the Hermes way."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.jobs.memory_block_migrate.rewrite import remove_entries
from mnemo_ops.memory_blocks.blocks import parse_entries, render_entries
from mnemo_ops.memory_blocks.hermes_lock import (
    BlockLockTimeout,
    block_lock,
    remove_stale_temporaries,
)

WRITER = Path(__file__).with_name("hermes_writer.py")
ENTRIES = ["oldest note about the server", "second note about the garden", "newest note"]


def _holder(path: Path, held: Path, seconds: float, entry: str) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, str(WRITER), "hold", str(path), str(held), str(seconds), entry]
    )
    deadline = time.monotonic() + 30
    while not held.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert held.exists(), "the writer never took the lock"
    return process


def test_a_rewrite_waits_for_the_agent_and_keeps_what_it_wrote_meanwhile(tmp_path):
    path = tmp_path / "MEMORY.md"
    path.write_text(render_entries(ENTRIES))
    os.chmod(path, 0o640)
    agent = _holder(path, tmp_path / "held", 0.6, "entry the agent adds while we wait")
    started = time.monotonic()
    outcome = remove_entries(path, 2200, [ENTRIES[0]], 30, preserve=lambda block: "copy-id")
    waited = time.monotonic() - started
    agent.wait(timeout=30)
    assert waited >= 0.4  # it really waited for the agent's lock
    assert parse_entries(path.read_text()) == [
        ENTRIES[1],
        ENTRIES[2],
        "entry the agent adds while we wait",
    ]
    assert outcome.removed == [ENTRIES[0]] and outcome.quarantine_id == "copy-id"
    # The file keeps the mode it had when we re-read it (Hermes' mkstemp wrote it as 0600).
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_without_the_lock_and_the_reread_the_agents_entry_would_be_lost(tmp_path):
    """The harm the convention exists for: a read-modify-write outside the lock drops a concurrent add."""
    path = tmp_path / "MEMORY.md"
    path.write_text(render_entries(ENTRIES))
    stale = parse_entries(path.read_text())  # read before the agent's write, as a naive job would
    agent = _holder(path, tmp_path / "held", 0.0, "entry the agent adds")
    agent.wait(timeout=30)
    path.write_text(render_entries([entry for entry in stale if entry != ENTRIES[0]]))
    assert "entry the agent adds" not in parse_entries(path.read_text())


def test_a_verified_entry_the_agent_changed_or_that_is_now_last_is_left_alone(tmp_path):
    path = tmp_path / "USER.md"
    path.write_text(render_entries(["changed by the agent", ENTRIES[1], ENTRIES[2]]))
    os.chmod(path, 0o640)
    outcome = remove_entries(
        path, 1375, [ENTRIES[0], ENTRIES[1], ENTRIES[2]], 5, preserve=lambda block: "id"
    )
    assert outcome.changed_meanwhile == [ENTRIES[0]]
    assert outcome.kept_as_last == [ENTRIES[2]]
    assert parse_entries(path.read_text()) == ["changed by the agent", ENTRIES[2]]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the file keeps its mode


def test_the_lock_wait_is_bounded_and_a_symlinked_lock_file_is_refused(tmp_path):
    path = tmp_path / "MEMORY.md"
    path.write_text(render_entries(ENTRIES))
    before = path.read_bytes()
    agent = _holder(path, tmp_path / "held", 1.5, "late entry")
    with pytest.raises(BlockLockTimeout):
        remove_entries(path, 2200, [ENTRIES[0]], 0.2, preserve=lambda block: "id")
    agent.wait(timeout=30)
    (tmp_path / "USER.md").write_text("x")
    target = tmp_path / "target"
    target.write_text("not a lock")
    (tmp_path / "USER.md.lock").symlink_to(target)
    with pytest.raises(MnemoOpsError, match="symlink"), block_lock(tmp_path / "USER.md", 1):
        pass
    assert target.read_text() == "not a lock"
    assert b"late entry" in path.read_bytes() and before in path.read_bytes()


def test_stale_temporaries_of_ours_are_removed_and_nothing_else(tmp_path):
    (tmp_path / ".mnemo-ops-MEMORY.md.abc.tmp").write_text("partial")
    (tmp_path / ".mem_hermes.tmp").write_text("Hermes' own")
    (tmp_path / "MEMORY.md").write_text("x")
    (tmp_path / ".mnemo-ops-link.tmp").symlink_to(tmp_path / "MEMORY.md")
    assert remove_stale_temporaries(tmp_path) == [".mnemo-ops-MEMORY.md.abc.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".mem_hermes.tmp",
        ".mnemo-ops-link.tmp",
        "MEMORY.md",
    ]


def test_restore_replace_waits_for_the_agent_and_keeps_the_file_it_replaces(sample):
    """``quarantine restore --replace`` of a block's copy: the file now there goes into quarantine
    first, both under Hermes' lock, so an entry the agent writes at that moment is never lost."""
    from datetime import UTC, datetime

    from mnemo_ops.jobs.nightly_selfcare import quarantine
    from tests.jobs.nightly_selfcare.helpers import settings_for

    settings = settings_for(sample)
    path = sample.memory_blocks_dir / "MEMORY.md"
    path.write_text(render_entries(ENTRIES))
    os.chmod(path, 0o640)
    before = path.read_bytes()
    copy = quarantine.preserve_copy(
        settings,
        path,
        before,
        0o640,
        path.stat().st_mtime,
        "memory-block-migrate",
        datetime.now(UTC),
    )
    path.write_text(render_entries(ENTRIES[1:]))  # the migration's rewrite
    with pytest.raises(MnemoOpsError, match="--replace"):
        quarantine.restore(settings, copy["id"])
    planned = quarantine.restore(settings, copy["id"], dry_run=True, replace=True)
    assert planned["would_replace"] == str(path) and path.read_text() == render_entries(ENTRIES[1:])
    agent = _holder(path, sample.directory / "held", 0.6, "entry the agent adds meanwhile")
    started = time.monotonic()
    restored = quarantine.restore(settings, copy["id"], replace=True)
    waited = time.monotonic() - started
    agent.wait(timeout=30)
    assert waited >= 0.4  # it really waited for the agent's lock
    assert path.read_bytes() == before and stat.S_IMODE(path.stat().st_mode) == 0o640
    # The file it replaced (the agent's new entry included) is in quarantine, restorable.
    replaced = {e["id"]: e for e in quarantine.list_entries(settings)}[
        restored["replaced_by_entry"]
    ]
    assert replaced["rule"] == "replaced-by-restore" and replaced["status"] == "staged"
    kept = settings.quarantine_dir / replaced["staged_at"][:10] / replaced["stored_path"]
    assert parse_entries(kept.read_text()) == [*ENTRIES[1:], "entry the agent adds meanwhile"]
