"""Mnemosyne's sleep, as the evening batch's consolidation child runs it (``jobs/evening_batch/
consolidation/child.py``): the model switch, the instance the sleep works through, a ``BeamMemory``
per session, and its end-of-sleep degradation put off until every session slept.

Nothing here is imported from Mnemosyne at module level: the child imports Mnemosyne only once its
environment is set (the parent chose MNEMOSYNE_DATA_DIR, HERMES_HOME, HOME and
MNEMOSYNE_SLEEP_BATCH), so each function imports what it uses when it is called.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mnemo_ops.mnemosyne.api import point_environment_at


def choose_model(model: str) -> str:
    """Keep Mnemosyne's model chain when one is configured, else force its AAAK fallback.

    Without a remote endpoint or a local GGUF file already on disk, Mnemosyne would try to download a
    model from HuggingFace (creating ``~/.hermes/mnemosyne/models`` first) at every sleep; turning its
    LLM switch off makes it go straight to AAAK, which is what it would end up using anyway offline.
    """
    from mnemosyne.core import local_llm

    configured = bool(
        local_llm.LLM_ENABLED and (local_llm.LLM_BASE_URL or local_llm._model_path() is not None)
    )
    if model == "aaak" or not configured:
        local_llm.LLM_ENABLED = False
        local_llm._llm_available = False
        return "aaak"
    return "model-chain"


def sleeping_mnemosyne(db_path: Path, session_id: str = "mnemo-ops") -> Any:
    """A ``Mnemosyne`` bound to `db_path` for the sleep, Mnemosyne's default data dir pointed at the
    database's folder first. Schema initialisation runs as the caller's block decides
    (``api.schema_initialisation_skipped`` on a current schema)."""
    from mnemosyne.core.memory import Mnemosyne

    point_environment_at(db_path)
    return Mnemosyne(session_id=session_id, db_path=db_path)


def session_beam(memory: Any, session_id: str) -> Any:
    """The ``BeamMemory`` that sleeps `session_id`: `memory`'s own for its session, else a new one on
    the same database with the same author (as ``sleep_all_sessions`` makes one per session)."""
    from mnemosyne.core.beam import BeamMemory

    if session_id == memory.beam.session_id:
        return memory.beam
    return BeamMemory(
        session_id=session_id,
        db_path=memory.beam.db_path,
        author_id=memory.beam.author_id,
        author_type=memory.beam.author_type,
    )


def sleep_arguments() -> dict[str, Any]:
    """The keyword arguments each session's ``BeamMemory.sleep`` gets.

    4.0's sleep ends with a census of conflicts across every memory bank (a read-only diagnostic
    the consolidation's summary does not use); ``sleep_all_sessions`` turns it off per session, as
    here. 3.15's sleep has no such argument.
    """
    from mnemosyne.core.beam import BeamMemory

    beam_parameters = inspect.signature(BeamMemory.sleep).parameters
    return {"_fleet_census": False} if "_fleet_census" in beam_parameters else {}


@contextlib.contextmanager
def episodic_degradation_deferred() -> Iterator[None]:
    """Within the block, ``BeamMemory.degrade_episodic`` (the last step of each ``sleep``, over the
    whole episodic table) does nothing; the caller degrades once after every session slept."""
    from mnemosyne.core.beam import BeamMemory

    degrade = BeamMemory.degrade_episodic
    BeamMemory.degrade_episodic = lambda self, dry_run=False: {}
    try:
        yield
    finally:
        BeamMemory.degrade_episodic = degrade
