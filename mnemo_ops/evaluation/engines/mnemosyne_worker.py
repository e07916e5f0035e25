"""Child process for work done through Mnemosyne's own API (recall for the eval, benchmark imports).

Run by ``engines/mnemosyne.run_worker`` through ``foundation.child_process`` with
``MNEMOSYNE_DATA_DIR``/``HERMES_HOME`` already pointed at a temp dir. The request's ``mode`` is
``recall`` or ``store``; progress messages carry a count done, the result the answers and the
``mnemosyne_version`` that produced them. Anything Mnemosyne prints goes to stderr.

Profiles (``request["profile"]``): ``plain`` (Mnemosyne's recall with top k), ``hermes`` (what the
Hermes plugin injects each turn: its own ``MnemosyneMemoryProvider.prefetch`` when
``mnemosyne_hermes`` is importable here, else the documented approximation, and the result says
which: ``profile_used`` is ``hermes`` or ``hermes-approximate``) and ``hermes-approximate`` (the
approximation even where the plugin is installed, to compare the two).

The agent's cost: with ``request["cost_sample"]`` > 0, the first that many queries are also
measured in units that do not depend on machine load: SQLite virtual-machine steps on every
connection this process opens (a progress handler on each, installed before Mnemosyne is
imported) and Python function calls (a profile hook), plus CPU and wall time as side figures.

It also runs under other interpreters (``eval run --python``: an upgrade candidate's venv, without
mnemo-ops), as a standalone copy run by path: import only the standard library, PyYAML and
``mnemosyne`` here (the dependencies of mnemosyne-memory itself) and
``mnemo_ops.foundation.child_process`` (a stand-in of it is copied beside this file), and keep to
Python 3.10 syntax (what Mnemosyne needs).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import time
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


STEP_GRANULARITY = 100
"""The progress handler runs every this many SQLite VM instructions; steps are counted in these."""


class CostMeter:
    """Counts what recall costs: SQLite VM steps on every connection, Python calls, CPU, wall."""

    def __init__(self) -> None:
        self.steps = 0
        self.calls = 0
        self.active = False

    def _tick(self) -> int:
        if self.active:
            self.steps += STEP_GRANULARITY
        return 0  # 0: go on (a non-zero value would interrupt the statement)

    def install(self) -> None:
        """Count on every sqlite3 connection opened from now on (Mnemosyne's and the plugin's)."""
        connect = sqlite3.connect
        meter = self

        def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = connect(*args, **kwargs)
            connection.set_progress_handler(meter._tick, STEP_GRANULARITY)
            return connection

        sqlite3.connect = counted  # type: ignore[assignment]

    def _profile(self, frame: Any, event: str, argument: Any) -> None:
        if event in ("call", "c_call"):
            self.calls += 1

    @contextlib.contextmanager
    def measuring(self, figures: dict[str, Any]):
        """Count the block's cost into `figures` (steps, python_calls, cpu_ms, wall_ms)."""
        steps, calls = self.steps, self.calls
        cpu, wall = time.process_time(), time.perf_counter()
        self.active = True
        sys.setprofile(self._profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            self.active = False
            figures["sqlite_steps"] = self.steps - steps
            figures["python_calls"] = self.calls - calls
            figures["cpu_ms"] = round((time.process_time() - cpu) * 1000, 3)
            figures["wall_ms"] = round((time.perf_counter() - wall) * 1000, 3)


def plugin_version() -> str | None:
    """The installed mnemosyne-hermes version, when its package can be imported here."""
    try:
        from importlib.metadata import version

        import mnemosyne_hermes  # noqa: F401
    except Exception:  # not installed, or broken: the approximation is used instead
        return None
    try:
        return version("mnemosyne-hermes")
    except Exception:
        return "unknown"


HERMES_SESSION_PREFIX = "hermes_"
"""How the plugin names the sessions it writes and recalls in: ``hermes_<session key>``."""
NEW_CONVERSATION_KEY = "mnemo-ops-new-conversation"
"""A session key nobody writes: a new conversation, which sees only global rows and facts."""


def latest_agent_session(db_path: Path) -> str | None:
    """The key of the newest session the plugin wrote (``hermes_<key>``), if any."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        row = connection.execute(
            "SELECT session_id FROM working_memory WHERE session_id LIKE 'hermes\\_%' ESCAPE '\\' "
            "ORDER BY timestamp DESC LIMIT 1"
        ).fetchone()
    finally:
        connection.close()
    return row[0][len(HERMES_SESSION_PREFIX) :] if row else None


class PluginPrefetch:
    """The Hermes plugin's own per-turn prefetch, with what it injected mapped back to rows.

    ``prefetch`` returns the text the agent is given; the rows behind it are what the plugin's
    ``_semantic_dedup_prefetch`` kept, cut to its ``_PREFETCH_TOP_K`` (the last two steps of its
    prefetch), recorded by wrapping that function: the plugin's code decides everything.
    A canonical fact's line maps to the working row its lineage came from (``auto:<id>``), else to
    the fact itself (``canonical:<owner>/<category>/<name>``).
    """

    def __init__(self, db_path: Path, hermes_home: Path) -> None:
        import mnemosyne_hermes as plugin

        self.plugin = plugin
        self.db_path = db_path
        self.hermes_home = hermes_home
        self.providers: dict[str, Any] = {}
        self.kept: list[list[dict[str, Any]]] = []
        original = plugin._semantic_dedup_prefetch

        def recording(rows: list[dict[str, Any]], *args: Any, **kwargs: Any):
            kept = original(rows, *args, **kwargs)
            self.kept.append(list(kept))
            return kept

        plugin._semantic_dedup_prefetch = recording
        self.fallback_key = latest_agent_session(db_path) or NEW_CONVERSATION_KEY

    def key_for(self, session: str | None) -> str:
        """The Hermes session key a query in `session` (as the database names it) is asked in."""
        if session and session.startswith(HERMES_SESSION_PREFIX):
            return session[len(HERMES_SESSION_PREFIX) :]
        if session == "":
            return NEW_CONVERSATION_KEY
        # A row of another session (an import, the bridge) reaches the agent only in its own
        # conversations: the latest one stands for them.
        return self.fallback_key

    def provider(self, key: str) -> Any:
        """One provider per session key, initialised as Hermes initialises it."""
        if key not in self.providers:
            provider = self.plugin.MnemosyneMemoryProvider()
            provider.initialize(key, hermes_home=str(self.hermes_home))
            self.providers[key] = provider
        return self.providers[key]

    def prefetch(self, text: str, session: str | None) -> tuple[str, list[dict[str, Any]]]:
        """(the injected text, the injected rows) for `text` asked in `session`."""
        key = self.key_for(session)
        provider = self.provider(key)
        self.kept.clear()
        injected_text = provider.prefetch(text, session_id=key) or ""
        rows = self.kept[-1][: self.plugin._PREFETCH_TOP_K] if injected_text and self.kept else []
        return injected_text, [self._item(row) for row in rows]

    def _item(self, row: dict[str, Any]) -> dict[str, Any]:
        if row.get("trust_tier") != "CANONICAL":
            return {"id": row.get("id"), "content": row.get("content"), "canonical": False}
        slot = (
            row.get("canonical_owner"),
            row.get("canonical_category"),
            row.get("canonical_name"),
        )
        lineage = self._lineage(*slot)
        return {
            "id": lineage or "canonical:{}/{}/{}".format(*slot),
            "content": row.get("content"),
            "canonical": True,
            "lineage": lineage,
        }

    def _lineage(self, owner: Any, category: Any, name: Any) -> str | None:
        connection = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            row = connection.execute(
                "SELECT source FROM canonical_facts WHERE owner_id = ? AND category = ? "
                "AND name = ? AND valid_until IS NULL",
                (owner, category, name),
            ).fetchone()
        finally:
            connection.close()
        source = str(row[0]) if row and row[0] else ""
        return source[len("auto:") :] if source.startswith("auto:") else None


def injected_text_of(found: list[dict[str, Any]]) -> str:
    """The approximation's injected text: a heading and one line per row, formatted as the plugin
    formats its lines (time, importance, a source other than conversation, the content)."""
    lines = ["## Mnemosyne Context"]
    for item in found:
        content = " ".join(str(item.get("content") or "").split())
        source = str(item.get("source") or "").strip()
        tag = f", source {source}" if source and source != "conversation" else ""
        importance = float(item.get("importance") or 0.0)
        moment = str(item.get("timestamp") or "")[:16]
        lines.append(f"  [{moment}] (importance {importance:.2f}{tag}) {content}")
    return "\n".join(lines) if found else ""


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
    }


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
