"""Orphan linking: live working memories with no graph edge get ``related_to`` edges to their best
FTS5 matches among live working and episodic memories.

These edges feed Mnemosyne's associative recall (``recall_enhanced(..., use_associative=True)``
appends graph neighbours of the top results). The rules follow Mnemosyne's own proactive linking
(``BeamMemory._proactively_link``): the new row is the edge's source, the match its target, and the
weight is ``max(0.1, 1 - 0.2 * rank)`` for the 0-based rank among the row's matches.

How a row is matched: a safe query of its salient terms (``fts_query``: terms that at least one
other document holds, rarest first, common terms dropped), bm25-ranked in ``fts_working`` and
``fts_episodes``; a match must score at least ``min_score`` times the row's own bm25 score on the
same query (a relative floor, so it means the same whatever the size of the index).

Rows are visited in id order, from where the last run stopped (a cursor in state.db) round to
where it started, at most ``max_rows`` per run: a full round. After a completed round the job runs
incremental passes (``new_orphan_batches``): only rows added since (a rowid mark in state.db), in
rowid order, so a run with little new costs little whatever the size; a full round comes again
every ``full_round_days`` (rows left unmatched are tried again, as the index has grown).
Each row's decision depends only on the index and
on the edges made before it in that order, so a run killed at any point, then run again, ends in the
same state as one uninterrupted run; the cursor only saves repeated work.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.database import transactions
from mnemo_ops.database.fts_query import Vocabulary, match_expression, salient_terms, tokens
from mnemo_ops.foundation.clock import local_timestamp

EDGE_TYPE = "related_to"
QUERY_TERMS = 8
LINK_MAX_DOCUMENT_SHARE = 0.1
"""Terms held by more than this share of documents are too common to say two memories are related."""
LINK_MAX_DOCUMENTS = 100
"""Terms held by more documents than this are left out while rarer ones exist: bm25 is computed for
every document a query matches, so this bounds the work per row as the database grows (mid-frequency
terms are held by ever more rows). A row with no rarer term falls back to its two rarest terms."""
FALLBACK_TERMS = 2
MMAP_BYTES = 2 * 1024 * 1024 * 1024
"""Reads go through a memory map of up to this much of the file (SQLite caps it at its build limit)."""

_ORPHANS = (
    "SELECT w.id, w.content FROM working_memory w "
    "WHERE w.id > :after AND w.id <= :until "
    "AND w.superseded_by IS NULL AND (w.valid_until IS NULL OR w.valid_until > :now) "
    "AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.source = w.id) "
    "AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.target = w.id) "
    "ORDER BY w.id LIMIT :limit"
)
_HIGHEST_ID = "\U0010ffff" * 4


@dataclasses.dataclass(frozen=True)
class LinkOptions:
    """How orphans are linked: top `k` matches, the relative score floor, the per-run cap, batch size."""

    k: int = 3
    min_score: float = 0.3
    max_rows: int = 20000
    batch_size: int = 500
    match_budget: int | None = 400
    """FTS matches scored per row at most (None: every match, the exact linker)."""


@dataclasses.dataclass
class Match:
    """One candidate edge target with its bm25 score (negative: lower is better)."""

    target: str
    score: float


@dataclasses.dataclass
class LinkTotals:
    """What a linking pass did (or, in a dry run, would do)."""

    orphans_found: int = 0
    orphans_examined: int = 0
    orphans_linked: int = 0
    orphans_unmatched: int = 0
    orphans_matched_later: int = 0
    orphans_linked_meanwhile: int = 0
    edges_created: int = 0
    completed_round: bool = False
    cursor: str = ""
    last_rowid: int | None = None  # incremental pass: the rowid of the last row examined

    def to_stats(self) -> dict[str, Any]:
        """The stats block of the job result."""
        return {
            name: value
            for name, value in dataclasses.asdict(self).items()
            if name not in ("cursor", "last_rowid")
        }


class CombinedVocabulary:
    """Document frequencies over fts_working and fts_episodes together, for choosing query terms."""

    def __init__(self, vocabularies: list[Vocabulary]):
        self.vocabularies = vocabularies
        self.total_documents = sum(vocabulary.total_documents for vocabulary in vocabularies)
        self._frequencies: dict[str, int] = {}
        self._idf: dict[str, float] = {}

    def document_frequency(self, terms) -> dict[str, int]:
        """Documents holding each term, summed over the indexes (cached per term)."""
        terms = list(terms)
        missing = [term for term in dict.fromkeys(terms) if term not in self._frequencies]
        if missing:
            totals = dict.fromkeys(missing, 0)
            for vocabulary in self.vocabularies:
                for term, count in vocabulary.document_frequency(missing).items():
                    totals[term] += count
            self._frequencies.update(totals)
        return {term: self._frequencies[term] for term in terms}

    def idf(self, term: str) -> float:
        """BM25-style inverse document frequency over both indexes."""
        value = self._idf.get(term)
        if value is None:
            frequency = self.document_frequency([term])[term]
            value = (
                0.0
                if frequency == 0
                else math.log((self.total_documents - frequency + 0.5) / (frequency + 0.5) + 1.0)
            )
            self._idf[term] = value
        return value


class Matcher:
    """Finds a row's best live matches (read-only; safe on a read-only connection)."""

    def __init__(self, connection: apsw.Connection, options: LinkOptions, now: str):
        self.connection = connection
        self.options = options
        self.now = now
        # Reading through a memory map saves a system call per page on the many small index lookups.
        connection.execute(f"PRAGMA mmap_size = {MMAP_BYTES}").fetchall()
        tables = database.table_names(connection)
        self.has_episodes = {"fts_episodes", "episodic_memory"} <= tables
        self.working_vocabulary = Vocabulary(connection, "fts_working")
        vocabularies = [self.working_vocabulary]
        self.episode_vocabulary = (
            Vocabulary(connection, "fts_episodes") if self.has_episodes else None
        )
        if self.episode_vocabulary is not None:
            vocabularies.append(self.episode_vocabulary)
        self.vocabulary = CombinedVocabulary(vocabularies)
        # The row itself, k matches and one spare; `matches` fetches deeper when dead rows crowd them out.
        # Every fetched hit costs an id lookup, so fetching few keeps the cost per row flat.
        self.fetch = options.k + 2

    def prime(self, contents: list[str]) -> None:
        """Look up the document frequencies of a whole batch at once (one query per index)."""
        terms: dict[str, None] = {}
        for content in contents:
            terms.update(dict.fromkeys(tokens(content)))
        self.vocabulary.document_frequency(terms)

    def plan_query(self, content: str) -> tuple[list[str], bool]:
        """The row's query terms, and whether its matches must be a bounded candidate scan.

        The cost of a row is the number of documents its query matches: bm25 is computed for every
        one. With a `match_budget`, the rarest salient terms are kept while their combined document
        frequency stays within it, so the matches scored per row do not grow with the table. When
        even the rarest term is held by more documents than the budget (every term is common), the
        row's matches are a bounded candidate scan instead: the `match_budget` most recent documents
        matching its terms, ranked among themselves.
        """
        terms = self.terms_for(content)
        budget = self.options.match_budget
        if budget is None or not terms:
            return terms, False
        frequencies = self.vocabulary.document_frequency(terms)
        chosen: list[str] = []
        total = 0
        for term in terms:  # rarest first
            if total + frequencies[term] > budget:
                break
            chosen.append(term)
            total += frequencies[term]
        if chosen:
            return chosen, False
        return terms, True

    def terms_for(self, content: str) -> list[str]:
        """The row's salient terms: held by another memory, not common, rarest first."""
        share = min(
            LINK_MAX_DOCUMENT_SHARE, LINK_MAX_DOCUMENTS / max(1, self.vocabulary.total_documents)
        )
        terms = salient_terms(
            content, self.vocabulary, limit=QUERY_TERMS, max_document_share=share, min_documents=2
        )
        if not terms and share < LINK_MAX_DOCUMENT_SHARE:
            terms = salient_terms(
                content,
                self.vocabulary,
                limit=FALLBACK_TERMS,
                max_document_share=LINK_MAX_DOCUMENT_SHARE,
                min_documents=2,
            )
        return terms

    @staticmethod
    def _query_in(vocabulary: Vocabulary | None, terms: list[str]) -> str | None:
        """The MATCH expression of those `terms` that `vocabulary`'s index holds (None: none of them)."""
        if vocabulary is None:
            return None
        frequencies = vocabulary.document_frequency(terms)
        return match_expression(
            [term for term in terms if frequencies[term] > 0], max_terms=QUERY_TERMS
        )

    def _working_hits(self, query: str, limit: int) -> list[tuple[str, float, int]]:
        # (id, score, live) for the top hits; dead rows are returned too, so the caller can tell a
        # short list (few matches) from one that dead rows filled. The hits are ordered by SQLite's
        # top-N sort over bm25 (ties by rowid) rather than FTS5's `ORDER BY rank`, which prepares a
        # sorting statement per query and copies every match's position lists into it: same hits in
        # the same order (FTS5's sorter is stable, so its ties also come out in rowid order), less work.
        return self.connection.execute(
            "SELECT h.id, h.score, coalesce(w.superseded_by IS NULL "
            "  AND (w.valid_until IS NULL OR w.valid_until > :now), 0) "
            "FROM (SELECT id, bm25(fts_working) AS score FROM fts_working "
            "      WHERE fts_working MATCH :query ORDER BY score, rowid LIMIT :limit) h "
            "LEFT JOIN working_memory w ON w.id = h.id ORDER BY h.score, h.id",
            {"query": query, "limit": limit, "now": self.now},
        ).fetchall()

    def _scanned_episodes(self, query: str) -> list[tuple[str, float, int]]:
        if not self.has_episodes:
            return []
        ranked = self._scan("fts_episodes", "rowid", query)[: self.fetch * 8]
        if not ranked:
            return []
        rowids = [rowid for rowid, _ in ranked]
        rows = {
            rowid: (episode_id, live)
            for rowid, episode_id, live in self.connection.execute(
                "SELECT rowid, id, superseded_by IS NULL AND (valid_until IS NULL OR valid_until > ?) "
                f"FROM episodic_memory WHERE rowid IN ({','.join('?' * len(rowids))})",
                [self.now, *rowids],
            ).fetchall()
        }
        return [(rows[rowid][0], score, rows[rowid][1]) for rowid, score in ranked if rowid in rows]

    def _episode_hits(self, query: str, limit: int) -> list[tuple[str, float, int]]:
        if not self.has_episodes:
            return []
        return self.connection.execute(
            "SELECT e.id, h.score, coalesce(e.superseded_by IS NULL "
            "  AND (e.valid_until IS NULL OR e.valid_until > :now), 0) "
            "FROM (SELECT rowid, bm25(fts_episodes) AS score FROM fts_episodes "
            "      WHERE fts_episodes MATCH :query ORDER BY score, rowid LIMIT :limit) h "
            "JOIN episodic_memory e ON e.rowid = h.rowid ORDER BY h.score, e.id",
            {"query": query, "limit": limit, "now": self.now},
        ).fetchall()

    def _scan(self, table: str, key: str, query: str) -> list[tuple[Any, float]]:
        # The bounded candidate scan: FTS5 walks the matches in rowid order from the newest and
        # stops after the budget; bm25 is computed only for the rows it returns. Ranked here.
        hits = self.connection.execute(
            f"SELECT {key}, bm25({table}) FROM {table} WHERE {table} MATCH :query "
            "ORDER BY rowid DESC LIMIT :limit",
            {"query": query, "limit": self.options.match_budget},
        ).fetchall()
        return sorted(hits, key=lambda hit: (hit[1], hit[0]))

    def _working_ranked(self, query: str, limit: int) -> list[tuple[str, float]]:
        # (id, score) of the top hits, live or not (`_working_hits` without the liveness join).
        return self.connection.execute(
            "SELECT id, bm25(fts_working) AS score FROM fts_working "
            "WHERE fts_working MATCH :query ORDER BY score, rowid LIMIT :limit",
            {"query": query, "limit": limit},
        ).fetchall()

    def _live_working(self, ids) -> dict[str, int]:
        """1 for each of `ids` that is a live working row, 0 for a closed or superseded one (absent: no row)."""
        ids = sorted(ids)
        live: dict[str, int] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            live.update(
                self.connection.execute(
                    "SELECT id, superseded_by IS NULL AND (valid_until IS NULL OR valid_until > ?) "
                    f"FROM working_memory WHERE id IN ({','.join('?' * len(chunk))})",
                    [self.now, *chunk],
                ).fetchall()
            )
        return live

    def matches(self, row_id: str, content: str) -> list[Match]:
        """The row's top-k live matches above the floor, best first (empty: it stays an orphan)."""
        return self.matches_for([(row_id, content)])[0]

    def matches_for(self, rows: list[tuple[str, str]]) -> list[list[Match]]:
        """`matches` for each (id, content) of a batch, in order.

        The liveness of every working hit of the batch is read in one query, in id order: a lookup
        per hit joined into each FTS query was a cold walk down two B-trees whose cost grew with the
        table, several times the cost of the same ids read together in order.
        """
        searches = []
        for row_id, content in rows:
            terms, scan = self.plan_query(content)
            # Each index is queried only for the terms it holds (cached counts): a term no document
            # of an index holds matches nothing there and adds exactly 0.0 to every bm25 score, so
            # the hits and scores are the same, but FTS5 no longer looks it up in every segment (and
            # computes its IDF) for nothing. An index holding none of the terms is not queried.
            working_query = self._query_in(self.working_vocabulary, terms)
            episode_query = self._query_in(self.episode_vocabulary, terms)
            if scan:
                working = self._scan("fts_working", "id", working_query) if working_query else []
                episodes = self._scanned_episodes(episode_query) if episode_query else []
                working = working[: self.fetch * 8]
            else:
                working = self._working_ranked(working_query, self.fetch) if working_query else []
                episodes = self._episode_hits(episode_query, self.fetch) if episode_query else []
            searches.append((row_id, working_query, episode_query, working, episodes, scan))
        live = self._live_working(
            {hit_id for *_, working, _, _ in searches for hit_id, _ in working}
        )
        results = []
        for row_id, working_query, episode_query, working, episodes, scan in searches:
            hits = [(hit_id, score, live.get(hit_id, 0)) for hit_id, score in working]
            # A scan already holds every candidate it may look at: nothing deeper to fetch.
            chosen = self._choose(row_id, hits, episodes, crowded_at=None if scan else self.fetch)
            if chosen is None:
                # Dead rows filled the fetched hits and crowded live ones out: fetch deeper (once).
                limit = self.fetch * 8
                hits = self._working_hits(working_query, limit) if working_query else []
                episodes = self._episode_hits(episode_query, limit) if episode_query else []
                chosen = self._choose(row_id, hits, episodes, crowded_at=None)
            results.append(chosen)
        return results

    def _choose(
        self,
        row_id: str,
        working: list[tuple[str, float, int]],
        episodes: list[tuple[str, float, int]],
        crowded_at: int | None,
    ) -> list[Match] | None:
        """The top-k live hits above the floor; None when fewer than k are live and a list of hits
        fetched `crowded_at` deep was full (dead rows may have crowded live ones out)."""
        self_scores = [score for hit_id, score, _ in working if hit_id == row_id]
        candidates = [
            Match(hit_id, score)
            for hit_id, score, live in working + episodes
            if live and hit_id != row_id
        ]
        if (
            crowded_at is not None
            and len(candidates) < self.options.k
            and (len(working) == crowded_at or len(episodes) == crowded_at)
        ):
            return None
        if not candidates:
            return []
        # bm25 scores are negative; the row itself holds every query term, so its score is the reference.
        # When it is not among the hits (a long row), the best hit stands in, which is stricter.
        reference = min(self_scores + [min(match.score for match in candidates)])
        floor = self.options.min_score * reference
        candidates.sort(key=lambda match: (match.score, match.target))
        kept: dict[str, Match] = {}
        for match in candidates:
            # One edge per target even if a working and an episodic row ever shared an id.
            if match.score <= floor and reference < 0 and match.target not in kept:
                kept[match.target] = match
        return list(kept.values())[: self.options.k]


def edge_weight(rank: int) -> float:
    """Mnemosyne's proactive-linking weight for the match at 0-based `rank`."""
    return max(0.1, 1.0 - 0.2 * rank)


def count_orphans(connection: apsw.Connection, now: str, after_rowid: int | None = None) -> int:
    """Live working rows with no edge at either end (only those past `after_rowid`, when given)."""
    return connection.execute(
        "SELECT count(*) FROM working_memory w "
        "WHERE w.rowid > :after AND w.superseded_by IS NULL "
        "AND (w.valid_until IS NULL OR w.valid_until > :now) "
        "AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.source = w.id) "
        "AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.target = w.id)",
        {"now": now, "after": after_rowid if after_rowid is not None else -(2**63)},
    ).fetchall()[0][0]


def highest_rowid(connection: apsw.Connection) -> int:
    """The highest rowid of working_memory (0 when empty): where an incremental pass starts next."""
    return connection.execute("SELECT coalesce(max(rowid), 0) FROM working_memory").fetchone()[0]


_NEW_ORPHANS = (
    "SELECT w.rowid, w.id, w.content FROM working_memory w "
    "WHERE w.rowid > :after AND w.superseded_by IS NULL "
    "AND (w.valid_until IS NULL OR w.valid_until > :now) "
    "AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.source = w.id) "
    "AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.target = w.id) "
    "ORDER BY w.rowid LIMIT :limit"
)


def new_orphan_batches(
    connection: apsw.Connection,
    now: str,
    after_rowid: int,
    batch_size: int,
    skip: set[str],
    rowids: dict[str, int],
) -> Iterator[list[tuple[str, str]]]:
    """The incremental pass: orphans among rows added after `after_rowid`, in rowid order.

    A rowid range is a seek, so the cost is that of the new rows only, whatever the table's size.
    Each row's rowid is put into `rowids` (the caller records how far it got).
    """
    after = after_rowid
    while True:
        rows = connection.execute(
            _NEW_ORPHANS, {"after": after, "now": now, "limit": batch_size}
        ).fetchall()
        if not rows:
            return
        after = rows[-1][0]
        batch = []
        for rowid, row_id, content in rows:
            rowids[row_id] = rowid
            if row_id not in skip:
                batch.append((row_id, content))
        if batch:
            yield batch


def orphan_batches(
    connection: apsw.Connection, now: str, start_after: str, batch_size: int, skip: set[str]
) -> Iterator[list[tuple[str, str]]]:
    """Orphans in id order from `start_after` round to it again, in batches; ids in `skip` are left out.

    Each batch is read fresh, so rows that gained an edge meanwhile (committed by an earlier batch)
    are no longer listed; `skip` does the same for edges only planned (dry run).
    """
    ranges = [(start_after, _HIGHEST_ID)]
    if start_after:
        ranges.append(("", start_after))
    for after, until in ranges:
        while True:
            rows = connection.execute(
                _ORPHANS, {"after": after, "until": until, "now": now, "limit": batch_size}
            ).fetchall()
            if not rows:
                break
            after = rows[-1][0]
            batch = [(row_id, content) for row_id, content in rows if row_id not in skip]
            if batch:
                yield batch


def _still_orphan(connection: apsw.Connection, row_id: str) -> bool:
    return (
        connection.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM graph_edges WHERE source = ?1) "
            "AND NOT EXISTS (SELECT 1 FROM graph_edges WHERE target = ?1)",
            (row_id,),
        ).fetchall()[0][0]
        == 1
    )


@dataclasses.dataclass
class PlannedEdges:
    """Edges decided so far in this run: what later rows' orphan checks must see (dry run: all of them)."""

    nodes: set[str] = dataclasses.field(default_factory=set)

    def add(self, source: str, target: str) -> None:
        """Record an edge between `source` and `target`."""
        self.nodes.update((source, target))


def decide(
    connection: apsw.Connection, planned: PlannedEdges, row_id: str, matches: list[Match]
) -> tuple[str, list[tuple[str, str, float]]]:
    """For one row, in order: ``("meanwhile", [])`` when it is no longer an orphan, else the edges to add.

    Reads the database (inside the write transaction in a real run, so earlier rows' edges are
    visible) and the planned edges (so a dry run decides exactly as the real run will).
    """
    if row_id in planned.nodes or not _still_orphan(connection, row_id):
        return "meanwhile", []
    # The row has no edge at all (checked just now, inside the write transaction in a real run), so
    # no pair with it exists yet, in either direction: every match gets its edge.
    edges = [(row_id, match.target, edge_weight(rank)) for rank, match in enumerate(matches)]
    return ("linked" if edges else "unmatched"), edges


def insert_edges(
    connection: apsw.Connection, edges: list[tuple[str, str, float]], timestamp: str
) -> None:
    """Insert `related_to` edges (source, target, weight) with one timestamp."""
    connection.executemany(
        "INSERT INTO graph_edges (source, target, edge_type, weight, timestamp) VALUES (?, ?, ?, ?, ?)",
        [(source, target, EDGE_TYPE, weight, timestamp) for source, target, weight in edges],
    )


@dataclasses.dataclass
class LinkRun:
    """One linking pass: where it starts, whether it writes, and the hooks the job gives it."""

    connection: apsw.Connection
    options: LinkOptions
    dry_run: bool
    start_after: str = ""
    before_write: Any = None  # called once, right before the first write
    after_commit: Any = None  # called with the totals so far after each committed batch
    progress: Any = None  # an object with advance(n)
    orphans_found: int | None = None  # when the caller has counted them already
    after_rowid: int | None = None  # set: the incremental pass over rows added after this rowid


def link_orphans(run: LinkRun) -> LinkTotals:
    """Link orphans in id order from `run.start_after`, at most `options.max_rows`; return the totals.

    A dry run decides every row exactly as the real run would, holding the edges it would make in
    memory so later rows see them; the real run writes each batch in BEGIN IMMEDIATE transactions
    sized by time (``transactions.write_items``), each row decided inside one, so a concurrent
    writer's edges are respected.
    """
    now = local_timestamp()
    connection, options = run.connection, run.options
    found = (
        run.orphans_found
        if run.orphans_found is not None
        else count_orphans(connection, now, run.after_rowid)
    )
    totals = LinkTotals(orphans_found=found, cursor=run.start_after, last_rowid=run.after_rowid)
    matcher = Matcher(connection, options, now)
    planned = PlannedEdges()  # dry run: every edge decided so far
    unmatched: set[str] = set()  # examined without a match and still without an edge
    cap_reached = False
    rowids: dict[str, int] = {}
    batches = (
        orphan_batches(connection, now, run.start_after, options.batch_size, planned.nodes)
        if run.after_rowid is None
        else new_orphan_batches(
            connection, now, run.after_rowid, options.batch_size, planned.nodes, rowids
        )
    )
    for batch in batches:
        remaining = options.max_rows - totals.orphans_examined
        if remaining <= 0:
            cap_reached = True
            break
        if len(batch) > remaining:
            batch, cap_reached = batch[:remaining], True
        # The slow part (term statistics, FTS queries) runs outside any write transaction.
        matcher.prime([content for _, content in batch])
        matched = list(zip([row_id for row_id, _ in batch], matcher.matches_for(batch)))
        if run.dry_run:
            outcomes = [
                _decide_dry(connection, planned, row_id, matches) for row_id, matches in matched
            ]
        else:
            if any(matches for _, matches in matched) and run.before_write is not None:
                run.before_write()
            # Written in transactions sized by time (each row decided inside one), not per batch.
            outcomes = transactions.write_items(
                connection, matched, _apply_row, label="orphan linking"
            )
        for (row_id, _), (outcome, edges) in zip(batch, outcomes):
            totals.orphans_examined += 1
            totals.edges_created += len(edges)
            if outcome == "linked":
                totals.orphans_linked += 1
            elif outcome == "unmatched":
                unmatched.add(row_id)
            else:
                totals.orphans_linked_meanwhile += 1
            # An earlier row without a match of its own can still be chosen as a later row's match.
            for _, target, _ in edges:
                if target in unmatched:
                    unmatched.discard(target)
                    totals.orphans_matched_later += 1
        totals.cursor = batch[-1][0]
        if run.after_rowid is not None:
            totals.last_rowid = rowids[batch[-1][0]]
        if not run.dry_run and run.after_commit is not None:
            run.after_commit(totals)
        if run.progress is not None:
            run.progress.advance(len(batch))
        if cap_reached:
            break
    totals.orphans_unmatched = len(unmatched)
    totals.completed_round = not cap_reached
    if totals.completed_round:
        totals.cursor = ""
    return totals


def _decide_dry(connection, planned: PlannedEdges, row_id: str, matches: list[Match]):
    outcome, edges = decide(connection, planned, row_id, matches)
    for source, target, _ in edges:
        planned.add(source, target)
    return outcome, edges


def _apply_row(connection: apsw.Connection, row: tuple[str, list[Match]]):
    """Decide one row inside the write transaction and insert its edges.

    Repeatable (a busy rollback reruns the transaction): everything it reads is in the database,
    which also holds the edges the transaction has inserted for earlier rows.
    """
    row_id, matches = row
    outcome, edges = decide(connection, PlannedEdges(), row_id, matches)
    if edges:
        insert_edges(connection, edges, local_timestamp())
    return outcome, edges
