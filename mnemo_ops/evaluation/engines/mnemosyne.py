"""The ``mnemosyne`` engine: Mnemosyne's own recall, in a child process, on a snapshot copy.

Why a child process: importing ``mnemosyne.core.memory`` creates ``$HERMES_HOME/mnemosyne/data`` and
``Mnemosyne(...)`` seeds a ``config.yaml`` into ``MNEMOSYNE_DATA_DIR`` (docs/mnemosyne.md). The child
gets an environment whose ``MNEMOSYNE_DATA_DIR`` and ``HERMES_HOME`` point into a temp dir holding
the snapshot, so nothing appears beside the user's database or in their Hermes home, and the
recall counters it bumps land in the copy. ``HOME`` is left alone so an embedding model cached
there is used, as the agent would use it.

Options (config section ``retrieval_eval``): ``enhanced_recall`` (``MNEMOSYNE_ENHANCED_RECALL``;
unset = whatever the environment says), ``use_associative`` (graph neighbours appended by
``recall_enhanced``), ``cross_session`` (``MNEMOSYNE_CROSS_SESSION``; unset = as Mnemosyne is configured),
``recall_options`` (keyword arguments of ``recall``, e.g. ``fts_weight``) and
``mnemosyne_environment`` (extra ``MNEMOSYNE_*`` variables). Options are also written into the
snapshot's ``config.yaml``, because Mnemosyne lets that file win over the environment.

``python`` (``eval run --python PATH``) runs the worker under another interpreter, one where an
upgrade candidate of Mnemosyne is installed and mnemo-ops is not: a standalone child of
``foundation.child_process`` (the worker file copied into a private folder of its own, beside a
stand-in of that module holding the worker's own modules too, ``worker.STANDALONE_FILES``, and run
by path), with ``PYTHONPATH``/``PYTHONHOME`` removed so that interpreter sees only its own packages.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mnemo_ops.database import open_memory_db
from mnemo_ops.database.snapshot import fold_wal, snapshot_database
from mnemo_ops.evaluation.engines.base import Query
from mnemo_ops.evaluation.metrics import Retrieved
from mnemo_ops.foundation.child_process import ChildProcessFailed, run_child
from mnemo_ops.foundation.errors import MnemoOpsError, UsageError
from mnemo_ops.mnemosyne import versions
from mnemo_ops.mnemosyne.api import mnemosyne_environment
from mnemo_ops.mnemosyne.vectors import keeps_vectors
from mnemo_ops.mnemosyne.worker import STANDALONE_FILES

WORKER_MODULE = "mnemo_ops.mnemosyne.worker"

RECALL_OPTION_NAMES = (
    "temporal_weight",
    "temporal_halflife",
    "vec_weight",
    "fts_weight",
    "importance_weight",
    "source",
    "topic",
    "from_date",
    "to_date",
    "use_cache",
    "use_weibull",
    "use_mmr",
    "use_intent",
    "use_synonyms",
    "associative_depth",
    "mmr_lambda",
)
"""Keyword arguments of Mnemosyne's recall / recall_enhanced that a config may set."""


PROFILES = ("plain", "hermes", "hermes-approximate")
"""How results are taken from Mnemosyne (see `hermes_home_found` for the default):

- ``plain``: Mnemosyne's recall (or ``recall_enhanced`` when enhanced recall is on) with top k, as the
  user configured Mnemosyne.
- ``hermes``: what the Hermes Mnemosyne plugin injects each turn, through the plugin's own
  ``MnemosyneMemoryProvider.prefetch`` where ``mnemosyne_hermes`` is installed in the Python that
  recalls, in the session the agent would recall in (docs/quality.md); where it is not installed,
  the approximation below, and the run says so (``profile_used``: ``hermes-approximate``).
- ``hermes-approximate``: ``beam.recall(query, top_k=16, temporal_weight=0.2,
  temporal_halflife=48)`` in the query's session, rows dropped when their score is below 0.20 and
  their importance below 0.65, the first 5 kept (``mnemosyne/plugin_prefetch.HERMES``). It omits the
  plugin's other filters and the canonical facts it appends (docs/quality.md has the gap).
"""
AGENT_PROFILES = ("hermes", "hermes-approximate")
"""The profiles that measure what the agent is given: its 5 lines, not a top k."""
COST_SAMPLE = 40
"""Queries of a run whose recall cost is measured (the first ones: the same before and after)."""
HERMES_MARKERS = ("config.yaml", "state.db", "memories")
"""What tells a Hermes agent's home from the ``~/.hermes`` folder Mnemosyne alone would create."""


EMBEDDINGS_OFF = (
    "MNEMOSYNE_NO_EMBEDDINGS",
    "MNEMOSYNE_SKIP_EMBEDDINGS",
    "MNEMOSYNE_EMBEDDINGS_OFF",
)
"""Mnemosyne's switches that turn its vector voice off on purpose."""


class VectorsUnavailable(MnemoOpsError):
    """The home recalls with vectors but this recall could not embed: measuring it would measure a
    different recall from the agent's, so the eval and the guard refuse."""


def dense_problem(dense: dict[str, Any] | None) -> str | None:
    """Why the recall just made had no vector voice although the model was meant to be on, or None."""
    if dense is None:
        return "the recall worker did not report its vector voice"
    model = dense.get("model") or "the embedding model"
    if dense.get("error"):
        return f"{model} could not be loaded ({dense['error']})"
    if not dense.get("available"):
        return f"{model} is not available in this environment (not installed or not configured)"
    missing = int(dense.get("queries") or 0) - int(dense.get("embedded") or 0)
    if missing > 0:
        return (
            f"{model} gave no vector for {missing} of {dense['queries']} queries "
            "(it cannot be loaded or reached)"
        )
    return None


def _flag(value: bool) -> str:
    return "1" if value else "0"


def hermes_home_found(hermes_home: Path) -> bool:
    """True when `hermes_home` holds a Hermes agent (its config, session store or memory blocks)."""
    return any((Path(hermes_home) / marker).exists() for marker in HERMES_MARKERS)


def resolve_profile(profile: str, hermes_home: Path) -> str:
    """``auto`` -> ``hermes`` when a Hermes home is found, else ``plain``; other names as given."""
    if profile == "auto":
        return "hermes" if hermes_home_found(hermes_home) else "plain"
    if profile not in PROFILES:
        raise UsageError(
            f"unknown recall profile {profile!r}; profiles are: auto, {', '.join(PROFILES)}"
        )
    return profile


class MnemosyneEngine:
    """Recall through ``mnemosyne.core.memory.Mnemosyne`` in a contained child process."""

    name = "mnemosyne"

    def __init__(
        self,
        db_path: Path,
        enhanced_recall: bool | None = None,
        use_associative: bool = False,
        cross_session: bool | None = None,
        recall_options: dict[str, Any] | None = None,
        environment: dict[str, Any] | None = None,
        timeout_s: float | None = None,
        profile: str = "plain",
        python: str | Path | None = None,
        hermes_home: Path | None = None,
        cost_sample: int = COST_SAMPLE,
        in_place: bool = False,
    ):
        self.db_path = Path(db_path)
        self.in_place = in_place
        """Recall on `db_path` itself (a private copy the caller throws away), not on a snapshot."""
        self.profile = profile  # resolved: `from_settings` turns "auto" into one of PROFILES
        if self.profile not in PROFILES:
            raise UsageError(
                f"unknown recall profile {profile!r}; profiles are: auto, {', '.join(PROFILES)}"
            )
        self.python = str(Path(python).expanduser().absolute()) if python else None
        self._version: str | None = None
        self.enhanced_recall = enhanced_recall
        self.use_associative = use_associative
        self.cross_session = cross_session
        self.recall_options = dict(recall_options or {})
        self.environment = {str(key): str(value) for key, value in (environment or {}).items()}
        self.timeout_s = timeout_s
        self.hermes_home = Path(hermes_home) if hermes_home else None
        self.cost_sample = cost_sample
        self.profile_used: str | None = None
        self.last_dense: dict[str, Any] | None = None
        """The last recall's vector voice, as the worker reported it, with ``home_keeps_vectors``
        and ``switched_off`` (the environment turned Mnemosyne's embeddings off on purpose)."""
        """The profile the last run really used (``hermes`` falls back to the approximation)."""
        self.plugin_version: str | None = None
        self.last_turns: list[dict[str, Any]] = []
        """Per query of the last run: lines and characters injected, canonical lines, cost."""
        unknown = sorted(set(self.recall_options) - set(RECALL_OPTION_NAMES))
        if unknown:
            raise UsageError(
                f"retrieval_eval.recall_options: unknown option '{unknown[0]}' "
                f"(options: {', '.join(RECALL_OPTION_NAMES)})"
            )
        bad = sorted(name for name in self.environment if not name.startswith("MNEMOSYNE_"))
        if bad:
            raise UsageError(
                f"retrieval_eval.mnemosyne_environment: '{bad[0]}' is not a MNEMOSYNE_* variable"
            )
        if "MNEMOSYNE_DATA_DIR" in self.environment:
            raise UsageError(
                "retrieval_eval.mnemosyne_environment: MNEMOSYNE_DATA_DIR is set by the eval itself"
            )

    @classmethod
    def from_settings(
        cls, settings, db_path: Path | None = None, profile: str | None = None
    ) -> MnemosyneEngine:
        """Build the engine from the ``retrieval_eval`` config section (the guard shares it).

        `db_path` recalls from another copy of the database (the guard's trial copy); `profile`
        overrides ``retrieval_eval.profile``; ``auto`` resolves against the settings' Hermes home.
        """
        options = settings.retrieval_eval
        return cls(
            db_path or settings.db_path,
            enhanced_recall=options.enhanced_recall,
            use_associative=options.use_associative,
            cross_session=options.cross_session,
            recall_options=options.recall_options,
            environment=options.mnemosyne_environment,
            profile=resolve_profile(profile or options.profile, settings.hermes_home),
            python=options.python,
            hermes_home=settings.hermes_home,
        )

    def version(self) -> str:
        """``mnemosyne-memory <version>`` from package metadata (no import), of `python` when set."""
        if self._version is None:
            found = (
                versions.interpreter_version(self.python)
                if self.python
                else versions.installed_version()
            )
            self._version = f"mnemosyne-memory {found or 'unknown'}"
        return self._version

    def effective_environment(self) -> dict[str, str]:
        """The MNEMOSYNE_* settings the child applies (environment and snapshot config.yaml)."""
        variables = dict(self.environment)
        if self.cross_session is not None:  # None: as the user's Mnemosyne is configured
            variables["MNEMOSYNE_CROSS_SESSION"] = _flag(self.cross_session)
        if self.enhanced_recall is not None:
            variables["MNEMOSYNE_ENHANCED_RECALL"] = _flag(self.enhanced_recall)
        elif os.environ.get("MNEMOSYNE_ENHANCED_RECALL"):
            variables["MNEMOSYNE_ENHANCED_RECALL"] = os.environ["MNEMOSYNE_ENHANCED_RECALL"]
        return variables

    def describe(self) -> dict[str, Any]:
        """Name, version and every option that shapes the ranking."""
        return {
            "name": self.name,
            "version": self.version(),
            "options": {
                "profile": self.profile,
                **({"profile_used": self.profile_used} if self.profile_used else {}),
                **(
                    {"plugin": f"mnemosyne-hermes {self.plugin_version}"}
                    if self.plugin_version
                    else {}
                ),
                "environment": self.effective_environment(),
                "use_associative": self.use_associative,
                "recall_options": self.recall_options,
                **({"python": self.python} if self.python else {}),
            },
        }

    def recall_many(self, queries: Sequence[Query], progress=None) -> list[list[Retrieved]]:
        """Snapshot the DB into a temp dir, recall every query in a child process, read the ranks back."""
        reply = self.run_on_snapshot(
            {
                "mode": "recall",
                "queries": [{"text": q.text, "k": q.k, "session": q.session} for q in queries],
                "cost_sample": self.cost_sample,
            },
            progress,
        )
        self.last_turns = list(reply.get("turns") or [])
        return [
            [Retrieved(id=str(item["id"]), content=item.get("content") or "") for item in ranked]
            for ranked in reply["results"]
        ]

    def run_on_snapshot(self, work: dict[str, Any], progress=None) -> dict[str, Any]:
        """Run the worker's `work` (its ``mode`` and ``queries``) on a snapshot copy in a temp dir
        (`in_place`: on a hard link to the copy at `db_path`), with this engine's options, and
        return its reply (the engine's version and profile updated from it)."""
        # In place: the layout is made beside the copy (a hard link needs the same filesystem).
        beside = self.db_path.parent if self.in_place else None
        with tempfile.TemporaryDirectory(prefix="mnemo-ops-eval-", dir=beside) as temporary:
            root = Path(temporary)
            data_dir = root / "hermes" / "mnemosyne" / "data"
            snapshot = snapshot_database(self.db_path, data_dir, link=self.in_place)
            # HOME stays: an embedding model cached there is used as the agent would use it.
            environment = mnemosyne_environment(
                data_dir, root / "hermes", variables=self.effective_environment()
            )
            # The same Python work for the same data on every run: the cost counts are comparable.
            environment["PYTHONHASHSEED"] = "0"
            self._copy_hermes_config(root / "hermes")
            request = {
                **work,
                "db_path": str(snapshot),
                "config_overrides": self.effective_environment(),
                "use_associative": self.use_associative,
                "recall_options": self.recall_options,
                "profile": self.profile,
                # A case without a session has none to be scoped to: it is recalled across sessions,
                # unless the config turned cross-session recall off explicitly.
                "sessionless_cross_session": self.cross_session is not False,
            }
            home_vectors = _keeps_vectors(snapshot)
            try:
                reply = run_worker(
                    request, environment, progress, self.timeout_s, python=self.python
                )
            finally:
                if self.in_place:
                    fold_wal(snapshot)
        if work.get("mode") == "recall":
            self._check_vectors(reply, home_vectors, environment)
        if reply.get(
            "mnemosyne_version"
        ):  # the version that really recalled, reported by the worker
            self._version = f"mnemosyne-memory {reply['mnemosyne_version']}"
        self.profile_used = reply.get("profile_used") or self.profile
        self.plugin_version = reply.get("plugin_version")
        return reply

    def _check_vectors(
        self, reply: dict[str, Any], home_vectors: bool, environment: dict[str, str]
    ) -> None:
        """Refuse a recall that ran without the vector voice the home's recall has.

        Mnemosyne falls back to keyword recall without a word when its model fails; on a home that
        keeps vectors that would measure a different recall from the agent's. Only an off switch
        set on purpose in the environment (the agent runs without vectors) lets it through, and
        ``last_dense["switched_off"]`` says so.
        """
        dense = dict(reply.get("dense") or {})
        switched_off = any(environment.get(name) for name in EMBEDDINGS_OFF)
        dense.update({"home_keeps_vectors": home_vectors, "switched_off": switched_off})
        self.last_dense = dense
        if not home_vectors or switched_off:
            return
        problem = dense_problem(reply.get("dense"))
        if problem:
            raise VectorsUnavailable(
                f"the agent's home recalls with vectors, but {problem}: refusing to measure recall "
                "without them (fix the embedding configuration of this environment, the agent's)"
            )

    def _copy_hermes_config(self, temporary_home: Path) -> None:
        """The agent's Hermes config.yaml beside the snapshot: the plugin reads its settings there."""
        if self.hermes_home is None or self.profile != "hermes":
            return
        source = self.hermes_home / "config.yaml"
        if source.is_file() and not source.is_symlink():
            temporary_home.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, temporary_home / "config.yaml")


def _keeps_vectors(db_path: Path) -> bool:
    connection = open_memory_db(db_path, readonly=True)
    try:
        return keeps_vectors(connection)
    finally:
        connection.close()


def run_worker(
    request: dict[str, Any],
    environment: dict[str, str],
    progress: Callable[[Any], None] | None = None,
    timeout_s: float | None = None,
    python: str | None = None,
) -> dict[str, Any]:
    """Run ``mnemo_ops.mnemosyne.worker`` with `request`; return its result.

    Progress messages (a count of queries or turns done) go to `progress`. With `python`, that
    interpreter runs the worker standalone (see the module docstring). Raises ChildProcessFailed
    (a MnemoOpsError) with one line when the worker fails.
    """
    try:
        return run_child(
            WORKER_MODULE,
            request,
            timeout=timeout_s,
            environment=environment,
            python=python,
            standalone=bool(python),
            standalone_files=STANDALONE_FILES,
            on_progress=progress,
        )
    except ChildProcessFailed as error:
        raise error.with_context("Mnemosyne worker") from None
