"""Progress that tells the truth: one row per stage, counted in the stage's items, reaching its total,
drawn on a terminal's stderr only; real jobs on homes written by the real Mnemosyne."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.jobs import run_job
from mnemo_ops.jobs.evening_batch.job import STEPS
from mnemo_ops.mnemosyne.sample_home import copy_home
from mnemo_ops.settings import load_settings
from tests.conftest import run_cli


def terminal() -> tuple[ProgressReporter, io.StringIO]:
    """A reporter drawing on a real rich console that is a terminal, and what it drew."""
    stream = io.StringIO()
    console = Console(force_terminal=True, file=stream, width=140)
    return ProgressReporter(console=console), stream


def settings_for(layout):
    """Settings for `layout`, as the CLI resolves them."""
    return load_settings(db=layout.db_path, state_dir=layout.state_dir, environ=layout.environ())


def assert_truthful(reporter: ProgressReporter, drawn: str) -> None:
    """Every stage once, finished, at its total, and drawn."""
    names = [stage.description for stage in reporter.stages]
    assert names and len(names) == len(set(names)), names
    for stage in reporter.stages:
        assert stage.finished and stage.total is not None, stage
        assert stage.completed == stage.total, stage
        assert stage.description in drawn, stage.description


def test_bridge_drain_counts_items_not_files(sample):
    queue = sample.state_dir / "queue" / "new"
    lines = [{"content": f"The spare key number {n} hangs in the garage."} for n in range(5)]
    lines.append({"importance": 0.5})  # no content: rejected, still one item handled
    (queue / "many.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    reporter, stream = terminal()

    result = run_job(settings_for(sample), "bridge-drain", progress=reporter)

    assert result.changes["files_drained"] == 3
    items = [stage for stage in reporter.stages if stage.description == "bridge-drain: items"]
    # The sample's two files hold three items; the new file six: nine items, three files.
    assert [(stage.completed, stage.total) for stage in items] == [(9, 9)]
    assert_truthful(reporter, stream.getvalue())
    assert "9/9" in stream.getvalue()


@pytest.mark.heavy
def test_memory_maintain_draws_each_bar_once_and_reaches_its_total(sample, tmp_path):
    from devtools.samples.realistic_memories import add_realistic_memories

    home = copy_home(sample, tmp_path / "grown")
    add_realistic_memories(home.db_path, 600, seed=20)
    reporter, stream = terminal()

    result = run_job(settings_for(home), "memory-maintain", progress=reporter)

    assert result.status == "ok", result.error
    linking = result.stats["linking"]
    # Orphans taken as an earlier row's match are skipped when their turn comes: the pass examines
    # fewer rows than it counted, and the bar still ends at the count it showed.
    assert linking["orphans_examined"] < linking["orphans_found"]
    bars = [
        stage for stage in reporter.stages if stage.description.endswith("linking orphan memories")
    ]
    # The recall guard's trial on its copy, then the real run: two stages, each named, each once.
    assert [stage.description for stage in bars] == [
        "recall guard trial: linking orphan memories",
        "linking orphan memories",
    ]
    assert bars[-1].total == linking["orphans_found"]
    assert_truthful(reporter, stream.getvalue())


def test_evening_batch_names_every_step(sample):
    reporter, stream = terminal()

    result = run_job(settings_for(sample), "evening-batch", dry_run=True, progress=reporter)

    assert result.status == "dry-run", result.error
    names = [stage.description for stage in reporter.stages]
    for step in STEPS:
        assert f"evening-batch: {step.name}" in names
    assert_truthful(reporter, stream.getvalue())


def test_nothing_is_drawn_when_not_a_terminal(sample, capsys):
    stream = io.StringIO()
    reporter = ProgressReporter(console=Console(file=stream))  # a file: not a terminal

    result = run_job(settings_for(sample), "bridge-drain", dry_run=True, progress=reporter)

    assert result.status == "dry-run"
    assert not reporter.enabled
    assert stream.getvalue() == ""
    assert capsys.readouterr().out == ""


def test_a_run_through_pipes_writes_only_its_result_to_stdout(sample):
    completed = run_cli(sample, "run", "bridge-drain")

    assert completed.returncode == 0, completed.stderr
    assert "\x1b" not in completed.stdout and "\x1b" not in completed.stderr
    assert "━" not in completed.stdout + completed.stderr
    assert completed.stdout.startswith("ok bridge-drain")
