"""NREM's clusters, pure: connected components of a link graph, split to a bounded size, and the
lexical links used when the edge graph connects nothing.

Everything here is deterministic for its inputs (ties broken by memory key), so a night's clusters are
the same in the recall guard's trial, the live run and a run started again after a kill.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from mnemo_ops.database.fts_query import tokens

_STOPWORDS_TEXT = (
    "a an the this that these those my our your his her their its i we you he she they it me us "
    "him them is are was were be been being am do does did have has had will would can could "
    "should may might must shall and or but if when while then so as at by for from in into of "
    "on to with about over under again also just very really not no yes ok okay there here what "
    "which who whom how why all any some more most much many one two like get got think know "
    "sure still time little look yesterday today tomorrow"
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
MIN_SHARED_TERMS = 2
"""Two memories are lexically linked when they share at least this many rare terms."""
MIN_CEILING = 4
"""However few the memories, a term four of them hold still counts as rare."""


def fingerprint(memory_keys: Iterable[str]) -> str:
    """The identity of a source set: sha256 of its sorted keys (order and repeats do not matter)."""
    material = "\n".join(sorted(set(memory_keys)))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def components(members: Iterable[str], links: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Connected components of the graph of `members` and `links` (links to non-members ignored);
    each component sorted, components in order of their first key."""
    parent = {member: member for member in members}

    def root(key: str) -> str:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for first, second in links:
        if first in parent and second in parent and first != second:
            a, b = root(first), root(second)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[str, list[str]] = defaultdict(list)
    for member in parent:
        groups[root(member)].append(member)
    return sorted((sorted(group) for group in groups.values()), key=lambda group: group[0])


def split(
    component: list[str],
    adjacency: Mapping[str, set[str]],
    rank: Callable[[str], tuple],
    max_size: int,
) -> list[list[str]]:
    """`component` cut into connected pieces of at most `max_size`: each piece grows breadth-first
    from the best-ranked member not yet taken (`rank`: smaller is better), neighbours in rank order."""
    if len(component) <= max_size:
        return [sorted(component)]
    left = set(component)
    pieces = []
    for start in sorted(component, key=rank):
        if start not in left:
            continue
        piece, queue = [start], [start]
        left.discard(start)
        while queue and len(piece) < max_size:
            current = queue.pop(0)
            for neighbour in sorted(adjacency.get(current, ()), key=rank):
                if neighbour in left and len(piece) < max_size:
                    left.discard(neighbour)
                    piece.append(neighbour)
                    queue.append(neighbour)
        pieces.append(sorted(piece))
    return pieces


def content_terms(text: str) -> set[str]:
    """The index terms of `text` that can carry meaning (no stopwords, no one-letter words)."""
    return {term for term in tokens(text) if len(term) > 1 and term not in STOPWORDS}


def lexical_links(
    texts: Mapping[str, str], max_share: float = 0.05, max_documents: int = 12
) -> dict[tuple[str, str], list[str]]:
    """Pairs of memories sharing at least MIN_SHARED_TERMS rare terms, with those terms.

    A term is rare when at most ``max(MIN_CEILING, max_share * len(texts))`` (and `max_documents`) of the
    memories hold it: a word everybody uses links everything and means nothing, and the cap keeps
    the pairs a term adds bounded.
    """
    holders: dict[str, list[str]] = defaultdict(list)
    for key in sorted(texts):
        for term in content_terms(texts[key]):
            holders[term].append(key)
    ceiling = min(max_documents, max(MIN_CEILING, int(max_share * len(texts))))
    shared: dict[tuple[str, str], list[str]] = defaultdict(list)
    for term in sorted(holders):
        keys = holders[term]
        if not 2 <= len(keys) <= ceiling:
            continue
        for index, first in enumerate(keys):
            for second in keys[index + 1 :]:
                shared[(first, second)].append(term)
    return {pair: terms for pair, terms in shared.items() if len(terms) >= MIN_SHARED_TERMS}
