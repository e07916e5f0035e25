"""The starter suite's builder (``evaluation.starter``) on the sample database written by Mnemosyne:
which statements become cases, what is held back, and that it only reads."""

from __future__ import annotations

import sqlite3

import pytest

from mnemo_ops.evaluation.starter import answer_of, build_starter
from tests.purity import assert_unchanged, sample_snapshot


@pytest.mark.parametrize(
    "text, answer",
    [
        (
            "Dana's home server runs Debian with PostgreSQL 15 for the photo archive",
            ("number", "15"),
        ),
        ("Deployments happen on Saturday mornings so nobody is disturbed", ("date", "Saturday")),
        ("[USER] my sister moved to Porto last year", ("name", "Porto")),
        ("Dana speaks some Portuguese from a course she took years ago", ("name", "Portuguese")),
        ("I met him last week", None),  # relative dates are no answer
        ("Dana prefers organic treatments in the garden", None),
    ],
)
def test_answer_is_a_number_then_a_calendar_date_then_a_name(text, answer):
    assert answer_of(text) == answer


def test_cases_come_from_the_users_own_statements_and_only_read(sample):
    before = sample_snapshot(sample)
    starter = build_starter(sample.db_path)
    assert_unchanged(before, sample_snapshot(sample))
    assert starter == build_starter(sample.db_path)  # the same database, the same suite
    connection = sqlite3.connect(f"file:{sample.db_path}?mode=ro", uri=True)
    rows = {
        memory_id: (source, content)
        for memory_id, source, content in connection.execute(
            "SELECT id, source, content FROM working_memory"
        )
    }
    connection.close()
    users = sum(1 for source, _ in rows.values() if source == "user")
    assert starter.statements == users
    assert len(starter.cases) + sum(starter.skipped.values()) == users
    for case in starter.cases:
        source, content = rows[case.relevant[0]]
        assert source == "user" and case.answer in content
        assert case.answer.lower() not in case.query.split()
        assert set(case.query.split()) <= set(content.lower().replace("'", " ").split())
    assert len(build_starter(sample.db_path, max_cases=2).cases) == 2
