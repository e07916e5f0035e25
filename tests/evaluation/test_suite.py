"""Suite files: JSONL and YAML, validation errors that name file, line and field."""

import hashlib
import json

import pytest

from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.foundation.resources import resource_dir


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_suite_with_all_fields(tmp_path):
    line = {
        "id": "c1",
        "query": "q?",
        "relevant": ["abc"],
        "expect": ["x"],
        "session": "s",
        "category": "fact",
        "k": 5,
    }
    path = write(
        tmp_path,
        "s.jsonl",
        json.dumps(line) + "\n\n" + json.dumps({"id": 2, "query": "r", "expect": "y"}) + "\n",
    )
    suite = load_suite(path)
    assert [case.id for case in suite.cases] == ["c1", "2"]
    first = suite.cases[0]
    assert (first.relevant, first.expect, first.session, first.category, first.k) == (
        ("abc",),
        ("x",),
        "s",
        "fact",
        5,
    )
    assert suite.cases[1].expect == ("y",)
    assert suite.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_yaml_suite_list_and_mapping(tmp_path):
    listed = load_suite(write(tmp_path, "a.yaml", "- id: a\n  query: where?\n  expect: [Lisbon]\n"))
    assert listed.cases[0].expect == ("Lisbon",) and listed.k is None
    mapped = load_suite(
        write(tmp_path, "b.yml", "k: 5\ncases:\n  - {id: a, query: q, relevant: [m1]}\n")
    )
    assert mapped.k == 5 and mapped.cases[0].relevant == ("m1",)


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": "a", "query": "q"}', "field 'relevant' or 'expect' is required"),
        ('{"query": "q", "expect": ["x"]}', "field 'id' is required"),
        ('{"id": "a", "expect": ["x"]}', "field 'query' is required"),
        (
            '{"id": "a", "query": "q", "expect": ["x"], "k": 0}',
            "field 'k' must be a positive integer",
        ),
        (
            '{"id": "a", "query": "q", "expect": [""]}',
            "field 'expect' must be a list of non-empty strings",
        ),
        ('{"id": "a", "query": "q", "expect": ["x"], "colour": 1}', "unknown field 'colour'"),
        ('{"id": "a", "query": ', "not valid JSON"),
    ],
)
def test_bad_cases_name_file_line_and_field(tmp_path, line, message):
    path = write(
        tmp_path, "bad.jsonl", '{"id": "ok", "query": "q", "expect": ["x"]}\n' + line + "\n"
    )
    with pytest.raises(UsageError) as error:
        load_suite(path)
    assert f"{path}:2" in error.value.message and message in error.value.message
    assert error.value.exit_code == 2


def test_duplicate_ids_empty_and_missing_suites(tmp_path):
    with pytest.raises(UsageError, match="duplicate case id 'a'"):
        load_suite(write(tmp_path, "d.jsonl", '{"id":"a","query":"q","expect":["x"]}\n' * 2))
    with pytest.raises(UsageError, match="no cases"):
        load_suite(write(tmp_path, "e.jsonl", "\n"))
    with pytest.raises(UsageError, match="not found"):
        load_suite(tmp_path / "missing.jsonl")
    with pytest.raises(UsageError, match="case 1: field 'query'"):
        load_suite(write(tmp_path, "f.yaml", "- {id: a, expect: [x]}\n"))


def test_sample_suite_is_valid_and_uses_expect():
    suite = load_suite(resource_dir("fixtures") / "eval" / "sample.jsonl")
    assert len(suite.cases) >= 12
    assert all(
        case.expect and not case.relevant for case in suite.cases
    )  # ids are random per build
    assert len({case.category for case in suite.cases}) >= 3
