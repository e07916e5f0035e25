"""Known-item probes: queries made of a live memory's salient terms, with that memory as the answer.

The probe set lives in state.db (``guard_probes``) so the same probes are measured night after night.
It is built deterministically from live working memories, stratified over (session, source) so that
no single conversation or channel dominates it, and refreshed as memories come and go: a probe whose
memory is no longer live is retired (and reported), free places are filled, and a stratum that has
none yet takes a place from the most represented one.

A probe's query is three of its memory's moderately rare shared terms (each held by at least one
other memory, so the ranking has work to do): the two rarest are left out of the query, since alone
they would name the memory and hide any change in ranking; they and the next term are the probe's
answer terms. (Measured on an aged conversation database: probes of the rarest terms did not see the
recall collapse a tier-1 summary causes; these see it in MRR.) A returned item answers the
probe when it is the memory itself, or when the text recall returned for it (as Mnemosyne cuts it)
holds every answer term and every query term: a short, faithful summary counts, a 500-character cut
of a long concatenation that lost the fact does not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.core.state import StateTable
from mnemo_ops.database.fts_query import Vocabulary, salient_terms, tokens
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now

TABLE = "guard_probes"
QUERY_TERMS = 3
SKIPPED_RAREST = 2
ANSWER_TERMS = 3
MIN_CONTENT_CHARS = 40
MAX_TERM_SHARE = 0.3
"""A term held by more than this share of memories says too little to find one of them."""


@dataclasses.dataclass(frozen=True)
class Probe:
    """One known-item probe."""

    memory_id: str
    session_id: str | None
    source: str | None
    query_terms: tuple[str, ...]
    answer_terms: tuple[str, ...]

    @property
    def query(self) -> str:
        """The query text sent to recall."""
        return " ".join(self.query_terms)

    def answered_by(self, item_id: str, returned_text: str) -> bool:
        """True when a returned item answers the probe (see the module docstring)."""
        if item_id == self.memory_id:
            return True
        held = set(tokens(returned_text, limit=4096))
        return all(term in held for term in (*self.query_terms, *self.answer_terms))

    def to_row(self, created_at: str) -> dict[str, Any]:
        """The state.db row."""
        return {
            "memory_id": self.memory_id,
            "session_id": self.session_id,
            "source": self.source,
            "query_terms": json.dumps(list(self.query_terms)),
            "answer_terms": json.dumps(list(self.answer_terms)),
            "created_at": created_at,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Probe:
        """A probe read back from state.db."""
        return cls(
            memory_id=row["memory_id"],
            session_id=row["session_id"],
            source=row["source"],
            query_terms=tuple(json.loads(row["query_terms"])),
            answer_terms=tuple(json.loads(row["answer_terms"])),
        )


@dataclasses.dataclass
class Refresh:
    """What a refresh did to the stored probe set."""

    probes: list[Probe]
    added: list[Probe] = dataclasses.field(default_factory=list)
    retired: list[str] = dataclasses.field(default_factory=list)

    def to_stats(self) -> dict[str, int]:
        """Counts for the result's stats."""
        return {"probes": len(self.probes), "added": len(self.added), "retired": len(self.retired)}


def _order_key(*parts: Any) -> str:
    """A stable pseudo-random order (sha256), the same on every machine and run."""
    return hashlib.sha256("\x1f".join(str(part) for part in parts).encode()).hexdigest()


def _stratum(session_id: str | None, source: str | None) -> tuple[str, str]:
    return (session_id or "", source or "")


def strata_since(connection: apsw.Connection, after_rowid: int) -> set[tuple[str, str]]:
    """The (session, source) strata of the live working memories past `after_rowid` (0: all)."""
    return {
        _stratum(row[0], row[1])
        for row in connection.execute(
            "SELECT DISTINCT session_id, source FROM working_memory "
            f"WHERE rowid > ? AND {database.live_condition()} AND length(content) >= ?",
            (after_rowid, local_timestamp(), MIN_CONTENT_CHARS),
        )
    }


def _high_rowid(connection: apsw.Connection) -> int:
    return connection.execute("SELECT coalesce(max(rowid), 0) FROM working_memory").fetchone()[0]


class StratumRows(Mapping):
    """`candidates` for the given strata, read one stratum at a time when first asked for (through
    the session index): a refresh that fills no place reads no stratum."""

    def __init__(
        self, connection: apsw.Connection, strata: Iterable[tuple[str, str]], per_stratum: int
    ):
        self.connection = connection
        self.strata = sorted(set(strata))
        self.per_stratum = per_stratum
        self.loaded: dict[tuple[str, str], list[tuple[str, str, str | None, str | None]]] = {}

    def __getitem__(self, key: tuple[str, str]):
        if key not in self.loaded:
            session, source = key
            # "" stands for a missing session or source (`_stratum`).
            session_sql = "coalesce(session_id, '') = ''" if not session else "session_id = ?"
            arguments = ([] if not session else [session]) + [source]
            self.loaded[key] = [
                tuple(row)
                for row in self.connection.execute(
                    "SELECT id, content, session_id, source FROM working_memory "
                    f"WHERE {session_sql} AND coalesce(source, '') = ? "
                    f"AND {database.live_condition()} AND length(content) >= ? ORDER BY id LIMIT ?",
                    (*arguments, local_timestamp(), MIN_CONTENT_CHARS, self.per_stratum),
                )
            ]
        return self.loaded[key]

    def __contains__(self, key: object) -> bool:
        return key in self.strata

    def __iter__(self):
        return iter(self.strata)

    def __len__(self) -> int:
        return len(self.strata)


STRATA = StateTable(
    "guard_probe_strata",
    {"id": int, "high_rowid": int, "strata": str},
    pk="id",
)
"""``guard_probe_strata`` in state.db: the strata seen so far and the highest rowid looked at, so
a refresh looks only at the rows added since (one row, id 1)."""


def _known_strata(state_db) -> tuple[set[tuple[str, str]], int] | None:
    if state_db is None or STRATA.name not in state_db.table_names():
        return None
    rows = list(state_db.query(f"SELECT high_rowid, strata FROM {STRATA.name} WHERE id = 1"))
    if not rows:
        return None
    return {tuple(key) for key in json.loads(rows[0]["strata"])}, int(rows[0]["high_rowid"])


def current_strata(connection: apsw.Connection, state_db) -> set[tuple[str, str]]:
    """The strata of the live memories: those known in state.db and those of the rows added since
    (all of them when nothing is known yet), recorded for the next refresh. A stratum whose rows all
    closed stays known (its share of places is then filled by the others)."""
    high = _high_rowid(connection)
    known = _known_strata(state_db)
    if known is None or known[1] > high:  # nothing known, or another database's figures
        strata = strata_since(connection, 0)
    else:
        strata = known[0] | strata_since(connection, known[1])
    if state_db is not None and (known is None or known != (strata, high)):
        STRATA.ensure(state_db)
        with state_db.conn:
            state_db[STRATA.name].insert(
                {"id": 1, "high_rowid": high, "strata": json.dumps(sorted(strata))}, replace=True
            )
    return strata


def candidates(
    connection: apsw.Connection, per_stratum: int
) -> dict[tuple[str, str], list[tuple[str, str, str | None, str | None]]]:
    """Up to `per_stratum` live working memories of each stratum: (id, content, session, source).

    Memory ids are hashes, so the first rows of a stratum in id order are an unbiased, stable sample,
    and the whole table is never held in memory.
    """
    chosen: dict[tuple[str, str], list[tuple[str, str, str | None, str | None]]] = {}
    for row in connection.execute(
        "SELECT id, content, session_id, source FROM working_memory "
        f"WHERE {database.live_condition()} AND length(content) >= ? "
        "ORDER BY session_id, source, id",
        (local_timestamp(), MIN_CONTENT_CHARS),
    ):
        rows = chosen.setdefault(_stratum(row[2], row[3]), [])
        if len(rows) < per_stratum:
            rows.append(tuple(row))
    return chosen


def live_ids(connection: apsw.Connection, memory_ids: Iterable[str]) -> set[str]:
    """Which of `memory_ids` are live working memories."""
    wanted = list(memory_ids)
    found: set[str] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        found.update(
            row[0]
            for row in connection.execute(
                f"SELECT id FROM working_memory WHERE id IN ({','.join('?' * len(chunk))}) "
                f"AND {database.live_condition()}",
                (*chunk, local_timestamp()),
            )
        )
    return found


def make_probe(
    memory_id: str, content: str, session_id: str | None, source: str | None, vocabulary: Vocabulary
) -> Probe | None:
    """The probe for one memory, or None when it has too few shared terms to make one."""
    wanted = SKIPPED_RAREST + QUERY_TERMS + (ANSWER_TERMS - SKIPPED_RAREST)
    terms = salient_terms(
        content, vocabulary, limit=wanted, max_document_share=MAX_TERM_SHARE, min_documents=2
    )
    if len(terms) < wanted:
        return None
    query = terms[SKIPPED_RAREST : SKIPPED_RAREST + QUERY_TERMS]
    answer = terms[:SKIPPED_RAREST] + terms[SKIPPED_RAREST + QUERY_TERMS :]
    return Probe(
        memory_id=memory_id,
        session_id=session_id,
        source=source,
        query_terms=tuple(query),
        answer_terms=tuple(answer),
    )


def select(
    by_stratum: Mapping[tuple[str, str], list[tuple[str, str, str | None, str | None]]],
    vocabulary: Vocabulary | Callable[[], Vocabulary],
    size: int,
    keep: Sequence[Probe] = (),
) -> tuple[list[Probe], list[Probe]]:
    """The probe set of `size` for these live candidates, keeping `keep` where still fair.

    `vocabulary` may be a function that returns it (made only when a probe must be made).
    Returns (probes, added). Deterministic: strata and rows are visited in sha256 order, places are
    shared round-robin between strata, and a kept probe stays unless its stratum holds more than its
    share while another stratum has none.
    """
    ordered: dict[tuple[str, str], list] = {}

    def rows_of(key: tuple[str, str]) -> list:
        if key not in ordered:
            rows = by_stratum.get(key, [])
            ordered[key] = sorted(rows, key=lambda row: _order_key("probe", row[0]))
        return ordered[key]

    strata = sorted(
        set(by_stratum) | {_stratum(p.session_id, p.source) for p in keep},
        key=lambda key: _order_key("stratum", *key),
    )
    share = max(1, -(-size // max(1, len(strata))))  # ceil(size / strata)

    kept_by_stratum: dict[tuple[str, str], list[Probe]] = {}
    for probe in keep:
        kept_by_stratum.setdefault(_stratum(probe.session_id, probe.source), []).append(probe)
    chosen: dict[tuple[str, str], list[Probe]] = {}
    for key in strata:
        # Over its share, a stratum sheds its probes last in sha order first.
        kept = sorted(kept_by_stratum.get(key, []), key=lambda p: _order_key("probe", p.memory_id))
        chosen[key] = kept[:share]

    added: list[Probe] = []
    cursors = {key: 0 for key in strata}
    while sum(len(probes) for probes in chosen.values()) < size:
        progressed = False
        for key in strata:
            if sum(len(probes) for probes in chosen.values()) >= size:
                break
            rows = rows_of(key)
            taken = {probe.memory_id for probe in chosen[key]}
            while cursors[key] < len(rows):
                memory_id, content, session_id, source = rows[cursors[key]]
                cursors[key] += 1
                if memory_id in taken:
                    continue
                probe = make_probe(
                    memory_id,
                    content,
                    session_id,
                    source,
                    vocabulary() if callable(vocabulary) else vocabulary,
                )
                if probe is not None:
                    chosen[key].append(probe)
                    added.append(probe)
                    progressed = True
                    break
        if not progressed:
            break
    probes = [probe for key in strata for probe in chosen[key]]
    return probes, added


PROBES = StateTable(
    TABLE,
    {
        "memory_id": str,
        "session_id": str,
        "source": str,
        "query_terms": str,
        "answer_terms": str,
        "created_at": str,
    },
    pk="memory_id",
)
"""``guard_probes`` in state.db: the probe set (created only in a real run)."""


def stored(state_db) -> list[Probe]:
    """The probes kept in state.db (none when it or the table does not exist)."""
    if state_db is None or TABLE not in state_db.table_names():
        return []
    return [
        Probe.from_row(dict(row))
        for row in state_db.query(f"SELECT * FROM {TABLE} ORDER BY memory_id")
    ]


ANSWERS = StateTable(
    "guard_probe_answers",
    {"memory_id": str, "answered": int, "measured_at": str},
    pk="memory_id",
)
"""``guard_probe_answers`` in state.db: whether each probe was answered when last measured, on the
database as the guard left it (the changed copy when it accepted, the live one when it refused)."""


def answered(state_db) -> dict[str, bool]:
    """The probes' last answers (none when nothing was measured yet)."""
    if state_db is None or ANSWERS.name not in state_db.table_names():
        return {}
    return {
        row["memory_id"]: bool(row["answered"])
        for row in state_db.query(f"SELECT memory_id, answered FROM {ANSWERS.name}")
    }


def record_answers(state_db, ranks: dict[str, int | None]) -> None:
    """Keep whether each measured probe was answered (a rank) for the next run's first sample."""
    if state_db is None or not ranks:
        return
    ANSWERS.ensure(state_db)
    measured = isoformat(utc_now())
    with state_db.conn:
        state_db[ANSWERS.name].insert_all(
            [
                {"memory_id": memory_id, "answered": int(rank is not None), "measured_at": measured}
                for memory_id, rank in ranks.items()
            ],
            replace=True,
        )


def _round_robin(probes: Sequence[Probe], size: int) -> list[Probe]:
    groups: dict[tuple[str, str], list[Probe]] = {}
    for probe in probes:
        groups.setdefault(_stratum(probe.session_id, probe.source), []).append(probe)
    taken: list[Probe] = []
    depth = 0
    while len(taken) < min(size, len(probes)):
        for group in groups.values():
            if depth < len(group) and len(taken) < size:
                taken.append(group[depth])
        depth += 1
    return taken


def spread_sample(
    probes: Sequence[Probe],
    size: int,
    answers: dict[str, bool] | None = None,
    leading: int = 0,
) -> tuple[list[Probe], list[Probe]]:
    """The first sample of `size` probes and the rest (in the set's order); `size` 0 (or the
    whole set) takes every probe.

    The sample starts with the set's first `leading` probes, in order (the recall guard counts the
    agent's cost on the first turns of a measurement: these are the turns it counts without
    sampling too). Only a probe answered before a change can break or fall in rank, so the rest of
    the sample takes first the probes answered when last measured (`answers`; a probe never
    measured counts as answered), then the others; each group round-robin over strata (the set is
    ordered by stratum, so its first probes would all come from a few sessions).
    """
    if not size or size >= len(probes):
        return list(probes), []
    answers = answers or {}
    sample = list(probes[: min(leading, size)])
    remaining = probes[len(sample) :]
    likely = [probe for probe in remaining if answers.get(probe.memory_id, True)]
    sample += _round_robin(likely, size - len(sample))
    if len(sample) < size:
        unlikely = [probe for probe in remaining if not answers.get(probe.memory_id, True)]
        sample += _round_robin(unlikely, size - len(sample))
    chosen = {probe.memory_id for probe in sample}
    return sample, [probe for probe in probes if probe.memory_id not in chosen]


def refresh(connection: apsw.Connection, state_db, size: int) -> Refresh:
    """Bring the stored probe set up to date with the live memories behind `connection`.

    `state_db` may be None (nothing stored, nothing written: a dry run's view).
    """
    existing = stored(state_db)
    alive = live_ids(connection, [probe.memory_id for probe in existing])
    still = [probe for probe in existing if probe.memory_id in alive]
    strata = current_strata(connection, state_db)
    share = max(1, -(-size // max(1, len(strata))))
    # A few more rows than the share, since some rows have too few shared terms to make a probe;
    # read only for the strata that have places to fill, as is the vocabulary.
    pool = StratumRows(connection, strata, share + 20)
    vocabulary: list[Vocabulary] = []

    def shared_vocabulary() -> Vocabulary:
        if not vocabulary:
            vocabulary.append(Vocabulary(connection))
        return vocabulary[0]

    probes, added = select(pool, shared_vocabulary, size, keep=still)
    kept_ids = {probe.memory_id for probe in probes}
    retired = [probe.memory_id for probe in existing if probe.memory_id not in kept_ids]
    if state_db is not None and (added or retired):
        PROBES.ensure(state_db)
        created = isoformat(utc_now())
        with state_db.conn:
            for memory_id in retired:
                state_db.execute(f"DELETE FROM {TABLE} WHERE memory_id = ?", [memory_id])
            state_db[TABLE].insert_all([probe.to_row(created) for probe in added], replace=True)
    return Refresh(probes=probes, added=added, retired=retired)
