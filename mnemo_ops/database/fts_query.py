"""Safe FTS5 queries: MATCH expressions built from quoted tokens only.

Whatever the input (quotes, operators, column filters, NEAR, ``*``, ``^``, any Unicode), the output is
either None or ``"tok" OR "tok" ...`` where each token is one term of the input as SQLite's own
unicode61 tokenizer sees it (lower-cased, Latin diacritics removed), made only of letters, digits and
combining marks, bounded in length and count, with any double quote doubled. No FTS5 syntax from
the input survives, so SQLite never rejects the query and the input never steers it.

Salient terms are chosen by inverse document frequency over the index's own vocabulary
(an ``fts5vocab`` table in the connection's temp schema, which works on read-only connections too).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable

import apsw

MAX_TOKEN_CHARS = 64
MAX_TERMS = 16


# SQLite's own unicode61 tokenizer (the default of Mnemosyne's fts_working and fts_episodes), so the
# terms we look up and quote are exactly the terms the index holds: its case folding ("ß" stays,
# "ς" becomes "σ") and diacritic removal (Latin only) are not Python's.
_TOKENIZER_CONNECTION = apsw.Connection(":memory:")
_UNICODE61 = _TOKENIZER_CONNECTION.fts5_tokenizer("unicode61")
_MAX_INPUT_BYTES = 1 << 20


def _index_tokens(text: str) -> list[str]:
    """The tokens unicode61 makes of `text` (bounded input; undecodable characters replaced)."""
    data = text.encode("utf-8", "replace")[:_MAX_INPUT_BYTES]
    return _UNICODE61(
        data, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=False
    )


def is_allowed(token: str) -> bool:
    """True when every character of `token` is a letter, a digit or a combining mark."""
    if token.isalnum():  # the common case, checked in C: letters and digits only
        return True
    return all(unicodedata.category(character)[0] in "LNM" for character in token)


def tokens(text: str, limit: int = 256) -> list[str]:
    """Distinct index tokens (letters and digits only) of `text`, in order of first appearance.

    Anything that is not a string (None, numbers, bytes) is read as its text form; this never raises.
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    seen: dict[str, None] = {}
    for token in _index_tokens(text):
        # The allow-list: letters, digits and combining marks. unicode61 also keeps private-use
        # characters; a token holding one is dropped whole (a stripped token is a different term).
        if 2 <= len(token) <= MAX_TOKEN_CHARS and token not in seen and is_allowed(token):
            seen[token] = None
            if len(seen) >= limit:
                break
    return list(seen)


def quote(token: str) -> str:
    """One FTS5 string token: the text in double quotes, with any double quote doubled."""
    return '"' + token.replace('"', '""') + '"'


def match_expression(terms: Iterable[str], max_terms: int = MAX_TERMS) -> str | None:
    """OR together up to `max_terms` (never more than MAX_TERMS) quoted terms; None when there is nothing
    safe to search for."""
    max_terms = max(0, min(int(max_terms), MAX_TERMS))
    chosen: list[str] = []
    for term in terms:
        for token in tokens(term):
            if token not in chosen:
                chosen.append(token)
        if len(chosen) >= max_terms:
            break
    chosen = chosen[:max_terms]
    if not chosen:
        return None
    return " OR ".join(quote(token) for token in chosen)


class Vocabulary:
    """Document frequencies of an FTS5 table, read through a temp ``fts5vocab`` table."""

    def __init__(
        self, connection: apsw.Connection, fts_table: str = "fts_working", schema: str = "main"
    ):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", fts_table) or not re.fullmatch(
            r"[A-Za-z_]\w*", schema
        ):
            raise ValueError(f"not a plain table name: {schema}.{fts_table}")
        self.connection = connection
        self.fts_table = fts_table
        self.vocab_table = f"mnemo_vocab_{schema}_{fts_table}"
        connection.execute(
            f'CREATE VIRTUAL TABLE IF NOT EXISTS temp."{self.vocab_table}" '
            f'USING fts5vocab("{schema}", "{fts_table}", "row")'
        )
        self.total_documents = connection.execute(
            f'SELECT count(*) FROM "{schema}"."{fts_table}"'
        ).fetchone()[0]
        self._cache: dict[str, int] = {}

    def document_frequency(self, terms: Iterable[str]) -> dict[str, int]:
        """How many documents contain each term (0 for terms not in the index)."""
        wanted = [term for term in dict.fromkeys(terms) if term not in self._cache]
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            placeholders = ",".join("?" * len(chunk))
            found = dict(
                self.connection.execute(
                    f'SELECT term, doc FROM temp."{self.vocab_table}" WHERE term IN ({placeholders})',
                    chunk,
                ).fetchall()
            )
            for term in chunk:
                self._cache[term] = found.get(term, 0)
        return {term: self._cache[term] for term in terms}

    def idf(self, term: str) -> float:
        """BM25-style inverse document frequency (0 for a term no document holds)."""
        frequency = self.document_frequency([term])[term]
        if frequency == 0:
            return 0.0
        return math.log((self.total_documents - frequency + 0.5) / (frequency + 0.5) + 1.0)


def salient_terms(
    text: str,
    vocabulary: Vocabulary,
    limit: int = 8,
    max_document_share: float = 0.5,
    min_documents: int = 1,
) -> list[str]:
    """The `limit` rarest index terms of `text` (highest IDF first; ties by first appearance).

    Terms held by fewer than `min_documents` documents are dropped (absent terms match nothing; a
    term only the text's own row holds, ``min_documents=2``, can link it to nothing); so are terms
    found in more than `max_document_share` of the documents (they carry no signal). Small indexes
    keep every term a row could share: the share cap never drops below `min_documents` + 1 documents.
    """
    candidates = tokens(text)
    frequencies = vocabulary.document_frequency(candidates)
    total = max(1, vocabulary.total_documents)
    ceiling = max(max_document_share * total, min_documents + 1) if total >= 4 else total
    useful = [t for t in candidates if max(1, min_documents) <= frequencies[t] <= ceiling]
    ranked = sorted(enumerate(useful), key=lambda pair: (-vocabulary.idf(pair[1]), pair[0]))
    return [term for _, term in ranked[:limit]]


def build_query(text: str, vocabulary: Vocabulary | None = None, limit: int = 8) -> str | None:
    """A safe MATCH expression for `text`: its salient terms when a vocabulary is given, else its first tokens."""
    if vocabulary is not None:
        return match_expression(salient_terms(text, vocabulary, limit=limit), max_terms=limit)
    return match_expression(tokens(text), max_terms=limit)
