"""The integrity audit of a Mnemosyne database: read-only checks that find damage and plan repairs.

Every check reads only. Each returns findings (a stable code, a severity, a message naming ids, never
memory content) and, where the damage is repairable, the plan that ``repairs.py`` applies. The plan
is computed the same way in a dry run and in a real run, so both report the same counts.

What Mnemosyne 3.15.1 looks like here (read from the installed package):

- ``fts_working`` is a regular FTS5 table (``id UNINDEXED, content``) with its own copy of the text,
  kept by the triggers ``wm_ai``/``wm_ad``/``wm_au`` for every working row (open or closed). FTS5's own
  ``integrity-check`` only proves the index matches that copy, so missing and stale entries are found
  by comparing it with ``working_memory``.
- ``fts_episodes`` is an external-content FTS5 table over ``episodic_memory``; ``integrity-check`` with
  rank 1 compares the index with the content table, and ``rebuild`` re-derives it.
- ``graph_edges`` ends are not all memory ids: Mnemosyne links ``gist_<memory id>`` nodes (table
  ``gists``) to ``fact_<memory id>_<n>`` nodes (table ``facts``); proactive linking and agents link
  memory ids; agents may link free-form names. Only ends that are known memory or graph-node
  references are judged (see ``dangling_graph_edges``).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.foundation.clock import local_now
from mnemo_ops.mnemosyne import vectors

REVIEW_SAMPLE = 10
"""How many ids a finding names before it says "and N more"."""

MEMORY_ID_SHAPE = re.compile(r"^[0-9a-f]{16}$")
"""Mnemosyne's memory ids: the first 16 hex digits of a sha256 (beam._generate_id, memory.generate_id)."""

FTS_MESSAGE = re.compile(r"fts5", re.IGNORECASE)
"""integrity_check lines raised by FTS5 tables (SQLite >= 3.44 checks virtual tables too)."""


@dataclasses.dataclass
class Finding:
    """One audit finding: stable code, severity, message (ids only, never content), optional fix command."""

    code: str
    severity: str
    message: str
    fix: str | None = None


@dataclasses.dataclass
class Closure:
    """Stamp ``valid_until`` on one row of a table, if it is still open."""

    table: str
    row_id: int
    valid_until: str


@dataclasses.dataclass
class FtsWorkingPlan:
    """Working ids whose fts_working entries need reconciling, with the counts that will result."""

    ids: list[str] = dataclasses.field(default_factory=list)
    null_id_rowids: list[int] = dataclasses.field(default_factory=list)
    added: int = 0
    removed: int = 0
    reindexed: int = 0


@dataclasses.dataclass
class Audit:
    """Everything the audit found and the repairs it plans."""

    findings: list[Finding] = dataclasses.field(default_factory=list)
    rebuild_tables: list[str] = dataclasses.field(default_factory=list)
    fts_working: FtsWorkingPlan = dataclasses.field(default_factory=FtsWorkingPlan)
    canonical_closures: list[Closure] = dataclasses.field(default_factory=list)
    triple_closures: list[Closure] = dataclasses.field(default_factory=list)
    lineage_closures: list[Closure] = dataclasses.field(default_factory=list)
    vectors_missing: list[str] = dataclasses.field(default_factory=list)
    embedding_available: bool = False
    vector_counts: vectors.VectorCounts | None = None
    """The sqlite-vec tables counted against live rows (None: the home keeps none)."""
    vector_writer: vectors.VectorWriter | None = None
    """Whether Mnemosyne here can write sqlite-vec vectors (asked only when some are missing)."""
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)

    def add(self, code: str, severity: str, message: str, fix: str | None = None) -> None:
        """Record a finding."""
        self.findings.append(Finding(code, severity, message, fix))


def mnemosyne_timestamp(moment: datetime) -> str:
    """The timestamp format CanonicalStore uses for valid_from/valid_until (naive local, seconds)."""
    return moment.isoformat(timespec="seconds")


def sample(ids: list[Any], limit: int = REVIEW_SAMPLE) -> str:
    """``a, b, c and 4 more``: name a few ids in a message without flooding it."""
    shown = ", ".join(str(value) for value in ids[:limit])
    return f"{shown} and {len(ids) - limit} more" if len(ids) > limit else shown


def outcome(action: str, dry_run: bool) -> str:
    """``closed`` in a real run, ``would be closed`` in a dry run."""
    return f"would be {action}" if dry_run else action


# --- SQLite level -----------------------------------------------------------------------------


def sqlite_integrity(connection: apsw.Connection) -> tuple[list[str], list[str]]:
    """Run ``PRAGMA integrity_check``; return (core problems, FTS5 problems).

    FTS5 problems are repairable (rebuild); anything else is damage to the file itself.
    """
    try:
        lines = [str(row[0]) for row in connection.execute("PRAGMA integrity_check")]
    except apsw.Error as error:  # a badly damaged file can fail the check outright
        return [f"integrity_check could not run: {error}"], []
    if lines == ["ok"]:
        return [], []
    fts = [line for line in lines if FTS_MESSAGE.search(line)]
    core = [line for line in lines if not FTS_MESSAGE.search(line)]
    return core, fts


def foreign_key_violations(connection: apsw.Connection, audit: Audit) -> None:
    """``PRAGMA foreign_key_check``: rows whose parent row is missing, per table."""
    per_table: dict[str, list[Any]] = {}
    for table, row_id, parent, _key in connection.execute("PRAGMA foreign_key_check"):
        per_table.setdefault(f"{table} -> {parent}", []).append(row_id)
    for relation, row_ids in sorted(per_table.items()):
        audit.add(
            "foreign-key-violation",
            "error",
            f"rows of {relation} whose parent row is missing: {len(row_ids)} (rowids {sample(row_ids)}); "
            "reported for review, nothing is removed",
        )


def fts_consistency_error(connection: apsw.Connection, table: str, attempts: int = 8) -> str | None:
    """FTS5 ``integrity-check`` (rank 1: index against content) inside a transaction that is rolled back.

    The command is an INSERT, so it needs a writable connection, but it changes nothing; rolling back
    makes that certain. It holds the write lock while it reads the whole index, so monthly-maintenance
    runs it on a private snapshot copy, never beside the live agent.
    ``BEGIN IMMEDIATE`` takes the write lock up front, so when the live agent holds
    it the busy timeout waits instead of failing at once; a busy attempt is simply tried again.
    Returns None when consistent, else the error text.
    """
    for attempt in range(1, attempts + 1):
        try:
            connection.execute("BEGIN IMMEDIATE")
        except apsw.BusyError:
            if attempt == attempts:
                raise
            time.sleep(0.05 * attempt)
            continue
        try:
            connection.execute(
                f'INSERT INTO "{table}"("{table}", rank) VALUES (\'integrity-check\', 1)'
            )
            return None
        except apsw.CorruptError as error:
            return str(error)
        finally:
            connection.execute("ROLLBACK")
    return None


# --- fts_working against working_memory --------------------------------------------------------


def reconcile_fts_entries(
    entries: list[tuple[int, Any]], content: str | None
) -> tuple[list[int], bool, str | None]:
    """Decide what one working id needs: (entry rowids to delete, insert a fresh entry?, kind).

    kind is "added" (no entry), "removed" (entries for a row that does not exist, or duplicates),
    "reindexed" (entries whose text differs from the row), or None (already right). Used by the plan
    and again inside the repair transaction, so both agree.
    """
    if content is None:
        return [rowid for rowid, _ in entries], False, ("removed" if entries else None)
    matching = [rowid for rowid, text in entries if text == content]
    if matching:
        extras = [rowid for rowid, _ in entries if rowid != matching[0]]
        return extras, False, ("removed" if extras else None)
    if entries:
        return [rowid for rowid, _ in entries], True, "reindexed"
    return [], True, "added"


def _working_rows(connection: apsw.Connection) -> Iterator[tuple[str, str]]:
    yield from connection.execute("SELECT CAST(id AS TEXT), content FROM working_memory ORDER BY 1")


def _fts_groups(connection: apsw.Connection) -> Iterator[tuple[str | None, list[tuple[int, Any]]]]:
    rows = connection.execute(
        "SELECT CAST(id AS TEXT), rowid, content FROM fts_working ORDER BY 1, 2"
    )
    for key, group in itertools.groupby(rows, key=lambda row: row[0]):
        yield key, [(rowid, text) for _, rowid, text in group]


def plan_fts_working(connection: apsw.Connection) -> FtsWorkingPlan:
    """Compare fts_working with working_memory in one sorted merge (bounded memory, O(n log n))."""
    plan = FtsWorkingPlan()
    counts = {"added": 0, "removed": 0, "reindexed": 0}
    rows, groups = _working_rows(connection), _fts_groups(connection)
    row, group = next(rows, None), next(groups, None)
    while row is not None or group is not None:
        if group is not None and group[0] is None:  # entries without an id belong to no row
            plan.null_id_rowids.extend(rowid for rowid, _ in group[1])
            counts["removed"] += len(group[1])
            group = next(groups, None)
            continue
        if group is None or (row is not None and row[0] < group[0]):
            memory_id, content, entries = row[0], row[1], []
            row = next(rows, None)
        elif row is None or group[0] < row[0]:
            memory_id, content, entries = group[0], None, group[1]
            group = next(groups, None)
        else:
            memory_id, content, entries = row[0], row[1], group[1]
            row, group = next(rows, None), next(groups, None)
        deletions, insert, kind = reconcile_fts_entries(entries, content)
        if kind is None:
            continue
        plan.ids.append(memory_id)
        counts[kind] += len(deletions) if kind == "removed" else 1
    plan.added, plan.removed, plan.reindexed = (
        counts["added"],
        counts["removed"],
        counts["reindexed"],
    )
    return plan


def fts_findings(audit: Audit, dry_run: bool) -> None:
    """Turn the fts_working plan and the rebuilds into findings."""
    plan = audit.fts_working
    for count, code, what, action in (
        (plan.added, "fts-working-missing", "working rows missing from fts_working", "re-indexed"),
        (
            plan.removed,
            "fts-working-stale",
            "fts_working entries without their row, or duplicated",
            "removed (index data only)",
        ),
        (
            plan.reindexed,
            "fts-working-outdated",
            "fts_working entries whose text differs from the row",
            "re-indexed",
        ),
    ):
        if count:
            audit.add(code, "warning", f"{what}: {count}; {outcome(action, dry_run)}")
    for table in audit.rebuild_tables:
        audit.add(
            f"fts-{table.removeprefix('fts_')}-inconsistent",
            "error",
            f"{table}: FTS5 integrity-check failed; {outcome('rebuilt', dry_run)} with 'rebuild'",
        )


# --- graph -------------------------------------------------------------------------------------


def _exists_clause(node: str, tables: set[str]) -> str:
    """SQL that is true when `node` names a row Mnemosyne can resolve (memory, gist or fact)."""
    lookups = [
        (table, column)
        for table, column in (
            ("working_memory", "id"),
            ("episodic_memory", "id"),
            ("memories", "id"),
            ("gists", "id"),
            ("facts", "fact_id"),
        )
        if table in tables
    ]
    return (
        " OR ".join(
            f"EXISTS (SELECT 1 FROM {table} WHERE {column} = {node})" for table, column in lookups
        )
        or "0"
    )


def _known_memory_reference(connection: apsw.Connection, node: str, tables: set[str]) -> bool:
    """Whether an unresolvable end was a memory reference (rather than a free-form agent node).

    Mnemosyne's doctor counts an end as a memory reference when memory_embeddings knows the id; we
    also accept gist_/fact_ graph nodes, Mnemosyne's 16-hex id shape, and ids that gists, facts or
    annotations still mention.
    """
    if node.startswith(("gist_", "fact_")) or MEMORY_ID_SHAPE.match(node):
        return True
    for table, column in (
        ("memory_embeddings", "memory_id"),
        ("gists", "memory_id"),
        ("facts", "source_msg_id"),
        ("annotations", "memory_id"),
    ):
        if (
            table in tables
            and connection.execute(
                f"SELECT 1 FROM {table} WHERE {column} = ? LIMIT 1", (node,)
            ).fetchone()
        ):
            return True
    return False


def dangling_graph_edges(connection: apsw.Connection, audit: Audit, tables: set[str]) -> None:
    """Edges with an end that is a memory/graph-node reference whose row is gone (reported, never removed)."""
    if "graph_edges" not in tables:
        return
    source_ok, target_ok = _exists_clause("e.source", tables), _exists_clause("e.target", tables)
    candidates = connection.execute(
        f"SELECT e.id, e.source, e.target, ({source_ok}), ({target_ok}) FROM graph_edges e "
        f"WHERE NOT ({source_ok}) OR NOT ({target_ok}) ORDER BY e.id"
    )
    dangling, opaque = [], 0
    for edge_id, source, target, source_found, target_found in candidates:
        ends = [
            node for node, found in ((source, source_found), (target, target_found)) if not found
        ]
        if any(_known_memory_reference(connection, str(node), tables) for node in ends):
            dangling.append(edge_id)
        else:
            opaque += 1
    audit.stats["graph_opaque_edges"] = opaque
    if dangling:
        audit.add(
            "graph-dangling-edges",
            "warning",
            f"graph edges with an end (memory, gist or fact) that no longer exists: {len(dangling)} "
            f"(edge ids {sample(dangling)}); reported for review, never removed",
        )


# --- canonical facts and triples ---------------------------------------------------------------


def _close_chain(table: str, rows: list[tuple[int, str]]) -> list[Closure]:
    """Close each row at the valid_from of the next newer one (rows sorted oldest first).

    This is what Mnemosyne would have done writing them one after another (TripleStore.add,
    CanonicalStore.remember): the newest stays current.
    """
    return [Closure(table, rows[index][0], rows[index + 1][1]) for index in range(len(rows) - 1)]


def canonical_duplicates(
    connection: apsw.Connection, audit: Audit, tables: set[str], dry_run: bool
) -> None:
    """Slots with more than one current row (only possible when idx_canonical_current is missing)."""
    if "canonical_facts" not in tables:
        return
    slots = list(
        connection.execute(
            "SELECT owner_id, category, name FROM canonical_facts WHERE valid_until IS NULL "
            "GROUP BY owner_id, category, name HAVING count(*) > 1"
        )
    )
    for owner, category, name in slots:
        rows = list(
            connection.execute(
                "SELECT id, valid_from FROM canonical_facts WHERE owner_id = ? AND category = ? AND name = ? "
                "AND valid_until IS NULL ORDER BY julianday(valid_from), version, id",
                (owner, category, name),
            )
        )
        audit.canonical_closures.extend(_close_chain("canonical_facts", rows))
    if slots:
        ids = [closure.row_id for closure in audit.canonical_closures]
        audit.add(
            "canonical-duplicate-current",
            "error",
            f"canonical slots with more than one current row: {len(slots)} (Mnemosyne cannot re-create its "
            f"unique index while they exist); older rows {outcome('closed', dry_run)} at the newer one's "
            f"valid_from (canonical ids {sample(ids)})",
        )


def triple_invariants(
    connection: apsw.Connection,
    audit: Audit,
    tables: set[str],
    multi_valued: list[str],
    dry_run: bool,
) -> None:
    """valid_from after valid_until (reported) and several open rows per (subject, predicate) (closed)."""
    if "triples" not in tables:
        return
    inverted = [
        row[0]
        for row in connection.execute(
            "SELECT id FROM triples WHERE valid_until IS NOT NULL AND valid_from IS NOT NULL "
            "AND julianday(valid_until) < julianday(valid_from) ORDER BY id"
        )
    ]
    if inverted:
        audit.add(
            "triple-inverted-validity",
            "warning",
            f"triples whose valid_until is before their valid_from: {len(inverted)} (ids {sample(inverted)}); "
            "reported for review, the right dates cannot be guessed",
        )
    skip = ",".join("?" * len(multi_valued))
    exclusion = f"AND predicate NOT IN ({skip})" if multi_valued else ""
    pairs = list(
        connection.execute(
            f"SELECT subject, predicate FROM triples WHERE valid_until IS NULL {exclusion} "
            "GROUP BY subject, predicate HAVING count(*) > 1",
            tuple(multi_valued),
        )
    )
    for subject, predicate in pairs:
        rows = list(
            connection.execute(
                "SELECT id, valid_from FROM triples WHERE subject = ? AND predicate = ? AND valid_until IS NULL "
                "ORDER BY julianday(valid_from), id",
                (subject, predicate),
            )
        )
        audit.triple_closures.extend(_close_chain("triples", rows))
    if pairs:
        ids = [closure.row_id for closure in audit.triple_closures]
        audit.add(
            "triple-overlapping-open",
            "warning",
            f"(subject, predicate) pairs with several open triples: {len(pairs)}; older triples "
            f"{outcome('closed', dry_run)} at the newer one's valid_from (triple ids {sample(ids)}). List "
            "multi-valued predicates in monthly_maintenance.multi_valued_predicates to keep them open",
        )


# --- working memory ----------------------------------------------------------------------------


def superseded_by_missing(connection: apsw.Connection, audit: Audit, tables: set[str]) -> None:
    """Working rows whose superseded_by names no working, episodic or legacy memory."""
    targets = " OR ".join(
        f"EXISTS (SELECT 1 FROM {table} t WHERE t.id = w.superseded_by)"
        for table in ("working_memory", "episodic_memory", "memories")
        if table in tables
    )
    ids = [
        row[0]
        for row in connection.execute(
            f"SELECT w.id FROM working_memory w WHERE w.superseded_by IS NOT NULL AND w.superseded_by != '' "
            f"AND NOT ({targets}) ORDER BY w.id"
        )
    ]
    if ids:
        audit.add(
            "working-superseded-by-missing",
            "warning",
            f"working rows superseded by a memory that does not exist: {len(ids)} (ids {sample(ids)}); "
            "reported for review",
        )


def orphaned_claims(connection: apsw.Connection, audit: Audit, stale_hours: int) -> None:
    """Rows claimed by a sleep pass that never wrote the episodic summary (the pass died)."""
    cutoff = (local_now() - timedelta(hours=stale_hours)).isoformat()
    ids = [
        row[0]
        for row in connection.execute(
            "SELECT wm.id FROM working_memory wm WHERE wm.consolidated_at IS NOT NULL "
            "AND wm.consolidation_claimed_at IS NOT NULL AND julianday(wm.consolidation_claimed_at) < julianday(?) "
            "AND NOT EXISTS (SELECT 1 FROM episodic_memory em "
            "WHERE instr(',' || COALESCE(em.summary_of, '') || ',', ',' || wm.id || ',') > 0) ORDER BY wm.id",
            (cutoff,),
        )
    ]
    if ids:
        audit.add(
            "consolidation-claim-orphaned",
            "warning",
            f"working rows claimed by a sleep pass over {stale_hours} h ago that no episodic summary holds: "
            f"{len(ids)} (ids {sample(ids)}); Mnemosyne's reclaim_orphans() releases them for the next sleep",
        )


# --- canonical sweep ---------------------------------------------------------------------------


def auto_lineages(
    connection: apsw.Connection, audit: Audit, tables: set[str], dry_run: bool
) -> None:
    """Close current ``auto:<working id>`` facts whose source row is closed; report those whose row is gone."""
    if "canonical_facts" not in tables:
        return
    now = mnemosyne_timestamp(local_now())
    closed_ids, missing = [], []
    rows = connection.execute(
        "SELECT c.id, c.valid_from, w.id, w.valid_until, w.superseded_by FROM canonical_facts c "
        "LEFT JOIN working_memory w ON w.id = substr(c.source, 6) "
        "WHERE c.valid_until IS NULL AND substr(c.source, 1, 5) = 'auto:' ORDER BY c.id"
    )
    for fact_id, valid_from, working_id, working_until, superseded_by in rows:
        if working_id is None:
            missing.append(fact_id)
            continue
        expired = working_until is not None and _not_after(connection, working_until, now)
        if not expired and not superseded_by:
            continue
        closing = working_until if expired else now
        if _not_after(connection, closing, valid_from):  # never end a fact before it began
            closing = valid_from
        audit.lineage_closures.append(Closure("canonical_facts", fact_id, closing))
        closed_ids.append(fact_id)
    if closed_ids:
        audit.add(
            "auto-lineage-source-closed",
            "info",
            f"auto-promoted canonical facts whose source row is closed: {len(closed_ids)} (canonical ids "
            f"{sample(closed_ids)}); {outcome('closed', dry_run)}",
        )
    if missing:
        audit.add(
            "auto-lineage-source-missing",
            "info",
            f"auto-promoted canonical facts whose source row no longer exists: {len(missing)} (canonical ids "
            f"{sample(missing)}); kept, reported for review",
        )


def _not_after(connection: apsw.Connection, first: str, second: str) -> bool:
    """first <= second as moments (julianday understands dates and ISO datetimes alike)."""
    row = connection.execute("SELECT julianday(?) <= julianday(?)", (first, second)).fetchone()
    return bool(row[0])


def unconfirmed_facts(
    connection: apsw.Connection, audit: Audit, tables: set[str], age_days: int
) -> None:
    """Old current facts nobody confirmed: auto-promoted, or stored with confidence below 1.0."""
    if "canonical_facts" not in tables:
        return
    cutoff = mnemosyne_timestamp(local_now() - timedelta(days=age_days))
    planned = {closure.row_id for closure in audit.lineage_closures}
    ids = [
        row[0]
        for row in connection.execute(
            "SELECT id FROM canonical_facts WHERE valid_until IS NULL AND julianday(valid_from) < julianday(?) "
            "AND (substr(COALESCE(source, ''), 1, 5) = 'auto:' OR confidence < 1.0) ORDER BY id",
            (cutoff,),
        )
        if row[0] not in planned
    ]
    if ids:
        audit.add(
            "canonical-unconfirmed-old",
            "info",
            f"current canonical facts older than {age_days} days never confirmed (auto-promoted or "
            f"confidence < 1.0): {len(ids)} (ids {sample(ids)}); kept, reported for review",
        )


# --- vectors -----------------------------------------------------------------------------------


def vector_tables(connection: apsw.Connection) -> list[str]:
    """Mnemosyne's sqlite-vec tables present in the schema (whether or not we can load vec0)."""
    return [
        row[0]
        for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('vec_working', 'vec_episodes') "
            "AND sql LIKE '%USING vec0%' ORDER BY name"
        )
    ]


def missing_vectors(connection: apsw.Connection, audit: Audit, tables: set[str]) -> None:
    """Live working rows without a vector, when the database keeps vectors at all.

    A database keeps vectors when it has vec0 tables or its memory_embeddings fallback holds rows;
    an empty memory_embeddings (Mnemosyne always creates it) means no model was ever used.
    """
    vec = vector_tables(connection)
    has_fallback = (
        "memory_embeddings" in tables
        and connection.execute("SELECT 1 FROM memory_embeddings LIMIT 1").fetchone() is not None
    )
    audit.stats["vector_tables"] = vec + (["memory_embeddings"] if has_fallback else [])
    if not vec and not has_fallback:
        return
    if "memory_embeddings" not in tables:
        return
    now = local_now().isoformat()
    audit.vectors_missing = [
        row[0]
        for row in connection.execute(
            "SELECT w.id FROM working_memory w WHERE (w.superseded_by IS NULL OR w.superseded_by = '') "
            "AND (w.valid_until IS NULL OR julianday(w.valid_until) > julianday(?)) "
            "AND NOT EXISTS (SELECT 1 FROM memory_embeddings m WHERE m.memory_id = w.id) ORDER BY w.id",
            (now,),
        )
    ]


def vector_findings(audit: Audit, dry_run: bool) -> None:
    """One finding for rows without vectors: re-embedded, or one counted warning without a model;
    then the sqlite-vec tables against live rows (``index_findings``)."""
    index_findings(audit, dry_run)
    missing = audit.vectors_missing
    if not missing:
        return
    if audit.embedding_available:
        audit.add(
            "vectors-missing",
            "warning",
            f"live working rows without a vector: {len(missing)}; "
            f"{outcome('re-embedded', dry_run)} through Mnemosyne's embedding model",
        )
    else:
        audit.add(
            "vectors-missing-no-model",
            "warning",
            f"live working rows without a vector: {len(missing)} (ids {sample(missing)}); no embedding "
            "model is available to re-embed them: install fastembed or configure MNEMOSYNE_EMBEDDING_MODEL, "
            "then run monthly-maintenance again",
        )


def sqlite_vec_writable(audit: Audit) -> bool:
    """True when the probe found that Mnemosyne here loads sqlite-vec."""
    return audit.vector_writer is not None and audit.vector_writer.sqlite_vec


def episodes_embeddable(audit: Audit) -> bool:
    """True when missing episode vectors can be written: sqlite-vec and the model both work."""
    return sqlite_vec_writable(audit) and audit.vector_writer.model_available


def planned_index_writes(audit: Audit) -> tuple[int, int]:
    """(vec_working rows to mirror, vec_episodes rows to add) the repair will write."""
    counts = audit.vector_counts
    if counts is None or not sqlite_vec_writable(audit):
        return 0, 0
    reembedded = len(audit.vectors_missing) if audit.embedding_available else 0
    episodes = len(counts.unindexed_episodes) if episodes_embeddable(audit) else 0
    return len(counts.unindexed_working) + reembedded, episodes


def index_findings(audit: Audit, dry_run: bool) -> None:
    """Rows recall's vector voice cannot find (no sqlite-vec row): repaired, or one warning why not."""
    counts = audit.vector_counts
    if counts is None:
        return
    audit.stats["vectors"] = counts.to_stats()
    writer = audit.vector_writer
    why = (writer.reason if writer else None) or "sqlite-vec cannot be loaded here"
    working = len(counts.unindexed_working)
    if working:
        if sqlite_vec_writable(audit):
            audit.add(
                "vectors-unindexed",
                "warning",
                f"working rows with a stored embedding but no sqlite-vec vector: {working}; "
                f"{outcome('mirrored into vec_working', dry_run)} through Mnemosyne",
            )
        else:
            audit.add(
                "vectors-unindexed-no-sqlite-vec",
                "warning",
                f"working rows with a stored embedding but no sqlite-vec vector: {working} "
                f"(ids {sample(counts.unindexed_working)}); not mirrored: {why}",
            )
    episodes = len(counts.unindexed_episodes)
    if episodes:
        if episodes_embeddable(audit):
            audit.add(
                "episode-vectors-missing",
                "warning",
                f"live episodes without a vector: {episodes}; "
                f"{outcome('embedded', dry_run)} through Mnemosyne's embedding model",
            )
        else:
            reason = why if not sqlite_vec_writable(audit) else "no embedding model is available"
            audit.add(
                "episode-vectors-missing-no-model",
                "warning",
                f"live episodes without a vector: {episodes} (ids "
                f"{sample(counts.unindexed_episodes)}); not embedded: {reason}; fix it, then run "
                "monthly-maintenance again",
            )
    if counts.orphans:
        audit.add(
            "vectors-orphaned",
            "info",
            f"sqlite-vec rows whose memory row no longer exists: {counts.orphans}; recall never "
            "returns them; kept",
        )


def run_audit(
    connection: apsw.Connection,
    checker: apsw.Connection | None,
    options: dict[str, Any],
    dry_run: bool,
) -> Audit:
    """Run every read-only check after integrity_check passed; `checker` (writable) runs FTS5's integrity-check."""
    audit = Audit()
    tables = database.table_names(connection)
    foreign_key_violations(connection, audit)
    for table in ("fts_working", "fts_episodes"):
        if table not in tables:
            continue
        if checker is None:
            audit.add(
                "fts-check-skipped",
                "info",
                f"{table}: FTS5 integrity-check skipped: no private copy of the database could be "
                "made (free space below the agent's reserve, or a read error)",
            )
            continue
        try:
            if fts_consistency_error(checker, table) is not None:
                audit.rebuild_tables.append(table)
        except (
            apsw.ReadOnlyError,
            apsw.CantOpenError,
        ) as error:  # e.g. a dry run on a read-only mount
            audit.add(
                "fts-check-skipped",
                "info",
                f"{table}: FTS5 integrity-check needs a writable file ({error})",
            )
    if "fts_working" in tables:
        audit.fts_working = plan_fts_working(connection)
    fts_findings(audit, dry_run)
    dangling_graph_edges(connection, audit, tables)
    canonical_duplicates(connection, audit, tables, dry_run)
    triple_invariants(connection, audit, tables, options.multi_valued_predicates, dry_run)
    # Older schemas lack the lifecycle columns until Mnemosyne migrates them; skip what cannot apply.
    columns = set(database.column_names(connection, "working_memory"))
    lifecycle = {"valid_until", "superseded_by"} <= columns
    if lifecycle:
        superseded_by_missing(connection, audit, tables)
    if {"consolidated_at", "consolidation_claimed_at"} <= columns and "episodic_memory" in tables:
        orphaned_claims(connection, audit, options.claim_stale_hours)
    if lifecycle:
        auto_lineages(connection, audit, tables, dry_run)
    unconfirmed_facts(connection, audit, tables, options.unconfirmed_fact_age_days)
    if lifecycle:
        missing_vectors(connection, audit, tables)
        audit.vector_counts = vectors.count_vectors(connection, local_now().isoformat())
    if not lifecycle:
        audit.stats["checks_skipped"] = ["superseded_by", "auto_lineages", "vectors"]
    return audit
