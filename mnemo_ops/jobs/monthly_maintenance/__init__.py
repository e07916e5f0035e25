"""monthly-maintenance: the integrity audit of the memory database, then safe repairs and upkeep.

- `checks`: every check, read-only;
- `repairs`: the safe repairs a real run applies (the vector repairs go through Mnemosyne, in
  ``mnemo_ops.mnemosyne.vectors``);
- `job`: the job's ``run(ctx)``: integrity first, findings, repairs, optimize, FTS5 merges, VACUUM
  only when asked.

Options: the ``monthly_maintenance`` section. Manifest: ``jobs/monthly-maintenance.yaml``.
Docs: docs/jobs/monthly-maintenance.md.
"""
