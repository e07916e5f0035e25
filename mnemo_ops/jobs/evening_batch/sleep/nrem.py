"""NREM: clusters of related memories fused into one bounded summary each; the sources stay as they are.

**Candidates** are live working memories whose prominence (``sleep_memories``, computed by the
prominence stage tonight) is in [``nrem_min_prominence``, ``nrem_max_prominence``) and that no summary
of ours covers yet. A memory that is not ``global`` (Mnemosyne's default scope is ``session``) is only
clustered with memories of its own session, so a summary never carries one session's words into
another's recall.

**Clusters** are the connected components of the edge graph among the candidates (every edge type:
orphan linking's ``related_to``, our ``mnemo:`` edges, Mnemosyne's own), cut into connected pieces of
at most ``nrem_max_cluster`` members. When the edges make no cluster of ``nrem_min_cluster`` members,
memories sharing at least two rare terms are linked instead (``clusters.lexical_links``). At most
``nrem_clusters_per_night`` clusters are fused a night, edge clusters first, bigger first; a source
set fused (or rejected) on an earlier night is never fused again (its fingerprint in state.db).

**The summary** comes from the model layer (task ``summary``: the members and the relations between
them, so the model knows why they belong together) when one is configured and may see every member,
else from the extractive fallback (``extractive``). Either must be shorter than its sources together
and at most ``max_summary_chars``; a model answer that is not is asked again once, then the cluster
waits for the next night, as it does when the call fails or the night's model budget is spent.

**The row** is an episodic memory (source ``sleep-nrem``) with ``summary_of`` = its sources, importance
= their highest, confidence (metadata) = their lowest, the tier of the summary repair
(``evening_batch.summary_tier``) and the newest source's timestamp, so recall's cross-tier dedup never
lets it bury them; ``metadata.method`` says what wrote it. It does not decay (``kinds.DERIVED``: dated
like its sources, it would otherwise be forgotten with them at once) and its prominence is capped at
``summary_prominence_cap``. A ``mnemo:derives`` edge links it to each source. The row and its edges are
written in one transaction, with a fixed id made from the fingerprint: a run killed anywhere leaves a
whole summary or none, and the next run writes what is missing exactly once.

Undo: close the row (``valid_until``); its sources were never touched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import defaultdict
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.database import transactions
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now
from mnemo_ops.jobs.evening_batch.sleep import (
    clusters,
    edges,
    extractive,
    kinds,
    observe,
    prominence,
    store,
)
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.models import EXTRACTIVE, Evidence, MalformedAnswer, Request, is_private_row
from mnemo_ops.settings.sections import SleepOptions

SOURCE = kinds.DERIVED_SOURCES[0]
"""The ``source`` of every summary NREM writes (``sleep-nrem``; exempt from decay, see ``kinds``)."""
FUSIONS = "sleep_fusions"
STAGE = "nrem-plan"
MAX_CANDIDATES = 20000
"""The most prominent candidates a night considers (bounds the work on a very large database)."""
PLANNED, WRITTEN, REJECTED, DEFERRED, GONE = "planned", "written", "rejected", "deferred", "gone"
SETTLED = (WRITTEN, REJECTED)
"""A fingerprint in one of these states is never planned again; deferred and gone ones may be."""
SYSTEM = (
    "You condense a person's memories into one short summary for their assistant's long-term "
    "memory. You never add anything the memories do not say."
)
INSTRUCTIONS = (
    "Summarise the memories below (the lines starting [m:...]) in ONE text of at most {limit} "
    "characters, shorter than they are together ({total} characters). Keep every name, number and "
    "date exactly as written. The lines starting [r:...] say how the memories are connected. "
    'Answer with only a JSON object: {{"summary": "..."}}'
)

_DDL = f"""CREATE TABLE IF NOT EXISTS {FUSIONS} (
    fingerprint TEXT PRIMARY KEY, night TEXT NOT NULL, summary_id TEXT NOT NULL,
    sources TEXT NOT NULL, basis TEXT NOT NULL, status TEXT NOT NULL, method TEXT,
    detail TEXT, recorded_at TEXT, written_at TEXT)"""


@dataclasses.dataclass
class Member:
    """One source memory as read tonight."""

    memory_id: str
    content: str
    timestamp: str | None
    session_id: str | None
    scope: str | None
    importance: float | None
    veracity: str | None
    private: bool
    prominence: float
    confidence: float | None

    @property
    def key(self) -> str:
        """``w:<id>``."""
        return store.key_of(store.WORKING, self.memory_id)

    @property
    def domain(self) -> str:
        """Who may see it: ``global``, else its scope within its session."""
        return "global" if self.scope == "global" else f"{self.scope}|{self.session_id}"


@dataclasses.dataclass
class Cluster:
    """A planned fusion: its members and why they belong together."""

    keys: list[str]
    basis: str  # "edges" or "lexical"
    relations: list[tuple[str, str, str]]
    fingerprint: str = ""

    def __post_init__(self) -> None:
        self.fingerprint = self.fingerprint or clusters.fingerprint(self.keys)

    @property
    def summary_id(self) -> str:
        """The summary's fixed id (16 hex digits, as Mnemosyne's ids)."""
        return hashlib.sha256(f"nrem:{self.fingerprint}".encode()).hexdigest()[:16]


def ensure_table(state_db) -> None:
    """Create ``sleep_fusions`` (the run works on private copies in a dry run)."""
    with state_db.conn:
        state_db.conn.execute(_DDL)


def _settled_sources(state_db, connection: apsw.Connection) -> tuple[set[str], set[str]]:
    """(fingerprints never to fuse again, memory keys a summary of ours covers).

    The memory database is the truth for what was written (a run killed between its write and its
    record in state.db has written the summary): every row of source ``sleep-nrem`` counts.
    """
    fingerprints, covered = set(), set()
    for row in state_db.conn.execute(
        f"SELECT fingerprint, sources, status FROM {FUSIONS} WHERE status IN (?, ?)", SETTLED
    ):
        fingerprints.add(row[0])
        if row[2] == WRITTEN:
            covered.update(json.loads(row[1]))
    for summary_of, metadata in connection.execute(
        "SELECT summary_of, metadata_json FROM episodic_memory WHERE source = ?", (SOURCE,)
    ):
        covered.update(f"w:{part.strip()}" for part in (summary_of or "").split(",") if part)
        try:
            fingerprints.add(json.loads(metadata or "{}")["nrem"]["fingerprint"])
        except (ValueError, KeyError, TypeError):
            pass
    return fingerprints, covered


def _candidate_keys(state_db, options: SleepOptions, exclude: set[str]) -> dict[str, float]:
    """Tonight's candidates by prominence (module docstring), most prominent first."""
    return {
        row[0]: float(row[1])
        for row in state_db.conn.execute(
            f"SELECT memory_key, prominence FROM {store.MEMORIES} "
            "WHERE live = 1 AND substr(memory_key, 1, 2) = 'w:' AND prominence >= ? "
            "AND prominence < ? ORDER BY prominence DESC, memory_key LIMIT ?",
            (
                options.nrem_min_prominence,
                options.nrem_max_prominence,
                MAX_CANDIDATES + len(exclude),
            ),
        )
        if row[0] not in exclude
    }


def _members(connection: apsw.Connection, state_db, keys) -> dict[str, Member]:
    """The memories of `keys` that are live in the memory database, by key."""
    known: dict[str, tuple[float, float | None]] = {}
    for chunk in store.chunks(sorted(keys)):
        for key, value, confidence in state_db.conn.execute(
            f"SELECT memory_key, prominence, confidence FROM {store.MEMORIES} "
            f"WHERE memory_key IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            known[key[2:]] = (float(value or 0.0), confidence)
    now = local_timestamp()
    found: dict[str, Member] = {}
    for chunk in store.chunks(sorted(known)):
        for row in connection.execute(
            "SELECT id, content, timestamp, session_id, scope, importance, veracity, metadata_json "
            f"FROM working_memory WHERE id IN ({','.join('?' * len(chunk))}) "
            f"AND {database.live_condition()}",
            (*chunk, now),
        ):
            value, confidence = known[row[0]]
            member = Member(
                memory_id=row[0],
                content=row[1] or "",
                timestamp=row[2],
                session_id=row[3],
                scope=row[4],
                importance=row[5],
                veracity=row[6],
                private=is_private_row(row[4], row[7]),
                prominence=value,
                confidence=confidence,
            )
            if member.content.strip():
                found[member.key] = member
    return found


def _edge_links(
    connection: apsw.Connection, members: dict[str, Member]
) -> dict[tuple[str, str], str]:
    """Edges between candidates of one domain: (key a, key b) sorted -> "type weight"."""
    ids = sorted(member.memory_id for member in members.values())
    links: dict[tuple[str, str], str] = {}
    for chunk in store.chunks(ids):
        marks = ",".join("?" * len(chunk))
        for column in ("source", "target"):
            for source, target, edge_type, weight in connection.execute(
                f"SELECT source, target, edge_type, weight FROM graph_edges WHERE {column} IN ({marks})",
                chunk,
            ):
                first, second = f"w:{source}", f"w:{target}"
                if first == second or first not in members or second not in members:
                    continue
                if members[first].domain != members[second].domain:
                    continue
                pair = (min(first, second), max(first, second))
                links.setdefault(pair, f"{edge_type} (weight {float(weight or 1):.2f})")
    return links


def plan_clusters(
    connection: apsw.Connection, members: dict[str, Member], options: SleepOptions, skip: set[str]
) -> tuple[list[Cluster], str]:
    """Tonight's clusters (module docstring) and the basis they were found on."""
    fewest, most = options.nrem_cluster_bounds

    def rank(key: str) -> tuple:
        return (-members[key].prominence, key)

    found: list[Cluster] = []
    basis = "edges"
    for attempt in ("edges", "lexical"):
        if attempt == "edges":
            links = _edge_links(connection, members)
            labelled = {pair: label for pair, label in links.items()}
        else:
            labelled = {}
            by_domain: dict[str, dict[str, str]] = defaultdict(dict)
            for key, member in members.items():
                by_domain[member.domain][key] = member.content
            for texts in by_domain.values():
                for pair, terms in clusters.lexical_links(texts).items():
                    labelled[pair] = "shares " + ", ".join(terms[:6])
        adjacency: dict[str, set[str]] = defaultdict(set)
        for first, second in labelled:
            adjacency[first].add(second)
            adjacency[second].add(first)
        for component in clusters.components(members, labelled):
            for piece in clusters.split(component, adjacency, rank, most):
                if len(piece) < fewest:
                    continue
                inside = set(piece)
                relations = [
                    (first, second, label)
                    for (first, second), label in sorted(labelled.items())
                    if first in inside and second in inside
                ]
                cluster = Cluster(sorted(piece), attempt, relations)
                if cluster.fingerprint not in skip:
                    found.append(cluster)
        if found:
            basis = attempt
            break
        basis = "none"
    found.sort(
        key=lambda cluster: (
            -len(cluster.keys),
            -sum(members[key].prominence for key in cluster.keys),
            cluster.keys[0],
        )
    )
    return found[: options.nrem_clusters_per_night], basis


def _validator(limit: int, total: int):
    def validate(parsed: Any, _sent: frozenset[str]) -> str:
        if not isinstance(parsed, dict) or not isinstance(parsed.get("summary"), str):
            raise MalformedAnswer('the answer is not {"summary": "..."}')
        text = " ".join(parsed["summary"].split())
        if not text:
            raise MalformedAnswer("the summary is empty")
        if len(text) > limit:
            raise MalformedAnswer(f"the summary has {len(text)} characters, more than {limit}")
        if len(text) >= total:
            raise MalformedAnswer(
                f"the summary ({len(text)} characters) is not shorter than its sources ({total})"
            )
        return text

    return validate


def request_for(cluster: Cluster, members: list[Member], limit: int) -> Request:
    """The model request of one cluster: its members, then the relations between them."""
    total = sum(len(member.content) for member in members)
    private = {member.key: member.private for member in members}
    evidence = [
        Evidence(ref=f"m:{member.memory_id}", text=member.content, private=member.private)
        for member in members
    ]
    for number, (first, second, label) in enumerate(cluster.relations[:40], start=1):
        lexical = label.startswith("shares ")  # quotes memory words: private when they are
        evidence.append(
            Evidence(
                ref=f"r:{number}",
                text=f"m:{first[2:]} and m:{second[2:]}: {label}",
                private=lexical and (private[first] or private[second]),
            )
        )
    return Request(
        task="summary",
        system=SYSTEM,
        instructions=INSTRUCTIONS.format(limit=limit, total=total),
        evidence=evidence,
        validate=_validator(limit, total),
    )


@dataclasses.dataclass
class Written:
    """What one summary's transaction wrote."""

    rows: int = 0
    edges: int = 0
    gone: bool = False


def _write(
    conn: apsw.Connection,
    cluster: Cluster,
    members: list[Member],
    text: str,
    method: str,
    night: str,
    tier: int,
) -> Written:
    """The summary row and its derives edges (inside one transaction; re-checked in it)."""
    now = local_timestamp()
    ids = [member.memory_id for member in members]
    live = conn.execute(
        f"SELECT count(*) FROM working_memory WHERE id IN ({','.join('?' * len(ids))}) "
        f"AND {database.live_condition()}",
        (*ids, now),
    ).fetchone()[0]
    if live != len(ids):
        return Written(gone=True)
    newest = max(member.timestamp or "" for member in members) or now
    newest_member = max(members, key=lambda member: (member.timestamp or "", member.memory_id))
    domain_global = all(member.scope == "global" for member in members)
    veracities = {member.veracity or "unknown" for member in members}
    confidences = [member.confidence for member in members if member.confidence is not None]
    metadata = {
        "method": method,
        "nrem": {
            "fingerprint": cluster.fingerprint,
            "night": night,
            "basis": cluster.basis,
            "sources": len(members),
            "source_chars": sum(len(member.content) for member in members),
        },
    }
    if confidences:
        metadata["confidence"] = round(min(confidences), 4)
    values = {
        "id": cluster.summary_id,
        "content": text,
        "source": SOURCE,
        "timestamp": newest,
        "session_id": newest_member.session_id,
        "importance": max(float(member.importance or 0.0) for member in members),
        "metadata_json": json.dumps(metadata, sort_keys=True),
        "summary_of": ",".join(ids),
        "veracity": veracities.pop() if len(veracities) == 1 else "inferred",
        "scope": "global" if domain_global else newest_member.scope or "session",
        "tier": tier,
    }
    columns = set(database.column_names(conn, store.EPISODIC))
    values = {name: value for name, value in values.items() if name in columns}
    names = list(values)
    conn.execute(
        f"INSERT INTO episodic_memory ({', '.join(names)}) SELECT {', '.join('?' * len(names))} "
        "WHERE NOT EXISTS (SELECT 1 FROM episodic_memory WHERE id = ?)",
        (*values.values(), cluster.summary_id),
    )
    written = Written(rows=conn.changes())
    for member in members:
        written.edges += edges.insert_once(
            conn, cluster.summary_id, member.memory_id, edges.DERIVES, 1.0, now
        )
    return written


def _cap_prominence(run: SleepRun, state_db, cap: float) -> int:
    """Cap the prominence of our summaries (their rows in ``sleep_memories``); return how many."""
    prominence.register_functions(state_db.conn, run.retention, run.night.reference)
    with state_db.conn:
        cursor = state_db.conn.execute(
            f"UPDATE {store.MEMORIES} SET prominence = ?, utility = mnemo_utility(?, confirmations), "
            "band = mnemo_band(?) WHERE prominence > ? AND memory_key IN "
            f"(SELECT 'e:' || summary_id FROM {FUSIONS} WHERE status = ?)",
            (cap, cap, cap, cap, WRITTEN),
        )
        return cursor.rowcount


def fuse(run: SleepRun, layer, tier: int) -> dict[str, Any]:
    """Tonight's fusions (module docstring); counts what it wrote."""
    totals: dict[str, Any] = {
        "candidates": 0,
        "basis": None,
        "planned": 0,
        "summaries": 0,
        "derives_edges": 0,
        "rejected": 0,
        "deferred": 0,
        "sources_changed": 0,
        "would_send_to_model": 0,
        "kept_from_model_private": 0,
        "methods": {},
        "prominence_capped": 0,
    }
    try:
        _fuse(run, layer, tier, totals)
    finally:
        run.count("summaries_fused", totals["summaries"])
        run.count("derives_edges_created", totals["derives_edges"])
    return totals


def _fuse(run: SleepRun, layer, tier: int, totals: dict[str, Any]) -> None:
    options = run.options
    state_db = run.open_state()
    connection = run.open_memory()
    try:
        ensure_table(state_db)
        night = run.night.key
        if not store.stage_done(state_db, night, STAGE):
            settled, covered = _settled_sources(state_db, connection)
            keys = list(_candidate_keys(state_db, options, covered))[:MAX_CANDIDATES]
            members = _members(connection, state_db, keys)
            totals["candidates"] = len(members)
            planned, totals["basis"] = plan_clusters(connection, members, options, settled)
            run.before_write()
            with state_db.conn:
                state_db.conn.execute(
                    f"DELETE FROM {FUSIONS} WHERE status IN (?, ?, ?)", (PLANNED, DEFERRED, GONE)
                )  # what earlier nights left undone is found again tonight if it still holds
                state_db.conn.executemany(
                    f"INSERT OR IGNORE INTO {FUSIONS} (fingerprint, night, summary_id, sources, "
                    "basis, status, detail, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            cluster.fingerprint,
                            night,
                            cluster.summary_id,
                            json.dumps(cluster.keys),
                            cluster.basis,
                            PLANNED,
                            json.dumps(cluster.relations),
                            isoformat(utc_now()),
                        )
                        for cluster in planned
                    ],
                )
            store.mark_stage_done(state_db, night, STAGE, isoformat(utc_now()))
        pending = [
            Cluster(
                json.loads(row[1]), row[2], [tuple(item) for item in json.loads(row[3])], row[0]
            )
            for row in state_db.conn.execute(
                f"SELECT fingerprint, sources, basis, detail FROM {FUSIONS} "
                "WHERE night = ? AND status = ? ORDER BY recorded_at, fingerprint",
                (night, PLANNED),
            )
        ]
        totals["planned"] = len(pending)
        if pending:
            members = _members(
                connection, state_db, {key for cluster in pending for key in cluster.keys}
            )
            for cluster in pending:
                _fuse_one(run, tier, layer, state_db, connection, cluster, members, totals)
        totals["prominence_capped"] = _cap_prominence(run, state_db, options.summary_prominence_cap)
    finally:
        connection.close()
        state_db.close()


def _settle(state_db, cluster: Cluster, status: str, method: str | None, detail: str | None):
    with state_db.conn:
        state_db.conn.execute(
            f"UPDATE {FUSIONS} SET status = ?, method = ?, written_at = ?, "
            "detail = coalesce(?, detail) WHERE fingerprint = ?",
            (status, method, isoformat(utc_now()), detail, cluster.fingerprint),
        )


def _fuse_one(run, tier, layer, state_db, connection, cluster, members, totals) -> None:
    options = run.options
    chosen = [members.get(key) for key in cluster.keys]
    if any(member is None for member in chosen):
        totals["sources_changed"] += 1
        _settle(state_db, cluster, GONE, None, None)
        return
    chosen.sort(key=lambda member: (member.timestamp or "", member.memory_id))
    limit = options.max_summary_chars
    text, method = None, EXTRACTIVE
    if layer.use_model:
        if layer.withholds_private and any(member.private for member in chosen):
            totals["kept_from_model_private"] += 1
        else:
            answer = layer.ask(request_for(cluster, chosen, limit))
            sent_members = {ref for ref in answer.sent if ref.startswith("m:")}
            if answer.ok and len(sent_members) == len(chosen):
                text, method = answer.value, answer.method
            elif answer.reason == "dry-run":
                totals["would_send_to_model"] += 1  # the copy gets the fallback as a stand-in
            elif answer.reason in ("failed", "malformed", "budget"):
                totals["deferred"] += 1
                _settle(state_db, cluster, DEFERRED, None, None)
                return
    if text is None:
        text = extractive.summarise([member.content for member in chosen], limit)
    if text is None:
        totals["rejected"] += 1
        _settle(state_db, cluster, REJECTED, None, None)
        return
    run.before_write()
    outcome = transactions.write_batch(
        connection,
        lambda conn: _write(conn, cluster, chosen, text, method, run.night.key, tier),
        label="sleep-nrem",
    )
    if outcome.gone:
        totals["sources_changed"] += 1
        _settle(state_db, cluster, GONE, None, None)
        return
    totals["summaries"] += outcome.rows
    totals["derives_edges"] += outcome.edges
    totals["methods"][method] = totals["methods"].get(method, 0) + 1
    _settle(state_db, cluster, WRITTEN, method, None)
    _observe_summary(run, state_db, connection, cluster.summary_id, options.summary_prominence_cap)


def _observe_summary(run: SleepRun, state_db, connection, summary_id: str, cap: float) -> None:
    """Record the new summary in ``sleep_memories`` as the next observe pass would (its inputs,
    prominence capped), so a second run tonight finds nothing new and writes nothing."""
    columns = set(database.column_names(connection, store.EPISODIC))
    wanted = [name if name in columns else "NULL" for name in observe_columns()]
    row = connection.execute(
        f"SELECT {', '.join(wanted)} FROM episodic_memory WHERE id = ?", (summary_id,)
    ).fetchone()
    if row is None:
        return
    key = store.key_of(store.EPISODIC, summary_id)
    inputs = observe.inputs_of(tuple(row), store.EPISODIC, set(), local_timestamp())
    prominence.register_functions(state_db.conn, run.retention, run.night.reference)
    with state_db.conn:
        state_db.conn.execute(
            f"INSERT OR IGNORE INTO {store.MEMORIES} (memory_key, kind, importance, confidence, "
            "anchor, exempt, live, reinforced, first_night, dirty) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, 1)",
            (key, *inputs, run.night.key),
        )
        state_db.conn.execute(
            f"UPDATE {store.MEMORIES} SET prominence = min(?, mnemo_prominence(kind, anchor, "
            "confirmations, last_confirmed, importance, confidence, exempt IS NOT NULL)) "
            "WHERE memory_key = ? AND dirty = 1",
            (cap, key),
        )
        state_db.conn.execute(
            f"UPDATE {store.MEMORIES} SET utility = mnemo_utility(prominence, confirmations), "
            "band = mnemo_band(prominence), dirty = 0 WHERE memory_key = ? AND dirty = 1",
            (key,),
        )


def observe_columns() -> tuple[str, ...]:
    """The columns ``observe.inputs_of`` reads, in its order."""
    return observe._COLUMNS
