"""Child process for work done through Mnemosyne's own API (recall for the eval, benchmark imports).

Run by ``engines/mnemosyne.run_worker`` through ``foundation.child_process`` with
``MNEMOSYNE_DATA_DIR``/``HERMES_HOME`` already pointed at a temp dir. The request's ``mode`` is
``recall``, ``store`` or ``explain`` (why each query's expected memories were or were not
injected: `explain`); progress messages carry a count done, the result the answers and the
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


def unused_session_key(db_path: Path, base: str = NEW_CONVERSATION_KEY) -> str:
    """A session key no row of the database has, as itself or as the plugin's ``hermes_<key>``:
    `base`, else `base` with the first free number after it (a brand-new conversation)."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        candidate, number = base, 1
        while any(
            connection.execute(
                f"SELECT 1 FROM {table} WHERE session_id IN (?, ?) LIMIT 1",
                (candidate, HERMES_SESSION_PREFIX + candidate),
            ).fetchone()
            for table in ("working_memory", "episodic_memory")
            if table in tables
        ):
            number += 1
            candidate = f"{base}-{number}"
        return candidate
    finally:
        connection.close()


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
        self.new_key = unused_session_key(db_path)
        self.fallback_key = latest_agent_session(db_path) or self.new_key

    def key_for(self, session: str | None, new: bool = False) -> str:
        """The Hermes session key a query in `session` (as the database names it) is asked in;
        `new`: a brand-new conversation (a key no row has)."""
        if new:
            return self.new_key
        if session and session.startswith(HERMES_SESSION_PREFIX):
            return session[len(HERMES_SESSION_PREFIX) :]
        if session == "":
            return self.new_key
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

    def prefetch(
        self, text: str, session: str | None, new: bool = False
    ) -> tuple[str, list[dict[str, Any]]]:
        """(the injected text, the injected rows) for `text` asked in `session` (`new`: in a
        brand-new conversation)."""
        key = self.key_for(session, new)
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
    new_session = None
    for number, query in enumerate(request["queries"], start=1):
        figures: dict[str, Any] = {}
        measured = meter.measuring(figures) if number <= sample else contextlib.nullcontext()
        if plugin is not None:
            with measured:
                text, items = plugin.prefetch(
                    query["text"], query.get("session"), bool(query.get("new"))
                )
        else:
            # A query with a session is recalled in that session, with the user's cross-session
            # setting; one without a session has none to be scoped to, so it is recalled across all
            # of them (unless the eval's config turned cross-session recall off). A query asked in a
            # new conversation is recalled in a session no row has, with the user's setting.
            if query.get("new"):
                if new_session is None:
                    new_session = unused_session_key(db_path)
                session, across = new_session, False
            else:
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


EXPLAIN_DEPTH = 50
"""How deep an expected memory the prefetch did not recall is looked for: ``beam.recall(top_k=50)``."""
PLUGIN_RECALL = {"top_k": 16, "temporal_weight": 0.2, "temporal_halflife": 48}
"""The recall call the plugin 0.7.6 makes each turn; another call is reported (``plugin-recall-changed``)."""
RAW_SIGNAL, DISTILLED_SIGNAL = 0.18, 0.08
"""The plugin's topical-signal floors for raw (``conversation``, ``[USER]``) and distilled rows: literals
inside its ``prefetch``, so restated here; the reproduction check catches a change."""


def _recall_with(beam_recall: Any, arguments: dict[str, Any], **changes: Any) -> tuple[list, dict]:
    """(rows, explain trace) of ``beam.recall(**arguments, **changes)``, leaving no recall counts
    where Mnemosyne allows it (4.0's ``_track_recall``): the explanation should not change the copy."""
    import inspect

    call = {**arguments, **changes}
    try:
        accepted = inspect.signature(beam_recall).parameters
    except (TypeError, ValueError):
        accepted = {}
    if "_track_recall" in accepted:
        call["_track_recall"] = False
    reply = beam_recall(**call)
    if isinstance(reply, dict):  # explain=True: {"results": [...], "explain": {...}}
        return list(reply.get("results") or []), dict(reply.get("explain") or {})
    return list(reply or []), {}


def score_parts_of(row: dict[str, Any], trace: dict[str, Any] | None = None) -> dict[str, Any]:
    """A candidate's score parts: Mnemosyne's explain trace for it where the trace names it (it names
    only the rows it kept), else the same fields of the row itself."""
    for candidate in (trace or {}).get("candidates") or []:
        if candidate.get("id") is not None and candidate.get("id") == row.get("id"):
            return {
                **dict(candidate.get("scores") or {}),
                "source_path": candidate.get("source_path"),
                "from": "explain",
            }
    parts: dict[str, Any] = {
        "keyword": row.get("keyword_score", 0.0),
        "fts": row.get("fts_score", 0.0),
        "dense": row.get("dense_score", 0.0),
        "importance": row.get("importance", 0.0),
        "recency_decay": row.get("recency_decay", 0.0),
        "final": row.get("score", 0.0),
        "from": "row",
    }
    if isinstance(row.get("voice_scores"), dict):
        parts["voices"] = dict(row["voice_scores"])
    return parts


class RecallRecorder:
    """Records each ``beam.recall`` call made on a watched beam (its arguments and its rows)."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        self.originals: dict[int, Any] = {}

    def watch(self, beam: Any) -> Any:
        """Record `beam`'s recalls from now on; return its own (unrecorded) ``recall``."""
        if beam is None:
            return None
        if id(beam) not in self.originals:
            original = beam.recall
            self.originals[id(beam)] = original

            def recording(*args: Any, **kwargs: Any) -> Any:
                rows = original(*args, **kwargs)
                arguments = dict(kwargs)
                if args:
                    arguments["query"] = args[0]
                self.calls.append((arguments, list(rows) if isinstance(rows, list) else []))
                return rows

            beam.recall = recording
        return self.originals[id(beam)]


def _matches(target: dict[str, Any], item_id: Any, row: dict[str, Any]) -> bool:
    if target["kind"] == "id":
        return str(target["value"]) in (str(item_id), str(row.get("id")))
    return str(target["value"]).casefold() in str(row.get("content") or "").casefold()


OUTCOME_ORDER = ("injected", "ranked-out", "filtered")
"""Best first: the candidate that came closest decides a target's outcome."""


def target_outcome(
    target: dict[str, Any], candidates: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The outcome of the best candidate matching `target` (None: no candidate matches)."""
    matching = [
        candidate for candidate in candidates if _matches(target, candidate["id"], candidate["row"])
    ]
    if not matching:
        return None
    best = min(
        matching,
        key=lambda c: (
            OUTCOME_ORDER.index(c["outcome"]),
            c.get("line") or 0,
            c.get("rank") or 0,
            c.get("recall_rank") or 0,
        ),
    )
    return {
        "target": target["value"],
        "kind": target["kind"],
        "outcome": best["outcome"],
        "reason": best["reason"],
        "candidate": best["id"],
        "line": best.get("line"),
        "rank": best.get("rank"),
        "recall_rank": best.get("recall_rank"),
        "detail": best["detail"],
        "scores": best.get("scores"),
    }


def _resolve_targets(db_path: Path, targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``auto`` targets (``why --expect``) become ids when a row has that id, else texts."""
    resolved = []
    for target in targets:
        kind = target.get("kind") or "auto"
        if kind == "auto":
            kind = "id" if _memory_rows(db_path, "id = ?", str(target["value"])) else "text"
        resolved.append({"kind": kind, "value": str(target["value"])})
    return resolved


def _memory_rows(
    db_path: Path, condition: str, value: str, limit: int = 200
) -> list[dict[str, Any]]:
    """Working and episodic rows matching `condition` (one ``?``), read-only on the copy."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    rows: list[dict[str, Any]] = []
    try:
        for table in ("working_memory", "episodic_memory"):
            try:
                found = connection.execute(
                    f"SELECT id, session_id, scope, valid_until, superseded_by FROM {table} "
                    f"WHERE {condition} LIMIT {int(limit)}",
                    (value,),
                ).fetchall()
            except sqlite3.Error:  # a table or column this line lacks: nothing to say about it
                continue
            rows += [{"table": table, **dict(row)} for row in found]
    finally:
        connection.close()
    return rows


def missing_hint(db_path: Path, target: dict[str, Any], recalled_in: str | None) -> str:
    """Why recall may not reach `target` at all: closed rows, other sessions, no such memory."""
    if target["kind"] == "id":
        rows = _memory_rows(db_path, "id = ?", target["value"])
        if not rows:
            return "no memory has this id"
    else:
        rows = _memory_rows(db_path, "instr(lower(content), lower(?)) > 0", target["value"])
        if not rows:
            return "no memory contains this text"
    closed = [row for row in rows if row.get("valid_until") or row.get("superseded_by")]
    live = [row for row in rows if row not in closed]
    elsewhere = [
        row
        for row in live
        if recalled_in and row.get("scope") != "global" and row.get("session_id") != recalled_in
    ]
    here = [row for row in live if row not in elsewhere]
    parts = []
    if closed:
        first = closed[0]
        stamp = f"valid_until {first['valid_until']}" if first.get("valid_until") else ""
        if first.get("superseded_by"):
            stamp = f"{stamp}, superseded by {first['superseded_by']}".strip(", ")
        parts.append(f"{len(closed)} closed ({first['id']}: {stamp})")
    if elsewhere:
        sessions = ", ".join(sorted({str(row.get("session_id")) for row in elsewhere})[:3])
        parts.append(
            f"{len(elsewhere)} live in another session ({sessions}); this recall ran in "
            f"{recalled_in} and sees only its own and global rows unless cross-session recall is on"
        )
    if here:
        parts.append(
            f"live and in this recall's scope ({here[0]['id']}): Mnemosyne's recall leaves it out"
            if len(here) == 1
            else f"{len(here)} live and in this recall's scope ({here[0]['id']}, ...): "
            "Mnemosyne's recall leaves them out"
        )
    return "; ".join(parts)


def _deep_outcome(
    target: dict[str, Any], deep_rows: list[dict[str, Any]], plugin_top_k: int
) -> dict[str, Any] | None:
    for rank, row in enumerate(deep_rows, start=1):
        if _matches(target, row.get("id"), row):
            return {
                "target": target["value"],
                "kind": target["kind"],
                "outcome": "not-retrieved",
                "reason": "below-top-16",
                "candidate": row.get("id"),
                "deep_rank": rank,
                "detail": (
                    f"recalled at rank {rank} of a top-{EXPLAIN_DEPTH} recall, not among the "
                    f"{plugin_top_k} the prefetch asks for"
                    if rank > plugin_top_k
                    # Mnemosyne's candidate pools grow with top_k, so a deeper recall may rank
                    # a row higher than the prefetch's own recall did.
                    else f"not among the prefetch's {plugin_top_k}, though a top-{EXPLAIN_DEPTH} "
                    f"recall ranks it {rank} (larger candidate pools)"
                ),
                "scores": score_parts_of(row),
            }
    return None


class PrefetchExplainer:
    """Each candidate's fate in the Hermes plugin's prefetch, decided by the plugin's own functions.

    The plugin's ``prefetch`` runs as the engine runs it (``PluginPrefetch``); its recall call (the
    rows and the arguments) and its canonical rows are recorded as it runs, and the decision is
    reproduced on exactly those: each filter in the plugin's order, its sort key, its dedup, its
    top 5. The reproduction's injected rows are checked against what ``prefetch`` injected; a
    difference is an ``explain-mismatch`` note (the explanation is then not to be trusted).
    """

    approximate = False

    def __init__(self, db_path: Path, hermes_home: Path) -> None:
        import mnemosyne_hermes as plugin

        self.module = plugin
        self.dedup = plugin._semantic_dedup_prefetch  # the plugin's own, before anyone wraps it
        self.prefetcher = PluginPrefetch(db_path, hermes_home)
        self.db_path = db_path
        self.recorder = RecallRecorder()
        self.canonical: list[list[dict[str, Any]]] = []
        original = plugin._canonical_prefetch_rows

        def recording(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
            rows = original(*args, **kwargs)
            self.canonical.append(list(rows))
            return rows

        plugin._canonical_prefetch_rows = recording

    def filter_rule(self, query: str, row: dict[str, Any]) -> tuple[str | None, str]:
        """The first of the prefetch's filters that drops `row` (None: it passes) and why."""
        plugin = self.module
        content = row.get("content", "")
        if plugin._is_low_quality_prefetch(content):
            return "low-quality", "too short to inject (one short word or a stopword)"
        if plugin._prefetch_source_quality(row) <= 0:
            prefixes = " or ".join(getattr(plugin, "_PREFETCH_EXCLUDED_PREFIXES", ()))
            return "source-quality", f"source quality 0: the plugin never injects {prefixes} lines"
        if not plugin._prefetch_has_distinctive_lexical_evidence(query, content):
            return "lexical-evidence", self._lexical_detail(query, content)
        if not plugin._prefetch_is_polyphonic(row):
            signal = plugin._prefetch_topic_signal(row)
            raw = plugin._prefetch_is_raw(row)
            required = RAW_SIGNAL if raw else DISTILLED_SIGNAL
            if signal < required:
                kind = "raw conversation" if raw else "distilled"
                return "topical-signal", (
                    f"topical signal {signal:.3f} below {required} for a {kind} row "
                    "(the best of its keyword, FTS and dense scores)"
                )
            score = float(row.get("score") or 0.0)
            importance = float(row.get("importance") or 0.0)
            if score < 0.20 and importance < 0.65:
                return "score-and-importance", (
                    f"score {score:.3f} below 0.20 and importance {importance:.2f} below 0.65"
                )
        return None, ""

    def _lexical_detail(self, query: str, content: str) -> str:
        plugin = self.module
        try:
            generic = plugin._PREFETCH_LEXICAL_GENERIC_TOKENS
            asked = plugin._prefetch_tokens(query) - generic
            shared = asked & plugin._prefetch_tokens(content)
            needed = plugin._prefetch_min_distinctive_tokens()
            coverage = plugin._prefetch_min_query_coverage()
        except Exception:  # a plugin without these helpers: the rule's name is still right
            return "too few of the query's topical words"
        words = ", ".join(sorted(shared)) or "none"
        return (
            f"shares {len(shared)} of the query's {len(asked)} topical words ({words}); the "
            f"plugin needs {needed} and {coverage:.0%} of them"
        )

    def decide(
        self, query: str, results: list[dict[str, Any]], canonical: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Every candidate with its outcome, in the plugin's steps (filters, canonical rows
        appended, the sort, the dedup, the top 5)."""
        plugin = self.module
        candidates: list[dict[str, Any]] = []
        passing: list[dict[str, Any]] = []
        for rank, row in enumerate(results, start=1):
            rule, detail = self.filter_rule(query, row)
            candidate = {"row": row, "origin": "recall", "recall_rank": rank}
            if rule:
                candidate.update(outcome="filtered", reason=rule, detail=detail)
            else:
                passing.append(candidate)
            candidates.append(candidate)
        for row in canonical:
            candidate = {"row": row, "origin": "canonical", "recall_rank": None}
            passing.append(candidate)
            candidates.append(candidate)
        # The plugin sorts the same list in the same order (list.sort is stable).
        ordered = sorted(
            passing, key=lambda c: plugin._prefetch_adjusted_score(c["row"]), reverse=True
        )
        kept = self.dedup([candidate["row"] for candidate in ordered])
        kept_index = {id(row): index for index, row in enumerate(kept)}
        top_k = plugin._PREFETCH_TOP_K
        for rank, candidate in enumerate(ordered, start=1):
            candidate["rank"] = rank
            candidate["adjusted_score"] = round(
                plugin._prefetch_adjusted_score(candidate["row"]), 4
            )
            index = kept_index.get(id(candidate["row"]))
            if index is not None and index < top_k:
                candidate.update(outcome="injected", line=index + 1, reason="injected", detail="")
            elif index is not None:
                candidate.update(
                    outcome="ranked-out",
                    reason="ranked-out",
                    detail=(
                        f"passed every filter; rank {rank} by the plugin's sort (score "
                        f"{candidate['adjusted_score']:.3f}), {index + 1}th after the dedup, "
                        f"past the top {top_k}"
                    ),
                )
            else:
                candidate.update(outcome="ranked-out", reason="near-duplicate")
                candidate["detail"] = self._duplicate_detail(candidate, ordered, kept, top_k)
        for candidate in candidates:
            candidate["id"] = self.prefetcher._item(candidate["row"])["id"]
        return candidates

    def _duplicate_detail(
        self,
        candidate: dict[str, Any],
        ordered: list[dict[str, Any]],
        kept: list[dict[str, Any]],
        top_k: int,
    ) -> str:
        row = candidate["row"]
        if not self.dedup([row]):
            return (
                "passed every filter; the dedup drops it: no content word of three letters or more"
            )
        earlier = {id(c["row"]) for c in ordered[: candidate["rank"] - 1]}
        for index, other in enumerate(kept):
            if id(other) in earlier and len(self.dedup([other, row])) == 1:
                where = f"line {index + 1}" if index < top_k else f"{index + 1}th kept row"
                return (
                    f"passed every filter; rank {candidate['rank']} by the plugin's sort, dropped "
                    f"by the dedup as a near-duplicate of {where} ({other.get('id') or 'canonical'})"
                )
        return f"passed every filter; rank {candidate['rank']}, dropped by the dedup"

    def explain(self, query: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """One query explained (see `explain`)."""
        new = bool(query.get("new"))
        key = self.prefetcher.key_for(query.get("session"), new)
        provider = self.prefetcher.provider(key)
        recall = self.recorder.watch(provider._beam)
        self.recorder.calls.clear()
        self.canonical.clear()
        text, injected = self.prefetcher.prefetch(query["text"], query.get("session"), new)
        notes: list[dict[str, str]] = []
        explained: dict[str, Any] = {
            "session_key": key,
            "recalled_in": f"{HERMES_SESSION_PREFIX}{key}",
            "injected_chars": len(text),
            "injected": injected,
        }
        if not self.recorder.calls:
            notes.append(
                {
                    "code": "no-recall",
                    "message": "the plugin's prefetch made no recall (an empty query once its "
                    "speaker stamps are removed, or no database)",
                }
            )
            explained.update(
                candidates=[],
                notes=notes,
                recall_query=query["text"],
                targets=explain_targets(
                    self.db_path,
                    query.get("targets") or [],
                    [],
                    lambda: ([], {}),
                    PLUGIN_RECALL["top_k"],
                    explained["recalled_in"],
                ),
            )
            return explained
        arguments, results = self.recorder.calls[-1]
        asked = {name: arguments.get(name) for name in PLUGIN_RECALL}
        if asked != PLUGIN_RECALL:
            notes.append(
                {
                    "code": "plugin-recall-changed",
                    "message": f"the plugin recalled with {asked}, not {PLUGIN_RECALL}",
                }
            )
        recall_query = str(arguments.get("query") or query["text"])
        candidates = self.decide(
            recall_query, results, self.canonical[-1] if self.canonical else []
        )
        reproduced = sorted(
            (c for c in candidates if c["outcome"] == "injected"), key=lambda c: c["line"]
        )
        mine = [(c["id"], c["row"].get("content")) for c in reproduced]
        real = [(item["id"], item["content"]) for item in injected]
        if mine != real:
            notes.append(
                {
                    "code": "explain-mismatch",
                    "message": "the reproduction of the plugin's decision injects "
                    f"{[item for item, _ in mine]}, the plugin injected {[item for item, _ in real]}: "
                    "this explanation does not describe the plugin",
                }
            )
        trace: dict[str, Any] = {}
        if request.get("score_parts"):
            with provider._beam_session_scope(key) as beam:
                if beam is not None:
                    rows, trace = _recall_with(recall, arguments, explain=True)
                    if [row.get("id") for row in rows] != [row.get("id") for row in results]:
                        notes.append(
                            {
                                "code": "score-parts-drift",
                                "message": "the explain recall ranked other rows than the "
                                "prefetch's recall; score parts are those of the rows' own fields",
                            }
                        )
                        trace = {}
        for candidate in candidates:
            candidate["scores"] = score_parts_of(candidate["row"], trace)
            if candidate["origin"] == "recall":
                candidate["scores"]["signal"] = round(
                    self.module._prefetch_topic_signal(candidate["row"]), 4
                )

        def deep() -> tuple[list[dict[str, Any]], dict[str, Any]]:
            with provider._beam_session_scope(key) as beam:
                if beam is None:
                    return [], {}
                return _recall_with(recall, arguments, top_k=EXPLAIN_DEPTH, explain=True)

        explained.update(
            recall_query=recall_query,
            candidates=candidates,
            notes=notes,
            targets=explain_targets(
                self.db_path,
                query.get("targets") or [],
                candidates,
                deep,
                int(arguments.get("top_k") or PLUGIN_RECALL["top_k"]),
                explained["recalled_in"],
            ),
        )
        return explained


def _stages_text(trace: dict[str, Any]) -> str:
    """Mnemosyne's recall stages in a few words (how many candidates each found, how many were in
    scope and live, how many it kept): a memory its search found but its relevance gate dropped
    shows here."""
    stages = []
    for stage in trace.get("stages") or []:
        found, kept = stage.get("raw_count", 0), stage.get("kept_count", 0)
        scoped = stage.get("after_filter_count", found)
        # Rows its search found outside the session or closed are dropped before any scoring.
        middle = f", {scoped} in scope and live" if scoped != found else ""
        stages.append(f"{stage.get('name')} {found} found{middle}, {kept} kept")
    return f" (its stages: {'; '.join(stages)})" if stages else ""


def explain_targets(
    db_path: Path,
    targets: list[dict[str, Any]],
    candidates: list[dict[str, Any]],
    deep: Any,
    plugin_top_k: int,
    recalled_in: str | None,
) -> list[dict[str, Any]]:
    """Each expected memory's outcome: that of its best candidate, else its rank in a deeper
    recall (`deep()`, run once and only when needed), else not retrieved within 50."""
    explained, deep_rows = [], None
    deep_trace: dict[str, Any] = {}
    for target in _resolve_targets(db_path, targets):
        outcome = target_outcome(target, candidates)
        if outcome is None:
            if deep_rows is None:
                deep_rows, deep_trace = deep()
            outcome = _deep_outcome(target, deep_rows, plugin_top_k)
        if outcome is None:
            outcome = {
                "target": target["value"],
                "kind": target["kind"],
                "outcome": "not-retrieved",
                "reason": "not-within-50",
                "candidate": None,
                "detail": f"a top-{EXPLAIN_DEPTH} recall does not return it{_stages_text(deep_trace)}",
                "hint": missing_hint(db_path, target, recalled_in),
            }
        explained.append(outcome)
    return explained


class ApproximateExplainer:
    """The documented approximation explained (no plugin here): ``hermes_prefetch``'s recall of 16,
    its score and importance cut, its first 5; checked against ``hermes_prefetch`` itself."""

    approximate = True

    def __init__(self, db_path: Path, request: dict[str, Any]) -> None:
        self.db_path = db_path
        self.request = request
        self.instances: dict[str, Any] = {}
        self.recorder = RecallRecorder()

    def filter_rule(self, row: dict[str, Any]) -> tuple[str | None, str]:
        """The approximation's one filter, the plugin's score and importance cut (None: passes)."""
        score, importance = _score(row), float(row.get("importance") or 0.0)
        if score < HERMES["min_score"] and importance < HERMES["min_importance"]:
            return "score-and-importance", (
                f"score {score:.3f} below 0.20 and importance {importance:.2f} below 0.65"
            )
        return None, ""

    def explain(self, query: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """One query explained as the approximation decides it."""
        from mnemosyne.core.memory import Mnemosyne

        # As `recall` does: a query with a session is recalled there; one without, across sessions
        # (unless the eval's config turned cross-session recall off); one in a new conversation,
        # in a session no row has.
        if query.get("new"):
            session, across = unused_session_key(self.db_path), False
        else:
            session = query.get("session") or "mnemo-ops-eval"
            across = not query.get("session") and self.request.get(
                "sessionless_cross_session", True
            )
        if session not in self.instances:
            self.instances[session] = Mnemosyne(session_id=session, db_path=self.db_path)
        memory = self.instances[session]
        recall = self.recorder.watch(memory.beam)
        self.recorder.calls.clear()
        with cross_session_recall(across):
            found = hermes_prefetch(memory, query["text"])
        arguments, raw = self.recorder.calls[-1]
        results = break_ties(raw)
        candidates, passing = [], 0
        for rank, row in enumerate(results, start=1):
            candidate: dict[str, Any] = {
                "row": row,
                "id": row.get("id"),
                "origin": "recall",
                "recall_rank": rank,
            }
            rule, detail = self.filter_rule(row)
            if rule:
                candidate.update(outcome="filtered", reason=rule, detail=detail)
            else:
                passing += 1
                candidate["rank"] = passing
                if passing <= HERMES["kept"]:
                    candidate.update(outcome="injected", line=passing, reason="injected", detail="")
                else:
                    candidate.update(
                        outcome="ranked-out",
                        reason="ranked-out",
                        detail=f"passed the cut; rank {passing}, past the first {HERMES['kept']}",
                    )
            candidates.append(candidate)
        notes = []
        mine = [c["id"] for c in candidates if c["outcome"] == "injected"]
        if mine != [item.get("id") for item in found]:
            notes.append(
                {
                    "code": "explain-mismatch",
                    "message": f"the reproduction injects {mine}, the approximation "
                    f"{[item.get('id') for item in found]}",
                }
            )
        trace: dict[str, Any] = {}
        with cross_session_recall(across):
            if request.get("score_parts"):
                rows, trace = _recall_with(recall, arguments, explain=True)
                if sorted(str(row.get("id")) for row in rows) != sorted(
                    str(row.get("id")) for row in results
                ):
                    notes.append(
                        {
                            "code": "score-parts-drift",
                            "message": "the explain recall ranked other rows than the first; "
                            "score parts are those of the rows' own fields",
                        }
                    )
                    trace = {}
        for candidate in candidates:
            candidate["scores"] = score_parts_of(candidate["row"], trace)

        def deep() -> tuple[list[dict[str, Any]], dict[str, Any]]:
            with cross_session_recall(across):
                rows, trace = _recall_with(recall, arguments, top_k=EXPLAIN_DEPTH, explain=True)
            return break_ties(rows), trace

        recalled_in = None if across else session
        return {
            "session_key": None,
            "recalled_in": recalled_in or "every session",
            "recall_query": query["text"],
            "injected_chars": len(injected_text_of(found)),
            "injected": [
                {"id": item.get("id"), "content": item.get("content"), "canonical": False}
                for item in found
            ],
            "candidates": candidates,
            "notes": notes,
            "targets": explain_targets(
                self.db_path,
                query.get("targets") or [],
                candidates,
                deep,
                HERMES["top_k"],
                recalled_in,
            ),
        }


def _public_candidate(candidate: dict[str, Any]) -> dict[str, Any]:
    """A candidate as the result holds it (the row's fields that matter, not the whole row)."""
    row = candidate["row"]
    return {
        "id": candidate["id"],
        "content": row.get("content"),
        "source": row.get("source"),
        "importance": row.get("importance"),
        "tier": row.get("tier"),
        "canonical": candidate["origin"] == "canonical",
        "recall_rank": candidate.get("recall_rank"),
        "rank": candidate.get("rank"),
        "line": candidate.get("line"),
        "outcome": candidate["outcome"],
        "reason": candidate["reason"],
        "detail": candidate["detail"],
        "adjusted_score": candidate.get("adjusted_score"),
        "scores": candidate.get("scores") or {},
    }


def explain(request: dict[str, Any]) -> dict[str, Any]:
    """Why each query's expected memories were or were not injected.

    Per query (``queries``: text, session, ``targets``: ``{"kind": "id" | "text" | "auto",
    "value"}``): the injected lines, every candidate with its outcome (``injected`` with its line,
    ``ranked-out`` with its rank, ``filtered`` with the rule), its score parts (with
    ``score_parts``: Mnemosyne's ``recall(explain=True)``), each target's outcome (a target no
    candidate matches: its rank in a top-50 recall, or not retrieved within 50) and notes
    (``explain-mismatch`` when the reproduction differs from the prefetch).
    """
    db_path = Path(request["db_path"])
    apply_config_overrides(db_path.parent, request.get("config_overrides") or {})
    import mnemosyne.core.memory  # noqa: F401  (imported before the plugin, as Hermes does)

    plugin = plugin_version() if request.get("profile") == "hermes" else None
    explainer: PrefetchExplainer | ApproximateExplainer = (
        PrefetchExplainer(db_path, Path(os.environ["HERMES_HOME"]))
        if plugin
        else ApproximateExplainer(db_path, request)
    )
    explanations = []
    for query in request["queries"]:
        explained = explainer.explain(query, request)
        explained["candidates"] = [_public_candidate(c) for c in explained["candidates"]]
        explanations.append(explained)
        send_progress(1)
    return {
        "explanations": explanations,
        "profile_used": "hermes-approximate" if explainer.approximate else "hermes",
        "plugin_version": plugin,
        "depth": EXPLAIN_DEPTH,
    }


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Run the request's mode; the result says which Mnemosyne version did the work."""
    handlers = {"recall": recall, "store": store, "explain": explain}
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
