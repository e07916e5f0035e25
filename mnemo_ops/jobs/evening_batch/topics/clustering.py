"""Topic clustering by salient terms: a deterministic full build and an incremental update.

Every live memory gets its salient terms (the rarest index terms of its text, by IDF over the FTS5
vocabulary of its own table: ``fts_working`` or ``fts_episodes``). A term that is salient for at least
``min_topic_size`` memories, and for at most ``max_topic_share`` of them (a term everything has
separates nothing), may anchor a topic. Near-identical anchor terms ("tomato", "tomatoes") are merged
with rapidfuzz into one label. Each memory joins the topic of its most widely shared anchor (ties by
label); topics left smaller than ``min_topic_size`` dissolve and their members move to their next
anchor, until no small topic is left. Sorting every choice by (support, label) makes the result the
same for the same input.

The incremental update (re)assigns only memories whose content fingerprint changed (or that are new
or gone) to the existing topics, and lets a new topic emerge where enough unclustered memories now
share an anchor term.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import apsw
from rapidfuzz import fuzz, process

from mnemo_ops.database import table_names
from mnemo_ops.database.fts_query import MAX_TERMS, Vocabulary, salient_terms, tokens
from mnemo_ops.jobs.evening_batch.topics.memories import LiveMemory

if TYPE_CHECKING:
    from mnemo_ops.jobs.evening_batch.topics.changes import MapDiff

MIN_MERGE_LENGTH = 4
"""Shorter terms are never merged: "tea" and "team" are near-identical strings but different topics."""


@dataclasses.dataclass(frozen=True)
class MapOptions:
    """Tuning of the topic map (config section ``evening_batch``)."""

    min_topic_size: int = 3
    terms_per_memory: int = 8
    max_topic_share: float = 0.2
    label_similarity: float = 85.0
    label_terms: int = 6


STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "also",
        "get",
        "got",
        "us",
        "via",
        "per",
        "ok",
        "yes",
    ]
)
"""Function words: in a small index they are rare enough to look salient, but they name no topic."""


class ScannedVocabulary(Vocabulary):
    """A Vocabulary that can read the whole FTS5 vocabulary in one scan.

    Looking terms up costs about one index probe each; past a thousand or so terms one pass over
    the whole vocabulary (tens of thousands of rows) is cheaper, which is the common case for the
    map: every token of every memory that changed.
    """

    SCAN_THRESHOLD = 1000
    _scanned: dict[str, int] | None = None

    def prefetch(self, terms: Iterable[str]) -> None:
        """Make the document frequencies of `terms` available (one scan when there are many)."""
        wanted = list(dict.fromkeys(terms))
        if self._scanned is None and len(wanted) > self.SCAN_THRESHOLD:
            self._scanned = dict(
                self.connection.execute(
                    f'SELECT term, doc FROM temp."{self.vocab_table}"'
                ).fetchall()
            )
        if self._scanned is None:
            super().document_frequency(wanted)

    def document_frequency(self, terms: Iterable[str]) -> dict[str, int]:
        """How many documents contain each term (0 for terms not in the index)."""
        if self._scanned is None:
            return super().document_frequency(terms)
        scanned = self._scanned
        return {term: scanned.get(term, 0) for term in terms}


class TermExtractor:
    """Salient terms of a memory, by IDF over the FTS5 vocabulary of ``fts_working``.

    One vocabulary for both kinds keeps the terms of working rows and of episodic summaries (which are
    made of working rows' text) in one IDF space; ``fts_episodes`` serves only when there is no
    ``fts_working``. A term only one document holds can group nothing, so terms need a document
    frequency of at least 2; function words are left out.
    """

    def __init__(self, connection: apsw.Connection):
        present = table_names(connection)
        fts_table = (
            "fts_working"
            if "fts_working" in present
            else ("fts_episodes" if "fts_episodes" in present else None)
        )
        self.vocabulary = ScannedVocabulary(connection, fts_table) if fts_table else None

    def terms(self, memory: LiveMemory, limit: int) -> list[str]:
        """Up to `limit` salient terms of `memory` (rarest first)."""
        if self.vocabulary is None:
            return []
        text = " ".join(token for token in tokens(memory.content) if token not in STOPWORDS)
        ranked = salient_terms(text, self.vocabulary, limit=MAX_TERMS)
        frequencies = self.vocabulary.document_frequency(ranked)
        return [term for term in ranked if frequencies[term] >= 2][:limit]

    def prefetch(self, memories: Iterable[LiveMemory]) -> None:
        """Look up the document frequencies of every token of `memories` in a few batched queries."""
        if self.vocabulary is None:
            return
        wanted: set[str] = set()
        for memory in memories:
            wanted.update(tokens(memory.content))
        self.vocabulary.prefetch(sorted(wanted - STOPWORDS))


@dataclasses.dataclass
class Topic:
    """One topic: its label (the anchor term), merged near-identical aliases, term counts and size.

    `members` holds the member keys when the whole map is in memory (a full build); an incremental
    update keeps only `size` current and leaves the membership to the store.
    """

    label: str
    aliases: list[str] = dataclasses.field(default_factory=list)
    term_counts: Counter = dataclasses.field(default_factory=Counter)
    members: set[str] = dataclasses.field(default_factory=set)
    size: int = 0

    def add(self, key: str, terms: Iterable[str]) -> None:
        """Add a member and its terms."""
        self.members.add(key)
        self.size += 1
        self.term_counts.update(terms)

    def remove(self, key: str, terms: Iterable[str]) -> None:
        """Remove a member and its terms."""
        self.members.discard(key)
        self.size = max(0, self.size - 1)
        for term in terms:
            count = self.term_counts.get(term, 0) - 1
            if count > 0:
                self.term_counts[term] = count
            else:
                self.term_counts.pop(term, None)

    def top_terms(self, limit: int) -> list[str]:
        """The label first, then the members' most shared terms (ties alphabetical)."""
        others = heapq.nsmallest(
            limit,
            ((-count, term) for term, count in self.term_counts.items() if term != self.label),
        )
        return [self.label, *(term for _, term in others)][: max(1, limit)]

    def kept_term_counts(self, limit: int = 200) -> dict[str, int]:
        """The counts worth storing: the `limit` most shared terms, which are what can describe the topic.

        Rarer terms are dropped from storage, so after many incremental updates a term's count can lag;
        a ``--rebuild`` recounts everything.
        """
        kept = heapq.nsmallest(limit, ((-count, term) for term, count in self.term_counts.items()))
        return {term: -negative for negative, term in sorted(kept, key=lambda pair: pair[1])}


@dataclasses.dataclass
class TopicMap:
    """The whole map: topics by label, and per memory its topic (None: unclustered), terms and fingerprint."""

    topics: dict[str, Topic] = dataclasses.field(default_factory=dict)
    assignments: dict[str, str | None] = dataclasses.field(default_factory=dict)
    terms: dict[str, str] = dataclasses.field(default_factory=dict)  # space-joined, as stored
    fingerprints: dict[str, int] = dataclasses.field(default_factory=dict)
    # Reads (topic, terms) of stored members on demand: an incremental update loads only what it touches.
    load_members: Callable[[list[str]], dict[str, tuple[str | None, str]]] | None = None

    def ensure_members(self, keys: Iterable[str]) -> None:
        """Make sure the stored topic and terms of `keys` are at hand (read from the store when not)."""
        missing = [key for key in keys if key not in self.terms]
        if missing and self.load_members is not None:
            for key, (topic, terms) in self.load_members(missing).items():
                self.assignments[key] = topic
                self.terms[key] = terms

    def member_terms(self, key: str) -> list[str]:
        """The stored salient terms of a memory."""
        text = self.terms.get(key) or ""
        return text.split()


@dataclasses.dataclass
class MapChanges:
    """What an update did to the map (the counts go into the job's `changes`)."""

    mode: str
    live_memories: int = 0
    changed_memories: int = 0
    removed_memories: int = 0
    created: set[str] = dataclasses.field(default_factory=set)
    updated: set[str] = dataclasses.field(default_factory=set)
    removed: set[str] = dataclasses.field(default_factory=set)
    changed_keys: set[str] = dataclasses.field(default_factory=set)
    removed_keys: set[str] = dataclasses.field(default_factory=set)

    @property
    def touched_labels(self) -> set[str]:
        """Labels whose stored row must be rewritten."""
        return self.created | self.updated


def merge_near_identical(
    anchors: Iterable[str],
    support: Counter,
    similarity: float,
    labels: dict[str, list[str]] | None = None,
) -> dict[str, str]:
    """Map each anchor term to its label: itself, or a more supported near-identical term (rapidfuzz ratio).

    Terms are blocked by their first three letters, so the cost stays linear in the number of anchors.
    `labels` (prefix -> existing labels) lets the incremental update merge into labels already on the map.
    """
    blocks: dict[str, list[str]] = defaultdict(list)
    for prefix, existing in (labels or {}).items():
        blocks[prefix].extend(label for label in existing if len(label) >= MIN_MERGE_LENGTH)
    label_of: dict[str, str] = {}
    for term in sorted(anchors, key=lambda item: (-support[item], item)):
        if len(term) < MIN_MERGE_LENGTH:
            label_of[term] = term
            continue
        block = blocks[term[:3]]
        found = (
            process.extractOne(term, block, scorer=fuzz.ratio, score_cutoff=similarity)
            if block
            else None
        )
        if found is None:
            block.append(term)
            label_of[term] = term
        else:
            label_of[term] = found[0]
    return label_of


def near_identical_label(term: str, blocks: dict[str, list[str]], similarity: float) -> str | None:
    """The existing label (from `blocks`: first three letters -> labels) near-identical to `term`, if any."""
    if term in blocks.get(term[:3], ()):
        return term
    if len(term) < MIN_MERGE_LENGTH:
        return None
    candidates = [label for label in blocks.get(term[:3], ()) if len(label) >= MIN_MERGE_LENGTH]
    found = (
        process.extractOne(term, candidates, scorer=fuzz.ratio, score_cutoff=similarity)
        if candidates
        else None
    )
    return found[0] if found else None


def _best_label(
    terms: Iterable[str], label_of: dict[str, str], active: set[str], weight: dict[str, int]
) -> str | None:
    candidates = {label_of[term] for term in terms if term in label_of and label_of[term] in active}
    if not candidates:
        return None
    return min(candidates, key=lambda label: (-weight.get(label, 0), label))


def build_full(
    memories: dict[str, LiveMemory],
    extractor: TermExtractor,
    options: MapOptions,
    previous: TopicMap | None = None,
    progress=None,
) -> tuple[TopicMap, MapChanges]:
    """Cluster every live memory from scratch; compare with `previous` (the stored map) for the change counts."""
    keys = sorted(memories)
    extractor.prefetch(memories.values())
    terms: dict[str, list[str]] = {}
    for key in keys:
        terms[key] = extractor.terms(memories[key], options.terms_per_memory)
        if progress is not None:
            progress.advance(1)
    # Near-identical terms ("tomato", "tomatoes") count as one label before support is measured.
    raw_support = Counter(term for key in keys for term in terms[key])
    label_of = merge_near_identical(raw_support, raw_support, options.label_similarity)
    labels_of_memory = {key: sorted({label_of[term] for term in terms[key]}) for key in keys}
    weight = Counter(label for key in keys for label in labels_of_memory[key])
    ceiling = max(options.min_topic_size, int(options.max_topic_share * len(keys)))
    active = {
        label for label, count in weight.items() if options.min_topic_size <= count <= ceiling
    }
    identity = {label: label for label in weight}

    assignment = {key: _best_label(labels_of_memory[key], identity, active, weight) for key in keys}
    members: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        if assignment[key] is not None:
            members[assignment[key]].append(key)
    while True:
        small = sorted(
            label for label in active if len(members.get(label, ())) < options.min_topic_size
        )
        if not small:
            break
        active.difference_update(small)
        moved = sorted(key for label in small for key in members.pop(label, ()))
        for key in moved:
            label = _best_label(labels_of_memory[key], identity, active, weight)
            assignment[key] = label
            if label is not None:
                members[label].append(key)

    topic_map = TopicMap()
    aliases: dict[str, list[str]] = defaultdict(list)
    for term, label in sorted(label_of.items()):
        if term != label and label in active:
            aliases[label].append(term)
    for key in keys:
        topic_map.terms[key] = " ".join(terms[key])
        topic_map.fingerprints[key] = memories[key].fingerprint
        label = assignment[key]
        topic_map.assignments[key] = label
        if label is not None:
            topic = topic_map.topics.get(label)
            if topic is None:
                topic = topic_map.topics[label] = Topic(label, aliases=list(aliases[label]))
            topic.add(key, terms[key])

    changes = MapChanges(mode="full", live_memories=len(keys))
    removed = sorted(set(previous.assignments) - set(memories)) if previous is not None else []
    changes.changed_memories, changes.removed_memories = len(keys), len(removed)
    changes.changed_keys, changes.removed_keys = set(keys), set(removed)
    old_topics = previous.topics if previous is not None else {}
    changes.created = set(topic_map.topics) - set(old_topics)
    changes.removed = set(old_topics) - set(topic_map.topics)
    changes.updated = {
        label
        for label in set(topic_map.topics) & set(old_topics)
        if topic_map.topics[label].members != old_topics[label].members
        or topic_map.topics[label].aliases != old_topics[label].aliases
        or topic_map.topics[label].top_terms(options.label_terms)
        != old_topics[label].top_terms(options.label_terms)
    }
    return topic_map, changes


def update_incremental(
    previous: TopicMap, diff: MapDiff, extractor: TermExtractor, options: MapOptions
) -> tuple[TopicMap, MapChanges]:
    """(Re)assign only new, changed and gone memories (`diff`); `previous` is updated in place and returned."""
    topic_map = previous
    memories = diff.changed
    changed, removed = sorted(diff.changed), list(diff.removed)
    changes = MapChanges(
        mode="incremental",
        live_memories=diff.live_count,
        changed_memories=len(changed),
        removed_memories=len(removed),
        changed_keys=set(changed),
        removed_keys=set(removed),
    )
    touched: set[str] = set()
    topic_map.ensure_members([*removed, *changed])

    def detach(key: str) -> None:
        label = topic_map.assignments.get(key)
        if label is not None and label in topic_map.topics:
            topic_map.topics[label].remove(key, topic_map.member_terms(key))
            touched.add(label)

    for key in removed:
        detach(key)
        for table in (topic_map.assignments, topic_map.terms, topic_map.fingerprints):
            table.pop(key, None)
    alias_index = {
        alias: label
        for label, topic in topic_map.topics.items()
        for alias in (label, *topic.aliases)
    }
    label_blocks: dict[str, list[str]] = defaultdict(list)
    for label in topic_map.topics:
        label_blocks[label[:3]].append(label)

    def resolve(term: str) -> str | None:
        """The topic a term points to: a label or alias, else a near-identical label (remembered)."""
        if term not in alias_index:
            alias_index[term] = near_identical_label(term, label_blocks, options.label_similarity)
        return alias_index[term]

    extractor.prefetch(memories[key] for key in changed)
    for key in changed:
        detach(key)
        terms = extractor.terms(memories[key], options.terms_per_memory)
        topic_map.terms[key] = " ".join(terms)
        topic_map.fingerprints[key] = memories[key].fingerprint
        candidates = {label for label in map(resolve, terms) if label is not None}
        label = (
            min(candidates, key=lambda item: (-topic_map.topics[item].size, item))
            if candidates
            else None
        )
        topic_map.assignments[key] = label
        if label is not None:
            topic_map.topics[label].add(key, terms)
            touched.add(label)

    created, grown = _emerge_topics(
        topic_map,
        [key for key in changed if topic_map.assignments[key] is None],
        options,
        alias_index,
        diff.live_count,
    )
    touched |= created | grown
    for label in sorted(touched):
        if label in topic_map.topics and topic_map.topics[label].size == 0:
            del topic_map.topics[label]
            changes.removed.add(label)
    changes.created = created - changes.removed
    changes.updated = {label for label in touched if label in topic_map.topics} - changes.created
    return topic_map, changes


def _emerge_topics(
    topic_map: TopicMap,
    newly_unclustered: list[str],
    options: MapOptions,
    alias_index: dict[str, str],
    live_count: int,
) -> tuple[set[str], set[str]]:
    """New topics where enough unclustered memories now share a term brought in by a changed memory.

    Returns the labels created and the existing labels that grew (a near-identical term merged into them).
    """
    if not newly_unclustered:
        return set(), set()
    candidates = {term for key in newly_unclustered for term in topic_map.member_terms(key)}
    holders: dict[str, list[str]] = defaultdict(list)
    for key, label in topic_map.assignments.items():
        if label is None:
            for term in topic_map.member_terms(key):
                if term in candidates:
                    holders[term].append(key)
    ceiling = max(options.min_topic_size, int(options.max_topic_share * max(1, live_count)))
    support = Counter({term: len(keys) for term, keys in holders.items()})
    existing: dict[str, list[str]] = defaultdict(list)
    for label in topic_map.topics:
        if len(label) >= MIN_MERGE_LENGTH:
            existing[label[:3]].append(label)
    created: set[str] = set()
    grown: set[str] = set()
    for term in sorted(holders, key=lambda item: (-support[item], item)):
        free = sorted(key for key in holders[term] if topic_map.assignments[key] is None)
        if len(free) < options.min_topic_size or support[term] > ceiling:
            continue
        label = (
            alias_index.get(term)
            or near_identical_label(term, existing, options.label_similarity)
            or term
        )
        topic = topic_map.topics.get(label)
        if topic is None:
            topic = topic_map.topics[label] = Topic(label)
            if len(label) >= MIN_MERGE_LENGTH:
                existing[label[:3]].append(label)
            created.add(label)
        else:
            grown.add(label)
            if term != label and term not in topic.aliases:
                topic.aliases = sorted([*topic.aliases, term])
        alias_index[term] = label
        for key in free:
            topic_map.assignments[key] = label
            topic.add(key, topic_map.member_terms(key))
    return created, grown - created
