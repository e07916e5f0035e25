"""The block format as Hermes reads and writes it, the safe read, and Hermes' limits from config.yaml."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from mnemo_ops.memory_blocks.blocks import (
    Block,
    BlockProblem,
    parse_entries,
    read_block,
    render_entries,
    usage,
)
from mnemo_ops.memory_blocks.limits import block_limits
from mnemo_ops.settings import load_settings

entry_text = (
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="§"), min_size=1
    )
    .map(str.strip)
    .filter(bool)
)


@given(st.lists(entry_text, max_size=12, unique=True))
def test_parse_reads_back_what_hermes_writes(entries):
    assert parse_entries(render_entries(entries)) == entries
    assert usage(entries) == len(render_entries(entries))


def test_parse_strips_drops_empty_and_keeps_the_first_of_repeats():
    text = "  one \n§\n\n§\ntwo\n§\none\n§\nthree § inside\n"
    assert parse_entries(text) == ["one", "two", "three § inside"]
    assert parse_entries("  \n ") == []


def test_read_block_refuses_a_symlink_without_reading_through_it(tmp_path):
    target = tmp_path / "elsewhere.md"
    target.write_text("secret elsewhere")
    (tmp_path / "MEMORY.md").symlink_to(target)
    found = read_block(tmp_path / "MEMORY.md", 2200)
    assert isinstance(found, BlockProblem) and found.code == "symlink"
    assert read_block(tmp_path / "USER.md", 1375) is None  # missing is fine


def test_read_block_refuses_invalid_utf8_and_oversize(tmp_path):
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"fine entry\n\xc2\xa7\nbroken \xff byte")
    found = read_block(path, 2200)
    assert isinstance(found, BlockProblem) and found.code == "invalid-utf8"
    assert "byte 21" in found.message
    path.write_text("x" * (10 * 100 + 1))
    assert read_block(path, 100).code == "oversize"
    path.write_text("é" * 1000)  # 2,000 bytes, 1,000 characters: within 10x a limit of 100
    block = read_block(path, 100)
    assert isinstance(block, Block) and block.chars == 1000


def test_read_block_keeps_the_exact_bytes_and_mode(tmp_path):
    path = tmp_path / "USER.md"
    path.write_bytes(b"a\n\xc2\xa7\nb\n")
    os.chmod(path, 0o640)
    block = read_block(path, 1375)
    assert block.data == b"a\n\xc2\xa7\nb\n" and block.mode == 0o640 and block.entries == ["a", "b"]


def test_limits_come_from_hermes_config_yaml_when_it_sets_them(sample):
    settings = load_settings(db=sample.db_path, environ=sample.environ())
    assert block_limits(settings).chars == {"MEMORY.md": 2200, "USER.md": 1375}
    (sample.hermes_home / "config.yaml").write_text(
        "model: x\nmemory:\n  memory_char_limit: 4000\n  user_char_limit: yes\n"
    )
    limits = block_limits(settings)
    assert limits.chars == {"MEMORY.md": 4000, "USER.md": 1375}
    assert "memory.memory_char_limit" in limits.sources["MEMORY.md"]
    assert "user_char_limit is not a positive integer" in limits.problem
    (sample.hermes_home / "config.yaml").write_text("memory: [unclosed\n")
    assert block_limits(settings).chars["MEMORY.md"] == 2200
    assert "cannot read Hermes' limits" in block_limits(settings).problem
    # safe_load: a YAML tag that would build a Python object is refused, not executed.
    (sample.hermes_home / "config.yaml").write_text("memory: !!python/object:os.system {}\n")
    assert block_limits(settings).chars["MEMORY.md"] == 2200
