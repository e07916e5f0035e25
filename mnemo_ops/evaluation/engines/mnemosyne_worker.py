"""Child process for work done through Mnemosyne's own API (recall for the eval, benchmark imports).

Run by ``engines/mnemosyne.run_worker`` through ``foundation.child_process`` with
``MNEMOSYNE_DATA_DIR``/``HERMES_HOME`` already pointed at a temp dir. The request's ``mode`` is
``recall`` or ``store``; progress messages carry a count done, the result the answers and the
``mnemosyne_version`` that produced them. Anything Mnemosyne prints goes to stderr.

It also runs under other interpreters (``eval run --python``: an upgrade candidate's venv, without
mnemo-ops), as a standalone copy run by path: import only the standard library, PyYAML and
``mnemosyne`` here (the dependencies of mnemosyne-memory itself) and
``mnemo_ops.foundation.child_process`` (a stand-in of it is copied beside this file), and keep to
Python 3.10 syntax (what Mnemosyne needs).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import child_main, send_progress


def apply_config_overrides(data_dir: Path, overrides: dict[str, str]) -> None:
    """Write the overrides into the (temporary) config.yaml, which Mnemosyne ranks above the environment."""
    import yaml
    from mnemosyne.core.config import ENV_VAR_MAP

    by_variable = {variable: key for key, variable in ENV_VAR_MAP.items()}
    path = data_dir / "config.yaml"
    existing: dict[str, Any] = {}
    if path.exists():
        existing = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for variable, value in overrides.items():
        if variable in by_variable:
            existing[by_variable[variable]] = value
    path.write_text(yaml.safe_dump(existing, sort_keys=True), encoding="utf-8")


def _score(item: dict[str, Any]) -> float:
    try:
        return float(item.get("score") or 0.0)
    except (TypeError, ValueError):
        return 0.0


def break_ties(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mnemosyne's order, except that each run of adjacent equal scores is ordered by memory id.

    Only adjacent ties are reordered, so results Mnemosyne placed deliberately (associative
    neighbours appended after the top k) keep their place.
    """
    ordered: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for item in found:
        if run and _score(item) != _score(run[-1]):
            ordered.extend(sorted(run, key=lambda entry: str(entry.get("id"))))
            run = []
        run.append(item)
    ordered.extend(sorted(run, key=lambda entry: str(entry.get("id"))))
    return ordered


HERMES = {
    "top_k": 16,
    "temporal_weight": 0.2,
    "temporal_halflife": 48,
    "min_score": 0.20,
    "min_importance": 0.65,
    "kept": 5,
}
"""The Hermes plugin's per-turn prefetch (mirrors ``engines/mnemosyne.py``; this file imports nothing
of mnemo-ops so that another interpreter can run it)."""


PLAIN_OPTIONS = (
    "temporal_weight",
    "temporal_halflife",
    "vec_weight",
    "fts_weight",
    "importance_weight",
    "source",
    "topic",
    "from_date",
    "to_date",
)
"""The recall options plain ``BeamMemory.recall`` takes (``recall_enhanced`` takes more)."""


@contextlib.contextmanager
def cross_session_recall(enabled: bool):
    """Within the block, Mnemosyne's recall spans every session (when `enabled`).

    Mnemosyne reads its cross-session switch per call through ``resolve_beam_runtime`` (config.yaml
    over the environment), and ``recall_enhanced`` passes it down itself, so the switch is changed
    where it is read, for this worker process only.
    """
    if not enabled:
        yield
        return
    import dataclasses

    from mnemosyne.core import beam

    original = beam.resolve_beam_runtime

    def spanning(*args, **kwargs):
        return dataclasses.replace(original(*args, **kwargs), cross_session=True)

    beam.resolve_beam_runtime = spanning
    try:
        yield
    finally:
        beam.resolve_beam_runtime = original


def hermes_prefetch(memory: Any, text: str) -> list[dict[str, Any]]:
    """What the Hermes plugin injects for `text`: plain beam recall, the low-relevance cut, the first 5."""
    found = memory.beam.recall(
        text,
        top_k=HERMES["top_k"],
        temporal_weight=HERMES["temporal_weight"],
        temporal_halflife=HERMES["temporal_halflife"],
    )
    kept = []
    for item in break_ties(found or []):
        importance = float(item.get("importance") or 0.0)
        if _score(item) < HERMES["min_score"] and importance < HERMES["min_importance"]:
            continue
        kept.append(item)
    return kept[: HERMES["kept"]]


def recall(request: dict[str, Any]) -> dict[str, Any]:
    """Recall every query; ranks are Mnemosyne's, with equal scores ordered by memory id."""
    db_path = Path(request["db_path"])
    apply_config_overrides(db_path.parent, request.get("config_overrides") or {})
    from mnemosyne.core.memory import Mnemosyne

    instances: dict[str, Any] = {}
    options = dict(request.get("recall_options") or {})
    enhanced = os.environ.get("MNEMOSYNE_ENHANCED_RECALL", "0") == "1"
    results = []
    for number, query in enumerate(request["queries"], start=1):
        # A query with a session is recalled in that session, with the user's cross-session setting;
        # one without a session has none to be scoped to, so it is recalled across all of them
        # (unless the eval's config turned cross-session recall off).
        session = query.get("session") or "mnemo-ops-eval"
        sessionless_cross = request.get("sessionless_cross_session", True)
        across = not query.get("session") and sessionless_cross
        if session not in instances:
            instances[session] = Mnemosyne(session_id=session, db_path=db_path)
        memory = instances[session]
        with cross_session_recall(across):
            if request.get("profile") == "hermes":
                found = hermes_prefetch(memory, query["text"])
            elif enhanced:
                found = memory.beam.recall_enhanced(
                    query["text"],
                    top_k=query["k"],
                    use_associative=bool(request.get("use_associative")),
                    **options,
                )
            else:
                plain = {key: value for key, value in options.items() if key in PLAIN_OPTIONS}
                found = memory.beam.recall(query["text"], top_k=query["k"], **plain)
        results.append(
            [
                {
                    "id": item.get("id"),
                    "content": item.get("content"),
                    "score": _score(item),
                    "tier": item.get("tier"),
                }
                for item in break_ties(found or [])
                if item.get("id") is not None
            ]
        )
        if number % 25 == 0 or number == len(request["queries"]):
            send_progress(25 if number % 25 == 0 else number % 25)
    return {"results": results}


def store(request: dict[str, Any]) -> dict[str, Any]:
    """Store benchmark turns through ``Mnemosyne.remember``; return the memory id of each turn (or None)."""
    from mnemosyne.core.memory import Mnemosyne

    db_path = Path(request["db_path"])
    ids: dict[str, str | None] = {}
    for session in request["sessions"]:
        memory = Mnemosyne(session_id=session["session_id"], db_path=db_path)
        for turn in session["turns"]:
            ids[turn["key"]] = memory.remember(
                turn["content"],
                source=turn.get("source", "import"),
                importance=0.5,
                metadata=turn.get("metadata") or {},
                veracity="imported",
            )
        send_progress(len(session["turns"]))
    import sqlite3

    connection = sqlite3.connect(db_path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return {"ids": ids}


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Run the request's mode; the result says which Mnemosyne version did the work."""
    handlers = {"recall": recall, "store": store}
    result = handlers[request["mode"]](request)
    version = _imported_mnemosyne_version()
    if version:
        result.setdefault("mnemosyne_version", version)
    return result


def _imported_mnemosyne_version() -> str | None:
    """The version of the ``mnemosyne`` package this process imported (the one that recalled)."""
    module = sys.modules.get("mnemosyne")
    return getattr(module, "__version__", None) if module is not None else None


if __name__ == "__main__":
    child_main(handle)
