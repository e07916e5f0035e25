"""backup, the job that copies the memory: one verified checkpoint of the memory database, the
memory blocks and state.db (02:00 daily).

- `job`: the run (``run(ctx)``); the checkpoints themselves (create, verify, retain, restore) are
  the shared ``mnemo_ops.checkpoints`` service, which the other writing jobs use for their rollback
  point too.

Options: the ``backup`` section (``settings.job_sections``). Manifest: ``jobs/backup.yaml``.
Docs: docs/jobs/backup.md.
"""
