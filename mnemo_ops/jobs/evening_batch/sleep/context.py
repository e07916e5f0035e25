"""What every sleep stage gets: where the files are, the night, the options and the job's hooks.

The step functions (``steps``) build one `SleepRun` per evening-batch run. In a real run (the live
database, or the recall guard's trial copy) it points at the job's own files; in a dry run at private
copies of them (``scratch``), so a dry run runs the very same code and reports exactly the counts the
real run would make, and then the copies are removed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.core import state
from mnemo_ops.jobs.evening_batch.sleep import store
from mnemo_ops.jobs.evening_batch.sleep.night import Night
from mnemo_ops.jobs.evening_batch.sleep.prominence import Retention, retention_of
from mnemo_ops.settings.sections import SleepOptions


@dataclasses.dataclass
class EdgePass:
    """What the edges stage did tonight (``edges.nightly_update``; ``stats.sleep.edges``).

    - `done_before`: an earlier run had already done tonight's pass, so this one wrote nothing;
    - `planned`: edges tonight's pass had to write (journaled by a killed run, then the new plan);
    - `strengthened`, `downscaled`: edges written, by co-activity; `changed`: all edges written.
    """

    done_before: bool = False
    planned: int = 0
    strengthened: int = 0
    downscaled: int = 0
    changed: int = 0

    def to_stats(self) -> dict[str, Any]:
        """``stats.sleep.edges``."""
        return {
            "done_before": self.done_before,
            "planned": self.planned,
            "strengthened": self.strengthened,
            "downscaled": self.downscaled,
            "changed": self.changed,
        }


@dataclasses.dataclass
class SleepRun:
    """One evening-batch run's view for the sleep stages."""

    db_path: Path
    state_db_path: Path
    options: SleepOptions
    """The ``sleep`` section (``forgetting`` off for the night when the eval suite is unreadable)."""
    night: Night
    since: datetime
    """Start of the activity window (naive local): the last sleep, else a day before the night."""
    owner: str
    count: Callable[[str, int], None]
    before_write: Callable[[], None] = lambda: None
    eval_answers: frozenset[str] = frozenset()
    """Working memory ids the user's eval suite names as answers (never archived when protected)."""
    withheld: frozenset[str] = frozenset()
    """Working memory ids nothing is derived from tonight: the recall guard found rows derived
    from them taking the agent's lines (``JobContext.withheld``); graduation judges them withheld."""
    multi_valued_predicates: tuple[str, ...] = ()
    """Triple predicates that may hold several objects at once (monthly-maintenance's option)."""
    hermes_home: Path | None = None
    """The agent's home (a child writing through Mnemosyne gets it as HERMES_HOME)."""
    private_home: Path | None = None
    """A dry run's private folder: the child's HERMES_HOME and HOME (nothing reaches the user's)."""
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The sleep stages' figures (``stats.sleep``): written by the stages, never read back."""
    edge_pass: EdgePass | None = None
    """Tonight's edge pass when the edges stage ran in this run (NREM and REM read it), else None."""
    carry: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What one stage hands the next within the run (keys named by the stage that sets them)."""

    @property
    def retention(self) -> Retention:
        """The daily retention per kind of the ``sleep`` section."""
        return retention_of(self.options)

    def open_memory(self, readonly: bool = False) -> apsw.Connection:
        """The memory database (apsw), read-write unless asked otherwise."""
        return database.open_memory_db(self.db_path, readonly=readonly)

    def open_state(self):
        """state.db with the sleep tables (created when missing)."""
        state_db = state.open_state(self.state_db_path)
        store.ensure_tables(state_db)
        return state_db
