"""The safe FTS5 query builder: whatever the input, SQLite accepts the query and nothing steers it.

Every generated query is run against a real FTS5 table twice: through apsw (its bundled, modern
SQLite) and through Python's sqlite3 (the SQLite that Mnemosyne's own connections use).
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo_ops.database import fts_query
from mnemo_ops.database.fts_query import (
    MAX_TERMS,
    MAX_TOKEN_CHARS,
    Vocabulary,
    build_query,
    match_expression,
    tokens,
)

DOCUMENTS = [
    "Dana grows heirloom tomatoes in raised beds behind the house",
    "The nightly backup script failed because the disk reached 95 percent usage",
    "Dana is planning a trip to Lisbon in March with her sister",
    "Café naïve Straße İstanbul 한국어 日本語 Ελληνικά русский",
    "quotes \" and 'single' and NEAR(a b) and col:umn and * and ^start",
]

# FTS5 syntax that must never survive into a query: operators, column filters, NEAR, prefix, initial token.
FTS_SYNTAX = [
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(",
    ")",
    "(",
    ":",
    "*",
    "^",
    '"',
    "'",
    "+",
    "-",
    "{",
    "}",
    "content:",
    "id:",
    "{content id}:",
    "NEAR(a b, 3)",
    "a*",
    "^a",
    '"a" "b"',
    "\x00",
    "\\",
]

SAFE_QUERY = re.compile(r'^"[^"\s]{2,64}"( OR "[^"\s]{2,64}")*$')


def assert_safe(query: str) -> None:
    """Quoted terms joined by OR, each only letters, digits and combining marks."""
    assert SAFE_QUERY.match(query), query
    for term in re.findall(r'"([^"]*)"', query):
        assert all(unicodedata.category(character)[0] in "LNM" for character in term), term


def _apsw_table() -> apsw.Connection:
    connection = apsw.Connection(":memory:")
    connection.execute("CREATE VIRTUAL TABLE fts_working USING fts5(id UNINDEXED, content)")
    for number, document in enumerate(DOCUMENTS):
        connection.execute(
            "INSERT INTO fts_working(id, content) VALUES (?, ?)", (f"d{number}", document)
        )
    return connection


def _sqlite3_table() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE fts_working USING fts5(id UNINDEXED, content)")
    connection.executemany(
        "INSERT INTO fts_working(id, content) VALUES (?, ?)",
        [(f"d{number}", document) for number, document in enumerate(DOCUMENTS)],
    )
    return connection


APSW = _apsw_table()
SQLITE3 = _sqlite3_table()
VOCABULARY = Vocabulary(APSW)


def _run_everywhere(query: str) -> tuple[list, list]:
    """Run `query` as a MATCH (bm25-ranked, as memory-maintain does) on both SQLite builds."""
    sql = "SELECT id, bm25(fts_working) FROM fts_working WHERE fts_working MATCH ? ORDER BY rank LIMIT 10"
    apsw_rows = APSW.execute(sql, (query,)).fetchall()
    sqlite3_rows = SQLITE3.execute(sql, (query,)).fetchall()
    return apsw_rows, sqlite3_rows


hostile_text = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(codec="utf-8")),
    st.lists(
        st.one_of(st.sampled_from(FTS_SYNTAX), st.text(min_size=1, max_size=12)), max_size=30
    ).map(" ".join),
    st.lists(
        st.sampled_from(FTS_SYNTAX + ["dana", "tomatoes", "Lisbon", "İstanbul", "日本語"]),
        max_size=40,
    ).map("".join),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text)
def test_any_text_gives_a_query_both_sqlite_builds_accept(text):
    for query in (
        build_query(text),
        build_query(text, VOCABULARY),
        match_expression([text, text[::-1]]),
    ):
        if query is None:
            continue
        assert_safe(query)
        assert query.count(" OR ") < MAX_TERMS
        apsw_rows, sqlite3_rows = _run_everywhere(query)
        assert [row[0] for row in apsw_rows] == [row[0] for row in sqlite3_rows]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(FTS_SYNTAX), min_size=1, max_size=20).map(" ".join))
def test_pure_syntax_never_becomes_an_operator(text):
    """Operators and punctuation alone carry no searchable token: either no query or only quoted words."""
    query = build_query(text)
    if query is not None:
        # Only the words NEAR/AND/OR/NOT/content/id/a/b/start can survive, and only as quoted strings.
        assert_safe(query)
        for term in re.findall(r'"([^"]*)"', query):
            assert term == term.lower()
        _run_everywhere(query)


# The builder tokenizes with SQLite's own unicode61, so any text (private-use characters aside, which
# the allow-list strips) matches the query built from it.
word = st.text(alphabet=st.characters(exclude_categories=("Co", "Cs")), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(word, min_size=1, max_size=8))
def test_a_document_matches_the_query_built_from_its_own_text(words):
    text = " ".join(words)
    query = build_query(text)
    if query is None:
        return
    for connection in (apsw.Connection(":memory:"), sqlite3.connect(":memory:")):
        connection.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
        connection.execute("INSERT INTO t(content) VALUES (?)", (text,))
        assert (
            connection.execute("SELECT count(*) FROM t WHERE t MATCH ?", (query,)).fetchone()[0]
            == 1
        ), query


def test_tokens_are_bounded_and_normalized_like_unicode61():
    long_word = "x" * (MAX_TOKEN_CHARS + 1)
    assert tokens(f"Café NAÏVE Straße İstanbul {long_word} a 한국어") == [
        "cafe",
        "naive",
        "straße",
        "istanbul",
        "한국어",
    ]
    assert len(tokens(" ".join(f"w{n}" for n in range(1000)))) == 256
    assert tokens(None) == [] and tokens(12345) == ["12345"]
    assert build_query("* ^ : ( ) \" ' NEAR") == '"near"'
    many = " ".join(f"term{n}" for n in range(100))
    assert (
        build_query(many, limit=50).count('"') == 2 * MAX_TERMS
    )  # the bound holds whatever is asked
    assert build_query(many, limit=3) == '"term0" OR "term1" OR "term2"'
    assert match_expression([many], max_terms=MAX_TERMS).count(" OR ") == MAX_TERMS - 1


def test_salient_terms_prefer_rare_index_terms_and_drop_absent_ones():
    connection = apsw.Connection(":memory:")
    connection.execute("CREATE VIRTUAL TABLE fts_working USING fts5(id UNINDEXED, content)")
    rows = [("common words everywhere " + ("tomato" if n == 0 else "filler")) for n in range(20)]
    for number, row in enumerate(rows):
        connection.execute("INSERT INTO fts_working(id, content) VALUES (?, ?)", (str(number), row))
    vocabulary = Vocabulary(connection)
    assert fts_query.salient_terms("tomato filler common unknownword", vocabulary) == ["tomato"]
    assert build_query("tomato filler common unknownword", vocabulary) == '"tomato"'


def test_vocabulary_refuses_names_that_are_not_plain_identifiers():
    with pytest.raises(ValueError):
        Vocabulary(APSW, fts_table='fts_working"; DROP TABLE x; --')


def test_vocabulary_works_on_a_read_only_connection(tmp_path):
    path = tmp_path / "fts.db"
    writer = apsw.Connection(str(path))
    writer.execute(
        "CREATE VIRTUAL TABLE fts_working USING fts5(id UNINDEXED, content); "
        "INSERT INTO fts_working VALUES ('a', 'rare tomato words'), ('b', 'other words');"
    )
    writer.close()
    before = path.read_bytes()
    reader = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    assert build_query("tomato words", Vocabulary(reader)) == '"tomato" OR "words"'
    reader.close()
    assert path.read_bytes() == before
