"""The checkpoint before a job's first write (the runner's hook): reused briefly, kept to seven
besides each job's rollback point, and a failed one stops the job before it writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from mnemo_ops.checkpoints import catalog
from mnemo_ops.checkpoints.pre_write import take_for_job as runner_hook
from mnemo_ops.core import state
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.manifests import get_manifest
from mnemo_ops.core.results import JobResult
from mnemo_ops.foundation.errors import MnemoOpsError
from tests.checkpoints.helpers import corrupt_an_index


def _hook_context(settings, job: str) -> JobContext:
    manifest = get_manifest(settings, job)
    assert manifest.checkpoint == "before-write"
    return JobContext(
        settings=settings,
        manifest=manifest,
        dry_run=False,
        result=JobResult(job=job),
        checkpoint_hook=runner_hook,
    )


def _succeed(settings, context: JobContext) -> None:
    """Record the hook's run as a successful one in the ledger, as the runner does."""
    ledger = state.open_state(settings.state_db_path)
    state.record_run(ledger, context.result.finish())
    ledger.close()


@pytest.mark.e2e
def test_pre_write_checkpoints_are_reused_briefly_and_keep_seven(sample_settings):
    start = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    with freeze_time(start):
        context = _hook_context(sample_settings, "memory-maintain")
        context.before_write()
        context.before_write()  # once per run
        first = context.result.checkpoint
        _succeed(sample_settings, context)
    assert first.startswith("pre-memory-maintain-20261101T090000Z")
    with freeze_time(start + timedelta(minutes=5)):  # within backup.reuse_minutes: reused
        context = _hook_context(sample_settings, "evening-batch")
        context.before_write()
        assert context.result.checkpoint == first
    made = [first]
    for hour in range(1, 10):
        with freeze_time(start + timedelta(hours=hour)):
            context = _hook_context(sample_settings, "evening-batch")
            context.before_write()
            made.append(context.result.checkpoint)
            _succeed(sample_settings, context)
    assert len(set(made)) == 10
    pre_write = [
        info for info in catalog.list_checkpoints(sample_settings) if info.kind == "pre-write"
    ]
    # The newest seven, and memory-maintain's only one: the rollback point of its last successful
    # run stays until memory-maintain runs again.
    assert [info.name for info in pre_write] == [first, *made[-7:]]
    assert all(info.verified and info.job == "evening-batch" for info in pre_write[1:])


@pytest.mark.parametrize(
    "backup",
    [{"layout": "full-copy"}, {"layout": "deduplicated", "pre_write_integrity_check": True}],
    ids=["full-copy", "deduplicated"],
)
def test_a_job_does_not_write_when_its_pre_write_checkpoint_fails(sample, sample_settings, backup):
    corrupt_an_index(sample.db_path)
    settings = sample_settings.updated(backup=backup)
    context = _hook_context(settings, "memory-maintain")
    with pytest.raises(MnemoOpsError) as raised:
        context.before_write()
    assert "pre-write checkpoint failed, nothing was written" in raised.value.message
    assert context.result.checkpoint is None
    failed = [info for info in catalog.list_checkpoints(settings) if info.failed]
    assert len(failed) == 1 and failed[0].name.startswith("pre-memory-maintain-")
