"""Child process: Mnemosyne's own sqlite-vec writes, for monthly-maintenance's vector repair.

Mnemosyne keeps a working row's vector twice (``memory_embeddings`` as JSON, ``vec_working`` as a
sqlite-vec row at the row's rowid) and an episode's in ``vec_episodes`` (and its binary voice in
``episodic_memory.binary_vector``). Recall's vector voice reads the vec0 tables when sqlite-vec is
loaded. Writing them needs the sqlite-vec extension and Mnemosyne's encoding (the vec type of each
table, ``vec_quantize_int8(..., 'unit')`` for int8), so the writes go through Mnemosyne's own
helpers (``beam._backfill_vec_working_from_memory_embeddings``, ``beam._vec_table_insert``,
``binary_vectors.maximally_informative_binarization``) on Mnemosyne's own connection, here, in a
child process: our process never loads Mnemosyne's SQLite library.

Modes (``request["mode"]``):

- ``probe``: can this environment write vectors? sqlite-vec loaded into an in-memory connection
  and the embedding model's availability, as Mnemosyne decides it. Opens no database.
- ``repair``: mirror working rows' stored embeddings into ``vec_working`` (each insert its own
  short transaction), then embed the listed episodes (the model runs outside any transaction) and
  insert their vectors, one short transaction per batch, skipping an episode that got a vector
  meanwhile. Progress messages carry the count done.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import child_main, send_progress


def _probe(request: dict[str, Any]) -> dict[str, Any]:
    from mnemosyne.core import beam, embeddings

    loaded, reason = False, None
    if not beam._SQLITE_VEC_AVAILABLE:
        reason = "the sqlite-vec package is not installed"
    else:
        connection = sqlite3.connect(":memory:")
        try:
            connection.enable_load_extension(True)
            beam.sqlite_vec.load(connection)
            loaded = True
        except Exception as error:  # AttributeError: a Python built without extension loading
            reason = f"this Python cannot load sqlite-vec ({type(error).__name__}: {error})"
        finally:
            connection.close()
    return {
        "sqlite_vec": loaded,
        "reason": reason,
        "model": str(embeddings._DEFAULT_MODEL),
        "model_available": bool(embeddings.available()),
        "dimension": int(embeddings.EMBEDDING_DIM),
    }


def _repair(request: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from mnemosyne.core import beam, embeddings

    connection = beam._get_connection(Path(request["db_path"]))
    if not getattr(connection, "_mnemosyne_vec_loaded", False):
        raise RuntimeError("sqlite-vec could not be loaded on Mnemosyne's connection")
    mirrored = beam._backfill_vec_working_from_memory_embeddings(connection)
    send_progress({"mirrored": mirrored})
    added, error = 0, None
    episode_ids = list(request.get("episode_ids") or [])
    batch_size = int(request.get("batch_size") or 64)
    binarize = getattr(beam, "_mib", None)
    for start in range(0, len(episode_ids), batch_size):
        batch = episode_ids[start : start + batch_size]
        marks = ",".join("?" * len(batch))
        rows = connection.execute(
            f"SELECT e.rowid, e.content FROM episodic_memory e WHERE e.id IN ({marks}) "
            "AND e.content IS NOT NULL AND length(e.content) > 0 "
            "AND NOT EXISTS (SELECT 1 FROM vec_episodes_rowids v WHERE v.rowid = e.rowid)",
            batch,
        ).fetchall()
        if not rows:
            continue
        vectors = embeddings.embed([row[1] for row in rows])
        if vectors is None or len(vectors) != len(rows):
            error = f"the embedding model {embeddings._DEFAULT_MODEL} returned no vectors"
            break
        for row, vector in zip(rows, vectors):
            rowid, array = int(row[0]), np.asarray(vector)
            # Re-checked inside the transaction: the agent may have written it meanwhile.
            if connection.execute(
                "SELECT 1 FROM vec_episodes_rowids WHERE rowid = ?", (rowid,)
            ).fetchone():
                continue
            beam._vec_table_insert(connection, "vec_episodes", rowid, array.tolist(), commit=False)
            if binarize is not None:
                connection.execute(
                    "UPDATE episodic_memory SET binary_vector = ? "
                    "WHERE rowid = ? AND binary_vector IS NULL",
                    (binarize(array), rowid),
                )
            added += 1
        connection.commit()
        send_progress({"episodes": added})
    connection.close()
    return {"mirrored": mirrored, "episodes_added": added, "error": error}


def _handle(request: dict[str, Any]) -> dict[str, Any]:
    if request["mode"] == "probe":
        return _probe(request)
    return _repair(request)


if __name__ == "__main__":
    child_main(_handle)
