"""nightly-selfcare: the read-only audits of the home, the day's row counts, files staged into
quarantine, and the morning report.

- `audits/`: one module per area, each only reads;
- `quarantine`: files staged instead of deleted, and put back (memory-block-migrate keeps its block
  copies here too);
- `row_count_history`: the daily row counts behind the report's growth figures;
- `report` and `report_render`: the morning report built, then rendered as text, markdown or JSON;
- `job`: the job's ``run(ctx)``.

Options: the ``nightly_selfcare`` section. Manifest: ``jobs/nightly-selfcare.yaml``.
Docs: docs/jobs/nightly-selfcare.md.
"""
