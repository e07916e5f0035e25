"""memory-block-migrate end to end: real homes written by Mnemosyne, real files, the CLI as a process.

The main scenario runs on the aged conversation home (900 turns in 6 sessions, 200 guard probes),
under the recall guard as scheduled; the file-safety cases run on the small sample home.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat

import pytest

from mnemo_ops.evaluation.engines.base import Query
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
from mnemo_ops.memory_blocks.blocks import render_entries
from mnemo_ops.settings import load_settings
from tests.conftest import run_cli
from tests.jobs.memory_block_migrate.helpers import (
    FULL_BLOCKS,
    GUARD_OFF,
    LIMITS,
    block_entries,
    block_usage,
    install_full_blocks,
    live_stored_contents,
    run_migrate,
    stored_rows,
    warning_codes,
    write_config,
)
from tests.purity import assert_unchanged, sample_snapshot


def _canonical_bodies(db_path) -> set[str]:
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return {
            body
            for (body,) in connection.execute(
                "SELECT body FROM canonical_facts WHERE valid_until IS NULL AND source LIKE 'auto:%'"
            )
        }
    finally:
        connection.close()


@pytest.mark.heavy
@pytest.mark.guard
def test_full_blocks_move_verified_exactly_once_under_the_guard(conversations):
    home = conversations
    original = install_full_blocks(home, mode=0o640)
    original_bytes = {name: (home.memory_blocks_dir / name).read_bytes() for name in LIMITS}
    assert block_usage(home, "MEMORY.md") >= 0.90 and block_usage(home, "USER.md") >= 0.85
    assert run_cli(home, "trigger", "install").returncode == 0

    # Dry run: every byte unchanged; which entries would move, with the sizes before and after.
    before = sample_snapshot(home)
    dry, planned = run_migrate(home, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert_unchanged(before, sample_snapshot(home))
    would = [w["message"] for w in planned["warnings"] if w["code"] == "memory-block-would-move"]
    assert len(would) == 2 and "MEMORY.md: 1,981 -> " in would[0] and "(90% -> 5" in would[0]
    assert planned["stats"]["blocks"]["USER.md"]["percent_after"] < 60
    # Every entry that would move, in full, with its size (in the listing and in the stats).
    listed = [w["message"] for w in planned["warnings"] if w["code"].endswith("move-entry")]
    planned_texts = [
        item["text"] for name in LIMITS for item in planned["stats"]["blocks"][name]["moving"]
    ]
    assert len(listed) == len(planned_texts) == 10
    for line, entry in zip(listed, planned_texts):
        assert line.endswith(entry) and f"({len(entry)} characters, not seen before)" in line
    text = run_cli(home, "run", "memory-block-migrate", "--dry-run")
    assert "would move 4 entries" in text.stdout.replace("\n", " ")

    completed, data = run_migrate(home)
    assert completed.returncode == 0, (data.get("error"), completed.stderr[-2000:])
    assert data["status"] == "ok" and data["stats"]["guard"]["verdict"] == "ok"
    assert data["changes"]["entries_moved"] == planned["changes"]["entries_moved"] == 10
    assert data["changes"]["entries_stored"] == 10 and data["checkpoint"]

    now = {name: block_entries(home, name) for name in LIMITS}
    assert block_usage(home, "MEMORY.md") < 0.6 and block_usage(home, "USER.md") < 0.6
    for name in LIMITS:  # the file keeps its mode
        assert stat.S_IMODE((home.memory_blocks_dir / name).stat().st_mode) == 0o640

    # Nothing lost, nothing twice: every entry is in its file or, once, in the database.
    stored = live_stored_contents(home.db_path)
    moved = {name: [e for e in original[name] if e not in now[name]] for name in LIMITS}
    for name in LIMITS:
        for entry in original[name]:
            assert (entry in now[name]) != (stored[entry] == 1), entry
        assert now[name] == [e for e in original[name] if e not in moved[name]]  # order kept
    assert set(stored.values()) == {1} and sum(stored.values()) == 10
    assert sorted(planned_texts) == sorted(e for name in LIMITS for e in moved[name])
    rows = {row["content"]: row for row in stored_rows(home.db_path)}
    for entry in moved["USER.md"]:
        assert (rows[entry]["source"], rows[entry]["veracity"]) == ("user", "stated")
    for entry in moved["MEMORY.md"]:
        assert (rows[entry]["source"], rows[entry]["veracity"]) == ("memory-block", "inferred")
    assert {row["scope"] for row in rows.values()} == {"global"}
    # USER.md entries became canonical facts through the promotion trigger.
    assert set(moved["USER.md"]) <= _canonical_bodies(home.db_path)
    assert not set(moved["MEMORY.md"]) & _canonical_bodies(home.db_path)

    # Every moved entry comes back by its own text in a new conversation, as the plugin injects it.
    settings = load_settings(db=home.db_path, environ=home.environ())
    engine = MnemosyneEngine.from_settings(settings, profile="hermes")
    entries = [entry for name in LIMITS for entry in moved[name]]
    ranked = engine.recall_many([Query(text=e, k=5, session="tomorrow") for e in entries])
    for entry, found in zip(entries, ranked):
        assert rows[entry]["id"] in [item.id for item in found[:5]], entry

    # The trial ran on copies: the live quarantine holds one copy of each file, as it was.
    listing = json.loads(run_cli(home, "--json", "quarantine", "list").stdout)
    copies = {
        os.path.basename(e["original_path"]): e
        for e in listing["entries"]
        if e["rule"] == "memory-block-migrate"
    }
    assert sorted(copies) == ["MEMORY.md", "USER.md"] and len(listing["entries"]) == 2
    assert all(e["mode"] == "0640" for e in copies.values())

    # A second run finds nothing to do.
    again, second = run_migrate(home)
    assert again.returncode == 0 and second["status"] == "ok"
    assert set(second["changes"].values()) == {0}
    sizes = [w["message"] for w in second["warnings"] if w["code"] == "memory-block-size"]
    assert len(sizes) == 2 and all("under the high water mark (80%)" in m for m in sizes)

    # quarantine restore brings back the exact bytes: with --replace, the migrated file goes into
    # quarantine first; without it, once the migrated file was moved aside.
    user = home.memory_blocks_dir / "USER.md"
    migrated = user.read_bytes()
    restored = run_cli(
        home, "--json", "quarantine", "restore", copies["USER.md"]["id"], "--replace"
    )
    assert restored.returncode == 0, restored.stderr
    assert user.read_bytes() == original_bytes["USER.md"]
    assert stat.S_IMODE(user.stat().st_mode) == 0o640
    replaced = json.loads(restored.stdout)["entry"]["replaced_by_entry"]
    assert run_cli(home, "quarantine", "restore", replaced).returncode == 1  # USER.md is there
    memory = home.memory_blocks_dir / "MEMORY.md"
    shutil.move(memory, home.directory / "MEMORY.md.after-migration")
    assert run_cli(home, "quarantine", "restore", copies["MEMORY.md"]["id"]).returncode == 0
    assert memory.read_bytes() == original_bytes["MEMORY.md"]
    assert run_cli(home, "quarantine", "restore", replaced, "--replace").returncode == 0
    assert user.read_bytes() == migrated  # and back again: nothing is ever lost


@pytest.mark.heavy
def test_the_guard_refuses_on_a_tiny_home_and_the_trial_never_touches_the_live_files(
    sample, tmp_path
):
    """On the small sample, ten fresh global rows push Mnemosyne's other memories down its ranked
    list (probe MRR falls past the tolerance; the plain profile judges ranks): the guard refuses,
    and the real blocks, the database and the quarantine are exactly as before."""
    install_full_blocks(sample)
    assert run_cli(sample, "trigger", "install").returncode == 0
    blocks_before = {name: (sample.memory_blocks_dir / name).read_bytes() for name in LIMITS}
    config = tmp_path / "plain.yaml"
    config.write_text("retrieval_eval:\n  profile: plain\n", encoding="utf-8")
    completed, data = run_migrate(sample, config=config)
    assert completed.returncode == 1
    assert data["stats"]["guard"]["verdict"] == "refused"
    assert data["stats"]["guard"]["trial"]["changes"]["entries_moved"] == 10
    assert {n: (sample.memory_blocks_dir / n).read_bytes() for n in LIMITS} == blocks_before
    assert stored_rows(sample.db_path) == []
    assert not (sample.state_dir / "quarantine").exists()
    assert not list((sample.state_dir / "guard").glob("trial-*"))


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["symlink", "invalid-utf8", "oversize"])
def test_a_suspicious_block_is_reported_and_left_byte_identical(sample, tmp_path, kind):
    """The block is left byte-identical. With the symlink, the other block is still looked after;
    the other cases run without it (no store, no recall: the test stays quick)."""
    install_full_blocks(sample)
    if kind != "symlink":
        (sample.memory_blocks_dir / "USER.md").unlink()
    memory = sample.memory_blocks_dir / "MEMORY.md"
    if kind == "symlink":
        target = tmp_path / "outside.md"
        shutil.copyfile(FULL_BLOCKS / "MEMORY.md", target)
        memory.unlink()
        memory.symlink_to(target)
        watched = target
    elif kind == "invalid-utf8":
        memory.write_bytes(memory.read_bytes() + b"\n\xc2\xa7\nbroken \xff\xfe entry")
        watched = memory
    else:
        memory.write_text(
            render_entries(["x" * 2300] * 1 + [f"{n} " + "y" * 2300 for n in range(10)])
        )
        watched = memory
    before = watched.read_bytes()
    config = write_config(tmp_path, GUARD_OFF)
    completed, data = run_migrate(sample, config=config)
    assert completed.returncode == 0, completed.stderr
    assert warning_codes(data)[f"memory-block-{kind}"] == "error"
    assert watched.read_bytes() == before
    if kind == "symlink":
        assert memory.is_symlink() and memory.readlink() == target
    assert not any("MEMORY.md" in row["block"] for row in stored_rows(sample.db_path))
    if kind == "symlink":  # the other block is still looked after
        assert data["changes"]["entries_moved"] == 4 and block_usage(sample, "USER.md") < 0.6
    else:
        assert data["stats"]["blocks"]["USER.md"]["missing"] and stored_rows(sample.db_path) == []


def test_a_missing_block_and_a_symlinked_folder(sample, tmp_path):
    config = write_config(tmp_path, GUARD_OFF)
    for name in LIMITS:  # Hermes creates them on first use
        (sample.memory_blocks_dir / name).unlink()
    completed, data = run_migrate(sample, config=config)
    assert completed.returncode == 0 and data["status"] == "ok"
    assert all(data["stats"]["blocks"][name]["missing"] for name in LIMITS)
    assert set(data["changes"].values()) == {0} and not list(sample.memory_blocks_dir.iterdir())
    real = tmp_path / "real-memories"
    shutil.move(sample.memory_blocks_dir, real)
    sample.memory_blocks_dir.symlink_to(real)
    completed, data = run_migrate(sample, config=config)
    assert completed.returncode == 0
    assert warning_codes(data)["memory-block-refused"] == "error"


@pytest.mark.heavy
def test_an_entry_recall_cannot_find_stays_and_a_keep_pattern_holds(sample, tmp_path):
    """An entry of symbols only is stored but recall by its text finds nothing: it stays in the
    file, is reported, its row is closed, and another entry moves in its place."""
    install_full_blocks(sample)
    entries = block_entries(sample, "MEMORY.md")
    unrecallable = "🍅🍅🍅 🌱🌱 🌞"
    kept = entries[1]
    (sample.memory_blocks_dir / "MEMORY.md").write_text(
        render_entries([unrecallable, *entries]), encoding="utf-8"
    )
    keep_word = kept.split()[0]
    config = write_config(
        tmp_path, GUARD_OFF + f"memory_block_migrate:\n  keep_patterns: ['^{keep_word} ']\n"
    )
    completed, data = run_migrate(sample, config=config)
    assert completed.returncode == 0, completed.stderr
    after = block_entries(sample, "MEMORY.md")
    assert unrecallable in after and kept in after
    assert warning_codes(data)["memory-block-not-recalled"] == "warning"
    assert data["changes"]["entries_not_recalled"] == 1
    assert block_usage(sample, "MEMORY.md") < 0.6
    closed = [row for row in stored_rows(sample.db_path) if row["content"] == unrecallable]
    assert len(closed) == 1 and closed[0]["valid_until"] is not None
    # Not tried again, and nothing else to do.
    again, second = run_migrate(sample, config=config)
    assert again.returncode == 0 and set(second["changes"].values()) == {0}


@pytest.mark.heavy
def test_nightly_first_seen_dates_decide_the_order(sample, tmp_path):
    """Entries first seen by an earlier nightly audit move before one written since, wherever the
    agent put it in the file."""
    install_full_blocks(sample)
    config = write_config(tmp_path, GUARD_OFF)
    nightly = run_cli(sample, "--config", str(config), "--json", "run", "nightly-selfcare")
    assert nightly.returncode == 0, nightly.stderr
    assert json.loads(nightly.stdout)["changes"]["block_entries_recorded"] == 28
    # No wait: first-seen dates have one-second resolution, and a newcomer recorded in the same
    # second as the nightly audit still moves after the entries the audit saw (plan.choose).
    entries = block_entries(sample, "USER.md")
    newcomer = "Prefers window seats on trains and an aisle seat on planes."
    (sample.memory_blocks_dir / "USER.md").write_text(
        render_entries([newcomer, *entries[:-1]]), encoding="utf-8"
    )
    completed, data = run_migrate(sample, config=config)
    assert completed.returncode == 0, completed.stderr
    after = block_entries(sample, "USER.md")
    assert newcomer in after and entries[0] not in after and entries[1] not in after
    report = run_cli(sample, "--config", str(config), "report")
    assert (
        "Memory blocks:" in report.stdout and "moved into Mnemosyne in the period" in report.stdout
    )
    again = run_cli(sample, "--config", str(config), "--json", "run", "nightly-selfcare")
    figures = json.loads(again.stdout)["stats"]["memory_blocks"]["USER.md"]
    assert figures["moved_last_24h"]["entries"] == data["stats"]["blocks"]["USER.md"]["moved"]


def test_options_are_checked(sample):
    completed, data = run_migrate(sample, "-o", "low_water=0.9")
    assert completed.returncode == 2 and "low_water (0.9) must be below" in data["error"]
    completed, data = run_migrate(sample, "-o", "keep_patterns=['(unclosed']")
    assert completed.returncode == 2 and "keep_patterns" in data["error"]
    plain = run_cli(sample, "run", "memory-block-migrate", "-o", "high_water=1.5")
    assert plain.returncode == 2 and plain.stderr.count("\n") == 1
