"""Progress for long work: rich on an interactive stderr, silent otherwise (cron, --json, -q).

A run shows one row per stage: a bar counted in the stage's own items when it knows how many, else
a spinner with the stage's name, so a terminal is never left without a moving sign for more than
a moment. Rows of one reporter share one live display; a finished stage leaves one line (its name,
its count, its time), drawn once. Nothing is ever written to stdout: the display is on stderr, and
only when stderr is a terminal. Every stage is also recorded (``stages``), shown or not, so a test
can see what a run reported.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text


@dataclasses.dataclass
class StageRecord:
    """One stage as reported: its name, how far it got and its total (None: counted by no total)."""

    description: str
    completed: int = 0
    total: int | None = None
    finished: bool = False
    counted: bool = True
    """False for a spinner: a stage with no count of its own, done when it ends."""


class _CountColumn(ProgressColumn):
    """``done/total`` for a counted stage (``done`` while its total is unknown), nothing for a spinner."""

    def render(self, task: Task) -> Text:
        """The count of `task`, as text."""
        if not task.fields.get("counted", True):
            return Text("")
        done = int(task.completed)
        return Text(f"{done}/{int(task.total)}" if task.total is not None else f"{done}")


class _Shared:
    """The live display and the records every reporter of one run writes to."""

    def __init__(self, console: Console | None, enabled: bool):
        self.stages: list[StageRecord] = []
        self.console = console
        self.enabled = enabled
        self.progress: Progress | None = None
        self.open_rows = 0

    def start_row(self, description: str, total: int | None, counted: bool) -> TaskID | None:
        if not self.enabled:
            return None
        if self.progress is None:
            self.progress = Progress(
                SpinnerColumn(finished_text="[green]✓"),
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                _CountColumn(),
                TimeElapsedColumn(),
                console=self.console or Console(stderr=True),
                transient=False,
            )
            self.progress.start()
        self.open_rows += 1
        return self.progress.add_task(description, total=total, counted=counted)

    def end_row(self) -> None:
        if self.progress is None:
            return
        self.open_rows -= 1
        if self.open_rows == 0:
            # The display ends with the last open row; each finished row stays as its one line.
            self.progress.stop()
            self.progress = None


class Stage:
    """The handle a stage's work moves: ``advance(n)``, ``update(total=...)``, ``finish()``."""

    def __init__(self, shared: _Shared, record: StageRecord, task_id: TaskID | None):
        self._shared, self.record, self._task_id = shared, record, task_id

    def _show(self, **fields) -> None:
        if self._task_id is not None and self._shared.progress is not None:
            self._shared.progress.update(self._task_id, **fields)

    def advance(self, amount: int = 1) -> None:
        """Move the stage forward by `amount` of its items."""
        self.record.completed += amount
        self._show(completed=self.record.completed)

    def update(self, total: int | None = None) -> None:
        """Change the total when it becomes known."""
        self.record.total = total
        self._show(total=total)

    def finish(self) -> None:
        """Every item of the stage is done, including items that needed no work of their own (an
        orphan linked as an earlier row's match): the count reaches the total."""
        if self.record.total is None:
            self.record.total = self.record.completed
        self.record.completed = self.record.total
        self._show(total=self.record.total, completed=self.record.completed)


class ProgressReporter:
    """Stage rows on stderr when enabled and stderr (or the given console) is a terminal."""

    def __init__(self, enabled: bool = True, console: Console | None = None, prefix: str = ""):
        is_terminal = console.is_terminal if console is not None else sys.stderr.isatty()
        self._shared = _Shared(console, enabled and is_terminal)
        self.prefix = prefix

    @property
    def enabled(self) -> bool:
        """Whether anything is drawn."""
        return self._shared.enabled

    @property
    def stages(self) -> list[StageRecord]:
        """Every stage this reporter (and those made by `within`) reported, in order."""
        return self._shared.stages

    def within(self, prefix: str) -> ProgressReporter:
        """A reporter on the same display whose stage names start with `prefix` (the recall
        guard's trial runs the job's stages on a copy: they are told apart from the real ones)."""
        inner = ProgressReporter.__new__(ProgressReporter)
        inner._shared = self._shared
        inner.prefix = f"{self.prefix}{prefix}: "
        return inner

    @contextmanager
    def bar(self, description: str, total: int | None = None) -> Iterator[Stage]:
        """A stage counted in items: yields a `Stage`; its row ends when the block ends."""
        yield from self._stage(description, total, counted=True)

    @contextmanager
    def spinner(self, description: str) -> Iterator[Stage]:
        """A stage with no count: a named spinner while the block runs, one done line after."""
        yield from self._stage(description, None, counted=False)

    def _stage(self, description: str, total: int | None, counted: bool) -> Iterator[Stage]:
        record = StageRecord(f"{self.prefix}{description}", total=total, counted=counted)
        self._shared.stages.append(record)
        stage = Stage(
            self._shared, record, self._shared.start_row(record.description, total, counted)
        )
        try:
            yield stage
            if not counted:
                stage.update(total=1)  # a spinner's one item is the stage itself
                stage.finish()
            record.finished = True
        finally:
            if stage._task_id is not None and self._shared.progress is not None:
                # A stage left short of its total shows where it stopped; a finished one its time.
                self._shared.progress.update(
                    stage._task_id,
                    description=record.description
                    if record.finished
                    else f"{record.description} (stopped)",
                )
                self._shared.progress.stop_task(stage._task_id)
            self._shared.end_row()
