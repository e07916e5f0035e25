"""The worker's ``recall`` and ``store`` modes: Mnemosyne's own recall and remember, on a copy.

Part of the Mnemosyne worker's child process (``worker.py``, which says why it is a child): the
parent pointed ``MNEMOSYNE_DATA_DIR``/``HERMES_HOME`` at a temporary folder holding the snapshot
before this process imports Mnemosyne. `apply_config_overrides` writes the eval's options into that
copy's ``config.yaml`` (Mnemosyne ranks it above the environment); `recall` asks every query in the
requested profile (plain recall, the plugin's prefetch or its approximation: ``plugin_prefetch``)
and `dense_voice` says whether that recall had its vector voice; `store` writes benchmark turns
through ``Mnemosyne.remember``.

Also run standalone under another interpreter (``worker.py``): the standard library, PyYAML,
Mnemosyne (inside functions), ``child_process`` and the worker's sibling modules only, Python 3.10
syntax.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import send_progress
from mnemo_ops.mnemosyne.plugin_prefetch import (
    CostMeter,
    PluginPrefetch,
    break_ties,
    cross_session_recall,
    hermes_prefetch,
    injected_text_of,
    plugin_version,
)


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


def recall(request: dict[str, Any]) -> dict[str, Any]:
    """Recall every query; ranks are Mnemosyne's, with equal scores ordered by memory id.

    The result holds ``results`` (each query's items: id and content, in order), ``turns`` (per
    query: lines and characters injected, canonical lines, and the cost figures when measured) and
    ``profile_used``.
    """
    meter = CostMeter()
    sample = int(request.get("cost_sample") or 0)
    if sample:
        meter.install()  # before Mnemosyne opens its first connection
    db_path = Path(request["db_path"])
    apply_config_overrides(db_path.parent, request.get("config_overrides") or {})
    from mnemosyne.core.memory import Mnemosyne

    profile = request.get("profile") or "plain"
    plugin = None
    if profile == "hermes" and plugin_version():
        plugin = PluginPrefetch(db_path, Path(os.environ["HERMES_HOME"]))
    used = "hermes" if plugin else ("plain" if profile == "plain" else "hermes-approximate")
    instances: dict[str, Any] = {}
    options = dict(request.get("recall_options") or {})
    enhanced = os.environ.get("MNEMOSYNE_ENHANCED_RECALL", "0") == "1"
    results, turns = [], []
    for number, query in enumerate(request["queries"], start=1):
        figures: dict[str, Any] = {}
        measured = meter.measuring(figures) if number <= sample else contextlib.nullcontext()
        if plugin is not None:
            with measured:
                text, items = plugin.prefetch(query["text"], query.get("session"))
        else:
            # A query with a session is recalled in that session, with the user's cross-session
            # setting; one without a session has none to be scoped to, so it is recalled across all
            # of them (unless the eval's config turned cross-session recall off).
            session = query.get("session") or "mnemo-ops-eval"
            across = not query.get("session") and request.get("sessionless_cross_session", True)
            if session not in instances:
                instances[session] = Mnemosyne(session_id=session, db_path=db_path)
            memory = instances[session]
            with measured, cross_session_recall(across):
                if used == "hermes-approximate":
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
            found = [item for item in break_ties(found or []) if item.get("id") is not None]
            items = [
                {"id": item.get("id"), "content": item.get("content"), "canonical": False}
                for item in found
            ]
            text = injected_text_of(found) if used != "plain" else ""
        results.append([{"id": item["id"], "content": item["content"]} for item in items])
        turn: dict[str, Any] = {
            "lines": len(items),
            "chars": len(text),
            "canonical": sum(1 for item in items if item.get("canonical")),
        }
        if figures:
            turn["cost"] = figures
        turns.append(turn)
        if number % 25 == 0 or number == len(request["queries"]):
            send_progress(25 if number % 25 == 0 else number % 25)
    return {
        "results": results,
        "turns": turns,
        "profile_used": used,
        "plugin_version": plugin_version() if plugin is not None else None,
        "dense": dense_voice(db_path, [query["text"] for query in request["queries"]]),
    }


def dense_voice(db_path: Path, texts: list[str]) -> dict[str, Any]:
    """Whether the recall just made had its vector voice, as Mnemosyne decides it.

    Mnemosyne falls back to keyword recall without a word when its model fails (``embed_query``
    returns None), so the fallback is looked for here: the model's availability, sqlite-vec on
    Mnemosyne's connection, and how many of the queries got a query vector (Mnemosyne caches each
    query's vector, so asking again costs no second model call for the texts it embedded).
    """
    status: dict[str, Any] = {
        "model": None,
        "available": False,
        "sqlite_vec": False,
        "queries": len(texts),
        "embedded": 0,
        "error": None,
    }
    try:
        from mnemosyne.core import beam, embeddings

        status["model"] = str(getattr(embeddings, "_DEFAULT_MODEL", "") or "")
        status["available"] = bool(embeddings.available())
        status["sqlite_vec"] = _vec_loaded(beam._get_connection(db_path))
        if status["available"]:
            status["embedded"] = sum(
                1 for text in texts if text and embeddings.embed_query(text) is not None
            )
    except Exception as error:  # a model that raises on load: reported, never a crash of the eval
        status["error"] = f"{type(error).__name__}: {error}"
    return status


def _vec_loaded(connection: Any) -> bool:
    """True when sqlite-vec answers on Mnemosyne's connection (whichever code opened it)."""
    try:
        connection.execute("SELECT vec_version()").fetchone()
        return True
    except Exception:
        return False


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
