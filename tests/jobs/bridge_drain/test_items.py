"""Property tests (hypothesis) for the queue item parser and validator."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo_ops.jobs.bridge_drain.items import (
    KNOWN_FIELDS,
    MEMORY_TYPES,
    VERACITIES,
    FileRejected,
    Item,
    derive_key,
    parse_file,
)

# Text that survives UTF-8 (no lone surrogates) and is not blank.
text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80).filter(
    str.strip
)
label = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    str.strip
)
json_scalar = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | text
extra_names = st.text("abcdefghij_", min_size=1, max_size=8).filter(
    lambda name: name not in KNOWN_FIELDS and name != "_bridge"
)

valid_item = st.fixed_dictionaries(
    {"content": text},
    optional={
        "source": label,
        "importance": st.floats(0, 1, allow_nan=False),
        "veracity": st.sampled_from(VERACITIES),
        "session_id": label,
        "memory_type": st.sampled_from(MEMORY_TYPES),
        "metadata": st.dictionaries(st.sampled_from(["a", "b", "c"]), json_scalar, max_size=3),
        "idempotency_key": label,
        "created_at": st.sampled_from(
            ["2026-11-30T08:00:00+00:00", "2026-01-02", "2026-11-30T08:00:00Z"]
        ),
    },
)


@st.composite
def item_with_extras(draw):
    item = draw(valid_item)
    extras = draw(st.dictionaries(extra_names, json_scalar, max_size=3))
    extras = {key: value for key, value in extras.items() if key not in item.get("metadata", {})}
    return {**item, **extras}, extras


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.sampled_from(["f.json", "f.jsonl"]))
def test_arbitrary_bytes_never_crash(data, name):
    try:
        parsed = parse_file(name, data)
    except FileRejected as rejection:
        assert rejection.reason
        return
    for rejected in parsed.rejected:
        assert rejected.reasons and all(rejected.reasons)
    positions = [entry.position for entry in [*parsed.items, *parsed.rejected]]
    assert len(positions) == len(set(positions))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(item_with_extras(), min_size=1, max_size=8), st.sampled_from([".json", ".jsonl"]))
def test_valid_items_round_trip(pairs, suffix):
    items = [item for item, _ in pairs]
    if suffix == ".json":
        data = json.dumps(items)
    else:
        data = "\n".join(json.dumps(item) for item in items) + "\n"
    parsed = parse_file("capture" + suffix, data.encode("utf-8"))
    assert parsed.rejected == []
    assert len(parsed.items) == len(items)
    for (given_item, extras), item in zip(pairs, parsed.items):
        assert isinstance(item, Item)
        assert item.content == given_item["content"]
        assert item.source == given_item.get("source", "bridge")
        assert item.veracity == given_item.get("veracity", "unknown")
        assert item.session_id == given_item.get("session_id", "bridge")
        assert item.importance == pytest.approx(given_item.get("importance", 0.5))
        for key, value in extras.items():  # unknown fields are kept in metadata
            assert item.metadata[key] == value
        for key, value in given_item.get("metadata", {}).items():
            assert item.metadata[key] == value
        if "idempotency_key" in given_item:
            assert item.idempotency_key == given_item["idempotency_key"]
        else:
            assert item.idempotency_key == derive_key(
                "capture" + suffix, item.position, item.content
            )
        assert item.row_metadata("capture" + suffix)["_bridge"]["key"] == item.idempotency_key
    # Parsing is deterministic: the same file gives the same keys (re-delivery is a no-op).
    again = parse_file("capture" + suffix, data.encode("utf-8"))
    assert [item.idempotency_key for item in again.items] == [
        item.idempotency_key for item in parsed.items
    ]


bad_field = st.sampled_from(
    [
        ("content", ""),
        ("content", "   "),
        ("content", 5),
        ("content", None),
        ("importance", 1.5),
        ("importance", -0.1),
        ("importance", "high"),
        ("importance", True),
        ("veracity", "certain"),
        ("veracity", 3),
        ("session_id", ""),
        ("session_id", []),
        ("memory_type", "dream"),
        ("metadata", [1, 2]),
        ("metadata", "x"),
        ("created_at", "yesterday"),
        ("created_at", 20261130),
        ("idempotency_key", ""),
        ("source", {"a": 1}),
    ]
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(valid_item, st.none() | bad_field), min_size=1, max_size=10))
def test_each_bad_item_is_rejected_alone_with_its_field_named(entries):
    lines = []
    for item, bad in entries:
        if bad is not None:
            field, value = bad
            item = {**item, field: value}
        lines.append(json.dumps(item))
    parsed = parse_file("mixed.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))
    bad_positions = {number for number, (_, bad) in enumerate(entries, start=1) if bad is not None}
    assert {entry.position for entry in parsed.rejected} == bad_positions
    assert {item.position for item in parsed.items} == set(
        range(1, len(entries) + 1)
    ) - bad_positions
    for entry in parsed.rejected:
        field = entries[entry.position - 1][1][0]
        assert any(f"'{field}'" in reason for reason in entry.reasons), entry.reasons
        assert entry.original == lines[entry.position - 1]  # kept verbatim for failed/


@settings(max_examples=100)
@given(st.integers(1, 200), st.integers(0, 400))
def test_content_size_cap(cap, size):
    data = json.dumps(
        {"content": "é" * (size // 2) + "x" * (size % 2)}
    )  # bytes, not characters, count
    parsed = parse_file("one.json", data.encode("utf-8"), max_item_bytes=cap)
    assert (len(parsed.items) == 1) == (0 < size <= cap)


@settings(max_examples=100)
@given(st.binary(min_size=1, max_size=50))
def test_file_size_cap_rejects_whole(data):
    with pytest.raises(FileRejected, match="over the"):
        parse_file("big.jsonl", data + b"\n" * 20, max_file_bytes=len(data) + 19)


@given(label, st.integers(1, 10**6), text, label, st.integers(1, 10**6), text)
def test_derived_keys_differ_when_name_position_or_content_differ(
    name1, pos1, content1, name2, pos2, content2
):
    same = (name1, pos1, content1) == (name2, pos2, content2)
    assert (derive_key(name1, pos1, content1) == derive_key(name2, pos2, content2)) == same


def test_reserved_metadata_and_nan_are_rejected():
    parsed = parse_file(
        "x.jsonl",
        b'{"content": "a", "metadata": {"_bridge": 1}}\n{"content": "b", "importance": NaN}\n',
    )
    assert [entry.position for entry in parsed.rejected] == [1, 2]
    assert "reserved" in parsed.rejected[0].reasons[0] and "NaN" in parsed.rejected[1].reasons[0]


def test_line_separators_inside_strings_do_not_split_lines():
    parsed = parse_file(
        "x.jsonl", '{"content": "a\u2028b"}\r\n\n{"content": "c"}\n'.encode("utf-8")
    )
    assert [item.content for item in parsed.items] == ["a\u2028b", "c"]
    assert [item.position for item in parsed.items] == [1, 3]
