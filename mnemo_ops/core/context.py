"""What a job receives: settings, its manifest, the dry-run flag, its options, and helpers that
respect the dry-run flag."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.core import state
from mnemo_ops.core.manifests import JobManifest
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.core.results import JobResult, Severity
from mnemo_ops.settings import Settings


@dataclasses.dataclass
class JobContext:
    """The job's view of the world. `dry_run` is explicit; check it right before each side effect.

    `options` is the job's typed option section (``--option`` over the config file over the
    defaults: ``ctx.options.k``); `run_options` has the same fields, each None unless given for
    this run, for the rare option whose precedence sits between the two (the eval's ``k``: flag,
    then suite, then config).
    """

    settings: Settings
    manifest: JobManifest
    dry_run: bool
    result: JobResult
    force: bool = False
    options: Any = None
    run_options: Any = None
    progress: ProgressReporter = dataclasses.field(default_factory=lambda: ProgressReporter(False))
    checkpoint_hook: Callable[[JobContext], str | None] | None = None
    lock_release: Callable[[], None] | None = None
    not_needed: str | None = None
    """Why the job's preflight found nothing to do (``guard.recall_guard.mark_not_needed``), else
    None: the guard then makes no trial, and the job returns without writing. Set on this context
    only (the guard's trial runs the job on a fresh one)."""
    withheld: frozenset[str] = frozenset()
    """Rows the job derives nothing from this run: the origins of rows the recall guard found
    taking the agent's lines from evidence it received before (``guard.crowding``); honoured by
    jobs whose manifest says ``withholds_crowders``."""
    stage: str = "start"
    """The stage the run is in, named in the ledger when a signal interrupts it: the runner's
    phases (``preflight``, ``recall-guard trial``, ``checkpoint``, ``run``), or the job's own
    (`enter_stage`)."""
    _checkpoint_taken: bool = False

    @property
    def job(self) -> str:
        """The job's name."""
        return self.manifest.name

    def before_write(self) -> None:
        """Call right before the first write: takes the pre-write checkpoint once, if the manifest asks.

        Does nothing in a dry run (a dry run never writes) or for jobs without
        ``checkpoint: before-write``.
        """
        if self.dry_run or self._checkpoint_taken or self.manifest.checkpoint != "before-write":
            return
        self._checkpoint_taken = True
        if self.checkpoint_hook is not None:
            started, stage = time.monotonic(), self.stage
            self.stage = "checkpoint"
            # A copy of the whole database can take a while with no count to show: a named spinner.
            with self.progress.spinner(f"{self.job}: checkpoint before the first write"):
                self.result.checkpoint = self.checkpoint_hook(self)
            self.stage = stage
            # A whole-file copy: on a large database the largest share of a small run.
            self.result.stats["checkpoint_seconds"] = round(time.monotonic() - started, 2)

    def enter_stage(self, name: str) -> None:
        """Say which stage the job is in now (named in the ledger if a signal interrupts it)."""
        self.stage = name

    def release_lock(self) -> None:
        """Let go of the writer lock before the run ends, once the job writes nothing more the
        lock protects (the backup's second copy: slow, and only reading what it staged).

        Nothing happens in a dry run or when the run holds no lock."""
        if self.lock_release is not None:
            self.lock_release()

    def open_db(self, readonly: bool | None = None) -> apsw.Connection:
        """Open the memory DB; read-only by default in a dry run (so nothing, not even the WAL, changes)."""
        return database.open_memory_db(
            self.settings.db_path, readonly=self.dry_run if readonly is None else readonly
        )

    def open_state(self):
        """Open state.db: read-only (possibly None when it does not exist yet) in a dry run."""
        if self.dry_run:
            return state.open_state_readonly(self.settings.state_db_path)
        return state.open_state(self.settings.state_db_path)

    def warn(
        self, code: str, message: str, severity: str = Severity.WARNING, fix: str | None = None
    ) -> None:
        """Record a finding on the result."""
        self.result.warn(code, message, severity=severity, fix=fix)

    def count(self, name: str, amount: int = 1) -> None:
        """Count a write (or, in a dry run, a write that would be made)."""
        self.result.count(name, amount)
