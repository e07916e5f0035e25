"""Progress bars for long work: rich on an interactive stderr, silent otherwise (cron, --json, -q)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class _Silent:
    def advance(self, amount: int = 1) -> None:
        """Do nothing: no bar is shown."""

    def update(self, total: int | None = None) -> None:
        """Do nothing: no bar is shown."""


class _Bar:
    def __init__(self, progress: Progress, task_id):
        self._progress, self._task_id = progress, task_id

    def advance(self, amount: int = 1) -> None:
        """Move the bar forward by `amount` units."""
        self._progress.advance(self._task_id, amount)

    def update(self, total: int | None = None) -> None:
        """Change the total when it becomes known."""
        self._progress.update(self._task_id, total=total)


class ProgressReporter:
    """Creates progress bars when enabled and stderr is a terminal."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled and sys.stderr.isatty()

    @contextmanager
    def bar(self, description: str, total: int | None = None) -> Iterator[_Bar | _Silent]:
        """A context manager yielding an object with ``advance(n)`` and ``update(total=...)``."""
        if not self.enabled:
            yield _Silent()
            return
        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        with progress:
            yield _Bar(progress, progress.add_task(description, total=total))
