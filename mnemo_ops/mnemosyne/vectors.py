"""The vector stores of a Mnemosyne home, counted against its live rows, and their repair.

Counting needs no extension: every sqlite-vec table ``vec_X`` keeps its rowids in the ordinary
shadow table ``vec_X_rowids``, so apsw reads which rows have a vector without loading vec0.
Writing vectors does need it, and Mnemosyne's encoding: that runs in a child process through
Mnemosyne's own helpers (``vector_child``), with the environment of the agent's home, so the model
and the endpoint are the agent's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops.foundation.child_process import ChildProcessFailed, run_child
from mnemo_ops.mnemosyne.api import mnemosyne_environment

CHILD_MODULE = "mnemo_ops.mnemosyne.vector_worker"
PROBE_TIMEOUT_S = 120.0
EPISODE_BATCH = 64
"""Episodes embedded per model call and written per transaction."""

LIVE = (
    "(superseded_by IS NULL OR superseded_by = '') "
    "AND (valid_until IS NULL OR valid_until = '' OR julianday(valid_until) > julianday(?))"
)
"""A row recall may return: neither superseded nor past its valid_until (a local-time stamp)."""


def vec_tables(connection: apsw.Connection) -> set[str]:
    """The sqlite-vec tables of the schema whose rowid shadow table is readable."""
    names = {
        row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    return {
        name
        for name in ("vec_working", "vec_episodes", "vec_facts")
        if name in names and f"{name}_rowids" in names
    }


def keeps_vectors(connection: apsw.Connection) -> bool:
    """True when the home's recall has a vector voice: a sqlite-vec table or Mnemosyne's JSON
    store holds at least one vector (an empty ``memory_embeddings``, which Mnemosyne always creates,
    means no model was ever used)."""
    tables = vec_tables(connection)
    for table in sorted(tables & {"vec_working", "vec_episodes"}):
        if connection.execute(f"SELECT 1 FROM {table}_rowids LIMIT 1").fetchone():
            return True
    names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    return (
        "memory_embeddings" in names
        and connection.execute("SELECT 1 FROM memory_embeddings LIMIT 1").fetchone() is not None
    )


@dataclasses.dataclass
class VectorCounts:
    """Live rows and the vectors recall can find for them."""

    working_live: int = 0
    working_indexed: int = 0
    episodes_live: int = 0
    episodes_indexed: int = 0
    orphans: int = 0
    """vec_working / vec_episodes rows whose row no longer exists (never returned by recall)."""
    unindexed_working: list[str] = dataclasses.field(default_factory=list)
    """Working rows with a stored embedding but no vec_working row: what Mnemosyne's own backfill
    mirrors (live or not, as it does at start-up)."""
    unindexed_episodes: list[str] = dataclasses.field(default_factory=list)
    """Live episodes without a vec_episodes row (to embed)."""

    def to_stats(self) -> dict[str, int]:
        """The counts for the result's stats."""
        return {
            "working_live": self.working_live,
            "working_with_vector": self.working_indexed,
            "episodes_live": self.episodes_live,
            "episodes_with_vector": self.episodes_indexed,
            "orphan_vectors": self.orphans,
        }


def count_vectors(connection: apsw.Connection, now: str) -> VectorCounts | None:
    """Vector counts against live rows at `now`, or None when the home keeps no sqlite-vec tables."""
    tables = vec_tables(connection)
    if "vec_working" not in tables:
        return None
    counts = VectorCounts()

    def one(sql: str) -> int:
        return int(connection.execute(sql, (now,)).fetchone()[0])

    counts.working_live = one(f"SELECT count(*) FROM working_memory WHERE {LIVE}")
    counts.working_indexed = one(
        f"SELECT count(*) FROM working_memory w WHERE {LIVE} "
        "AND EXISTS (SELECT 1 FROM vec_working_rowids v WHERE v.rowid = w.rowid)"
    )
    counts.unindexed_working = [
        row[0]
        for row in connection.execute(
            "SELECT w.id FROM working_memory w "
            "WHERE NOT EXISTS (SELECT 1 FROM vec_working_rowids v WHERE v.rowid = w.rowid) "
            "AND EXISTS (SELECT 1 FROM memory_embeddings m WHERE m.memory_id = w.id) ORDER BY w.id"
        )
    ]
    orphans = connection.execute(
        "SELECT count(*) FROM vec_working_rowids v "
        "WHERE NOT EXISTS (SELECT 1 FROM working_memory w WHERE w.rowid = v.rowid)"
    ).fetchone()[0]
    if "vec_episodes" in tables:
        counts.episodes_live = one(f"SELECT count(*) FROM episodic_memory WHERE {LIVE}")
        counts.unindexed_episodes = [
            row[0]
            for row in connection.execute(
                f"SELECT e.id FROM episodic_memory e WHERE {LIVE} "
                "AND e.content IS NOT NULL AND length(e.content) > 0 "
                "AND NOT EXISTS (SELECT 1 FROM vec_episodes_rowids v WHERE v.rowid = e.rowid) "
                "ORDER BY e.id",
                (now,),
            )
        ]
        counts.episodes_indexed = counts.episodes_live - len(counts.unindexed_episodes)
        orphans += connection.execute(
            "SELECT count(*) FROM vec_episodes_rowids v "
            "WHERE NOT EXISTS (SELECT 1 FROM episodic_memory e WHERE e.rowid = v.rowid)"
        ).fetchone()[0]
    counts.orphans = int(orphans)
    return counts


@dataclasses.dataclass
class VectorWriter:
    """Whether Mnemosyne, in the home's environment, can write vectors (the probe's answer)."""

    sqlite_vec: bool
    model: str
    model_available: bool
    reason: str | None = None


def _environment(db_path: Path, hermes_home: Path) -> dict[str, str]:
    return mnemosyne_environment(Path(db_path).absolute().parent, hermes_home)


def probe_writer(db_path: Path, hermes_home: Path) -> VectorWriter:
    """Ask a child with the home's environment whether it can load sqlite-vec and embed."""
    try:
        reply = run_child(
            CHILD_MODULE,
            {"mode": "probe"},
            timeout=PROBE_TIMEOUT_S,
            environment=_environment(db_path, hermes_home),
        )
    except ChildProcessFailed as error:
        return VectorWriter(False, "unknown", False, f"Mnemosyne could not be asked: {error}")
    return VectorWriter(
        sqlite_vec=bool(reply["sqlite_vec"]),
        model=str(reply["model"]),
        model_available=bool(reply["model_available"]),
        reason=reply.get("reason"),
    )


def write_vectors(
    db_path: Path,
    hermes_home: Path,
    episode_ids: list[str],
    timeout_s: float | None,
    progress=None,
) -> dict[str, Any]:
    """Mirror stored working embeddings into vec_working and embed `episode_ids` into vec_episodes,
    through Mnemosyne in a child process; returns ``{"mirrored", "episodes_added", "error"}``."""
    return run_child(
        CHILD_MODULE,
        {
            "mode": "repair",
            "db_path": str(Path(db_path).absolute()),
            "episode_ids": episode_ids,
            "batch_size": EPISODE_BATCH,
        },
        timeout=timeout_s,
        environment=_environment(db_path, hermes_home),
        on_progress=progress,
    )
