"""Small Hermes homes for the sleep-stage tests, written by the real mnemosyne-memory API.

`build(directory, spec)` runs this file as a child process (importing Mnemosyne initialises files
at its default paths, and the test process must not hold Mnemosyne's sqlite3 connection beside our
apsw ones): every memory of the spec goes through ``Mnemosyne.remember`` in its session; triples
through Mnemosyne's ``TripleStore`` and canonical facts through its ``CanonicalStore`` on the same
database; then rows are aged (``days_ago``) and pinned as the spec says, the way the sample and the
conversation homes age theirs. Returns the memory ids by the spec's keys.

A memory: ``{"key", "content", "session", "source", "importance", "veracity", "days_ago", "pinned",
"author"}`` (``author``: the row's ``author_id``, as Mnemosyne stamps a beam's author).
A triple: ``{"subject", "predicate", "object", "source_key"}`` (added in order: a later one with the
same subject and predicate closes the earlier, as Mnemosyne's TripleStore does).
A canonical fact: ``{"category", "name", "body", "source_key", "source_prefix"}`` (a prefix
``auto:`` makes it the memory's canonical lineage, as mnemo-ops' promotion trigger names them).
Calling `build` again on a built home adds the spec's memories to it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from mnemo_ops.mnemosyne.sample_home import SampleLayout


def build(directory: Path, spec: dict) -> tuple[SampleLayout, dict[str, str]]:
    """Write the home described by `spec` into `directory`; return its layout and the ids by key."""
    layout = SampleLayout(Path(directory))
    for folder in (
        layout.data_dir,
        layout.memory_blocks_dir,
        layout.state_dir,
        layout.directory / "home",
    ):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for block in ("MEMORY.md", "USER.md"):
        (layout.memory_blocks_dir / block).write_text("", encoding="utf-8")
    environment = layout.environ()
    environment["MNEMOSYNE_NO_EMBEDDINGS"] = "1"
    completed = subprocess.run(
        [sys.executable, __file__, str(layout.db_path)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"building the home failed: {completed.stderr[-3000:]}")
    ids = json.loads(completed.stdout.strip().splitlines()[-1])
    return layout, ids


def _write(db_path: Path, spec: dict) -> dict[str, str]:
    from mnemosyne.core.canonical import CanonicalStore
    from mnemosyne.core.memory import Mnemosyne
    from mnemosyne.core.triples import TripleStore

    now = datetime.now()
    ids: dict[str, str] = {}
    sessions: dict[str, Mnemosyne] = {}
    for memory in spec.get("memories", []):
        session = memory.get("session", "default")
        if session not in sessions:
            sessions[session] = Mnemosyne(session_id=session, db_path=db_path)
        ids[memory["key"]] = sessions[session].remember(
            memory["content"],
            source=memory.get("source", "conversation"),
            importance=memory.get("importance", 0.5),
            veracity=memory.get("veracity", "unknown"),
        )
    if spec.get("triples"):
        store = TripleStore(db_path=db_path)
        for triple in spec["triples"]:
            store.add(
                triple["subject"],
                triple["predicate"],
                triple["object"],
                source=ids[triple["source_key"]],
            )
    if spec.get("canonical"):
        canonical = CanonicalStore(db_path=db_path)
        for fact in spec["canonical"]:
            canonical.remember(
                spec.get("owner", "default"),
                fact["category"],
                fact["name"],
                fact["body"],
                source=fact.get("source_prefix", "") + ids[fact["source_key"]],
            )
    connection = sqlite3.connect(db_path)
    with connection:
        for position, memory in enumerate(spec.get("memories", [])):
            if memory.get("days_ago") is not None:
                moment = now - timedelta(days=memory["days_ago"], seconds=-position)
                connection.execute(
                    "UPDATE working_memory SET timestamp = ?2, created_at = ?2 WHERE id = ?1",
                    (ids[memory["key"]], moment.isoformat()),
                )
            if memory.get("author"):
                connection.execute(
                    "UPDATE working_memory SET author_id = ? WHERE id = ?",
                    (memory["author"], ids[memory["key"]]),
                )
            if memory.get("pinned"):
                connection.execute(
                    "UPDATE working_memory SET pinned = 1 WHERE id = ?", (ids[memory["key"]],)
                )
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return ids


if __name__ == "__main__":
    import contextlib

    request = json.loads(sys.stdin.read())
    with contextlib.redirect_stdout(sys.stderr):
        result = _write(Path(sys.argv[1]), request)
    print(json.dumps(result))
