"""The Hermes plugin's per-turn prefetch as Hermes calls it, and the documented approximation of it.

Part of the Mnemosyne worker's child process (``worker.py``, which says why it is a child): the
plugin (``mnemosyne_hermes``) and Mnemosyne are imported there, under the environment the parent
chose (``MNEMOSYNE_DATA_DIR`` and ``HERMES_HOME`` in a temporary folder beside a snapshot copy), and
their functions are wrapped there to record what the prefetch kept, never in the job's own process.

- `PluginPrefetch`: the plugin's own ``MnemosyneMemoryProvider.prefetch``, one provider per Hermes
  session key (`latest_agent_session`, `NEW_CONVERSATION_KEY`), the injected rows recorded;
  `plugin_version` says whether the plugin can be imported here.
- `hermes_prefetch` and `injected_text_of`: the documented approximation (`HERMES`) where the plugin
  is not installed, ordered by `break_ties` (Mnemosyne's order, equal scores by memory id), which
  plain recall uses too.
- `cross_session_recall`: Mnemosyne's cross-session switch turned on for this process only.
- `CostMeter`: what a turn's recall costs the agent (SQLite steps, Python calls, CPU, wall).

Also run standalone under another interpreter (``worker.py``): the standard library only, Mnemosyne
and the plugin imported inside functions, Python 3.10 syntax.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any


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
