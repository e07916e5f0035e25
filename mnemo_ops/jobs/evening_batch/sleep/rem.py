"""REM: new associations between memories already near each other in the graph; only edges, no text.

**Seeds.** Up to ``rem_seeds`` live working memories, at most ``rem_seeds_per_kind`` of one kind, drawn
with weight importance x prominence: each memory's draw key is ``ln(weight) + sigma * z`` with z a
standard normal value seeded by (night, memory), so a night is reproducible (the recall guard's trial,
the live run and a run started again draw the same seeds) and another night draws others.

**Spreading activation** from each seed over the edge graph (either direction, every edge type, at
most 32 strongest edges per memory): ``rem_hops`` hops (4), each multiplying the activation by
``rem_decay`` (0.4), the edge's weight and a log-normal noise of sigma ``rem_noise`` (0.6, mean 1,
seeded like the seeds); a memory keeps its highest activation. The ``rem_candidates_per_seed`` (8)
most activated live working memories the seed has no edge with yet are its candidates.

**The judge** scores each (seed, candidate) pair for novelty, plausibility and usefulness, 1..5: the
model layer (task ``judgement``) when a model is configured and may see both memories, else the
lexical judge (`lexical_scores`: shared rare terms, shared names and numbers, time proximity). A pair
averaging at least ``rem_min_score`` (3) gets a ``mnemo:extends`` edge from the seed, weight = average
/ 5. A failed or malformed model answer skips the pair (counted); the night goes on.

The night's pairs are journaled in state.db (``sleep_associations``) before any edge is written, and
the night is marked done at the end, so a run killed halfway writes the rest when started again and
a second run that night adds nothing. Undo: the edges are ours (``mnemo:extends``); they decay every
night (the edges stage) and can be removed from the graph without touching any memory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
from collections.abc import Callable
from datetime import datetime
from typing import Any

import apsw
from rapidfuzz import fuzz, utils

from mnemo_ops import database
from mnemo_ops.database import transactions
from mnemo_ops.database.fts_query import Vocabulary
from mnemo_ops.foundation.clock import isoformat, local_timestamp, utc_now
from mnemo_ops.jobs.evening_batch.sleep import clusters, edges, extractive, store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.models import Evidence, MalformedAnswer, Request, is_private_row
from mnemo_ops.settings.sections import SleepOptions

ASSOCIATIONS = "sleep_associations"
STAGE = "rem"
FAN_OUT = 32
LEXICAL = "lexical"
SCORES = ("novelty", "plausibility", "usefulness")
SYSTEM = (
    "You judge whether two memories of one person are worth linking in their assistant's memory "
    "graph, so that recalling one brings up the other."
)
INSTRUCTIONS = (
    "Judge the link between memory [a:...] and memory [b:...] below. Score each from 1 (not at all) "
    "to 5 (very): novelty (the link says something neither says alone), plausibility (they really "
    "are about the same people, things or events) and usefulness (recalling one, the other would "
    'help). Answer with only a JSON object: {"novelty": n, "plausibility": n, "usefulness": n}'
)

_DDL = f"""CREATE TABLE IF NOT EXISTS {ASSOCIATIONS} (
    night TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, activation REAL,
    novelty REAL, plausibility REAL, usefulness REAL, score REAL, weight REAL, method TEXT,
    applied INTEGER NOT NULL DEFAULT 0, recorded_at TEXT, PRIMARY KEY (night, source, target))"""


def standard_normal(*parts: object) -> float:
    """A standard normal value fixed by `parts` (the same parts give the same value, everywhere)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big")).gauss(0.0, 1.0)


def draw_seeds(
    pool: list[tuple[str, str, float, float]], night: str, options: SleepOptions
) -> list[str]:
    """Seeds from `pool` = [(memory key, kind, importance, prominence)] (module docstring)."""
    keyed = []
    for key, kind, importance, value in pool:
        weight = max(0.0, float(importance or 0.0)) * max(0.0, float(value or 0.0))
        if weight <= 0:
            continue
        draw = math.log(weight) + options.rem_seed_noise * standard_normal("seed", night, key)
        keyed.append((-draw, key, kind))
    chosen, per_kind = [], {}
    for _draw, key, kind in sorted(keyed):
        if len(chosen) >= options.rem_seeds:
            break
        if per_kind.get(kind, 0) >= options.rem_seeds_per_kind:
            continue
        per_kind[kind] = per_kind.get(kind, 0) + 1
        chosen.append(key)
    return chosen


def spread(
    seed: str,
    neighbours: Callable[[str], list[tuple[str, float]]],
    night: str,
    options: SleepOptions,
) -> dict[str, float]:
    """Activation of every memory reached from `seed` in `options.rem_hops` hops (module docstring)."""
    activation = {seed: 1.0}
    frontier = {seed: 1.0}
    sigma = options.rem_noise
    for hop in range(1, options.rem_hops + 1):
        reached: dict[str, float] = {}
        for node, level in sorted(frontier.items()):
            for neighbour, weight in neighbours(node):
                noise = math.exp(
                    sigma * standard_normal("hop", night, seed, hop, neighbour) - 0.5 * sigma**2
                )
                value = level * options.rem_decay * min(1.0, max(0.05, weight)) * noise
                if value > max(reached.get(neighbour, 0.0), activation.get(neighbour, 0.0)):
                    reached[neighbour] = value
        if not reached:
            break
        activation.update(reached)
        frontier = reached
    return activation


def _days_apart(first: str | None, second: str | None) -> float:
    try:
        a, b = datetime.fromisoformat(first or ""), datetime.fromisoformat(second or "")
    except ValueError:
        return 365.0
    if (a.tzinfo is None) != (b.tzinfo is None):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    return abs((a - b).total_seconds()) / 86400.0


def _entities(text: str) -> set[str]:
    words = extractive.DETAIL.findall(text or "")
    first = (text or "").split(" ", 1)[0].strip(":,;")
    return {word.lower() for word in words if word != first or word[0].isdigit()}


def lexical_scores(
    first: dict[str, Any], second: dict[str, Any], rare: Callable[[str], bool]
) -> dict[str, float]:
    """The lexical judge's scores 1..5 of a pair of rows (``content``, ``timestamp``).

    plausibility: 1 + 1.5 per shared rare term + 1.5 per shared name or number (at most 5);
    usefulness: 1 + one per shared name or number (at most 2) + 2 * exp(-days apart / 30);
    novelty: 5 for texts that share little, down to 1 for near-copies (rapidfuzz token_set_ratio).
    """
    shared_rare = {
        term
        for term in clusters.content_terms(first["content"])
        & clusters.content_terms(second["content"])
        if rare(term)
    }
    shared_entities = _entities(first["content"]) & _entities(second["content"])
    likeness = fuzz.token_set_ratio(
        first["content"], second["content"], processor=utils.default_process
    )
    days = _days_apart(first["timestamp"], second["timestamp"])
    scores = {
        "novelty": 1 + 4 * (1 - likeness / 100),
        "plausibility": 1 + 1.5 * len(shared_rare) + 1.5 * len(shared_entities),
        "usefulness": 1 + min(2, len(shared_entities)) + 2 * math.exp(-days / 30),
    }
    return {name: round(min(5.0, max(1.0, value)), 2) for name, value in scores.items()}


def _validate(parsed: Any, _sent: frozenset[str]) -> dict[str, float]:
    if not isinstance(parsed, dict):
        raise MalformedAnswer("the answer is not a JSON object")
    scores = {}
    for name in SCORES:
        value = parsed.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 5:
            raise MalformedAnswer(f"{name} is not a score from 1 to 5")
        scores[name] = float(value)
    return scores


def request_for(first: dict[str, Any], second: dict[str, Any], hops: int) -> Request:
    """The model request judging one pair."""
    return Request(
        task="judgement",
        system=SYSTEM,
        instructions=INSTRUCTIONS,
        evidence=[
            Evidence(ref=f"a:{first['id']}", text=first["content"], private=first["private"]),
            Evidence(ref=f"b:{second['id']}", text=second["content"], private=second["private"]),
            Evidence(
                ref="path", text=f"b is reached from a over {hops} hops or fewer", private=False
            ),
        ],
        validate=_validate,
    )


@dataclasses.dataclass(frozen=True)
class Pair:
    """A judged pair, as journaled."""

    source: str
    target: str
    activation: float
    scores: dict[str, float]
    method: str

    @property
    def score(self) -> float:
        """The average of the three scores."""
        return round(sum(self.scores.values()) / len(self.scores), 3)


def ensure_table(state_db) -> None:
    """Create ``sleep_associations``."""
    with state_db.conn:
        state_db.conn.execute(_DDL)


class _Graph:
    """The edge graph, read lazily: a memory's strongest edges either way."""

    def __init__(self, connection: apsw.Connection):
        self.connection = connection
        self.cache: dict[str, list[tuple[str, float]]] = {}

    def neighbours(self, memory_id: str) -> list[tuple[str, float]]:
        if memory_id not in self.cache:
            found: dict[str, float] = {}
            for other, weight in self.connection.execute(
                "SELECT target, weight FROM graph_edges WHERE source = ?1 UNION ALL "
                "SELECT source, weight FROM graph_edges WHERE target = ?1",
                (memory_id,),
            ):
                if other != memory_id:
                    found[other] = max(
                        found.get(other, 0.0), float(1.0 if weight is None else weight)
                    )
            ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))[:FAN_OUT]
            self.cache[memory_id] = ranked
        return self.cache[memory_id]


def _rows(connection: apsw.Connection, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Live working rows by id."""
    now = local_timestamp()
    found = {}
    for chunk in store.chunks(sorted(set(ids))):
        for row in database.fetch_dicts(
            connection,
            "SELECT id, content, timestamp, scope, metadata_json FROM working_memory "
            f"WHERE id IN ({','.join('?' * len(chunk))}) AND {database.live_condition()}",
            (*chunk, now),
        ):
            row["private"] = is_private_row(row["scope"], row.pop("metadata_json"))
            found[row["id"]] = row
    return found


def associate(run: SleepRun, options: SleepOptions, layer) -> dict[str, Any]:
    """Tonight's associations (module docstring); counts what it wrote."""
    totals: dict[str, Any] = {
        "done_before": False,
        "seeds": [],
        "candidates": 0,
        "judged": 0,
        "accepted": 0,
        "extends_edges": 0,
        "skipped_model": 0,
        "would_send_to_model": 0,
        "kept_from_model_private": 0,
        "methods": {},
    }
    try:
        _associate(run, options, layer, totals)
    finally:
        run.count("extends_edges_created", totals["extends_edges"])
    return totals


def _associate(run: SleepRun, options: SleepOptions, layer, totals: dict[str, Any]) -> None:
    state_db = run.open_state()
    connection = run.open_memory()
    night = run.night.key
    try:
        ensure_table(state_db)
        if store.stage_done(state_db, night, STAGE):
            totals["done_before"] = True
            return
        journaled = state_db.conn.execute(
            f"SELECT count(*) FROM {ASSOCIATIONS} WHERE night = ?", (night,)
        ).fetchone()[0]
        if not journaled:
            pairs = _plan(run, options, layer, state_db, connection, totals)
            run.before_write()
            with state_db.conn:
                state_db.conn.execute(f"DELETE FROM {ASSOCIATIONS} WHERE night <> ?", (night,))
                state_db.conn.executemany(
                    f"INSERT OR IGNORE INTO {ASSOCIATIONS} (night, source, target, activation, "
                    "novelty, plausibility, usefulness, score, weight, method, applied, "
                    "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            night,
                            pair.source,
                            pair.target,
                            round(pair.activation, 6),
                            pair.scores["novelty"],
                            pair.scores["plausibility"],
                            pair.scores["usefulness"],
                            pair.score,
                            round(pair.score / 5, 3),
                            pair.method,
                            0 if pair.score >= options.rem_min_score else -1,
                            isoformat(utc_now()),
                        )
                        for pair in pairs
                    ],
                )
        accepted = state_db.conn.execute(
            f"SELECT source, target, weight, method, applied FROM {ASSOCIATIONS} "
            "WHERE night = ? AND applied >= 0 ORDER BY source, target",
            (night,),
        ).fetchall()
        totals["accepted"] = len(accepted)
        for _source, _target, _weight, method, _applied in accepted:
            totals["methods"][method] = totals["methods"].get(method, 0) + 1
        todo = [row for row in accepted if row[4] == 0]
        if todo:
            run.before_write()
            stamp = local_timestamp()

            def apply(conn: apsw.Connection, row) -> int:
                source, target = row[0][2:], row[1][2:]
                linked = conn.execute(
                    "SELECT 1 FROM graph_edges WHERE (source = ?1 AND target = ?2) "
                    "OR (source = ?2 AND target = ?1) LIMIT 1",
                    (source, target),
                ).fetchone()
                if linked:
                    return 0
                return edges.insert_once(conn, source, target, edges.EXTENDS, row[2], stamp)

            written = transactions.write_items(connection, todo, apply, label="sleep-rem")
            totals["extends_edges"] = sum(written)
            with state_db.conn:
                state_db.conn.executemany(
                    f"UPDATE {ASSOCIATIONS} SET applied = 1 WHERE night = ? AND source = ? "
                    "AND target = ?",
                    [(night, row[0], row[1]) for row in todo],
                )
        run.before_write()
        store.mark_stage_done(state_db, night, STAGE, isoformat(utc_now()))
    finally:
        connection.close()
        state_db.close()


def _plan(run, options, layer, state_db, connection, totals) -> list[Pair]:
    """Seeds, activation, candidates and the judge's scores (read-only, model calls included)."""
    pool = [
        (row[0], row[1] or "event", row[2], row[3])
        for row in state_db.conn.execute(
            f"SELECT memory_key, kind, importance, prominence FROM {store.MEMORIES} "
            "WHERE live = 1 AND substr(memory_key, 1, 2) = 'w:' AND prominence > 0"
        )
    ]
    night = run.night.key
    live = _rows(connection, [key[2:] for key, *_ in pool])
    pool = [item for item in pool if item[0][2:] in live]
    seeds = draw_seeds(pool, night, options)
    totals["seeds"] = seeds
    graph = _Graph(connection)
    vocabulary = Vocabulary(connection)
    ceiling = max(3, int(0.02 * max(1, vocabulary.total_documents)))

    def rare(term: str) -> bool:
        return vocabulary.document_frequency([term])[term] <= ceiling

    pairs: list[Pair] = []
    seen: set[tuple[str, str]] = set()
    for seed_key in seeds:
        seed = seed_key[2:]
        direct = {other for other, _ in graph.neighbours(seed)}
        activation = spread(seed, graph.neighbours, night, options)
        reached = [
            (level, other)
            for other, level in activation.items()
            if other != seed and other not in direct
        ]
        rows = _rows(connection, [other for _, other in reached])
        ranked = sorted(
            ((level, other) for level, other in reached if other in rows),
            key=lambda item: (-item[0], item[1]),
        )[: options.rem_candidates_per_seed]
        for level, other in ranked:
            pair_key = (min(seed, other), max(seed, other))
            if pair_key in seen:
                continue
            seen.add(pair_key)
            totals["candidates"] += 1
            first, second = live[seed], rows[other]
            scores, method = None, LEXICAL
            if layer.use_model:
                if layer.withholds_private and (first["private"] or second["private"]):
                    totals["kept_from_model_private"] += 1
                else:
                    answer = layer.ask(request_for(first, second, options.rem_hops))
                    if answer.ok:
                        scores, method = answer.value, answer.method
                    elif answer.reason == "dry-run":
                        totals["would_send_to_model"] += 1
                    elif answer.reason in ("failed", "malformed", "budget"):
                        totals["skipped_model"] += 1
                        continue
            if scores is None:
                scores = lexical_scores(first, second, rare)
            totals["judged"] += 1
            pairs.append(Pair(f"w:{seed}", f"w:{other}", level, scores, method))
    return pairs
