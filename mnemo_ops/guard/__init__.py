"""The recall guard: maintenance must never make recall worse (docs/recall-guard.md).

A job whose manifest says ``guard: recall`` is first run on a trial copy of the database (one read
snapshot, with copies of state.db and the memory blocks); recall is measured on that copy before and
after, the way the agent gets it (``evaluation.engines``: the Hermes plugin's prefetch when a Hermes
home is found), on the probe set kept in state.db and on the user's eval suite when one is
configured. Only a change that keeps recall within tolerance is then made on the live database; a
refused change never touches it.

- ``probes``: known-item probes built from live memories, stratified over sessions and sources.
- ``measure``: recall of probes and suite cases on one copy of the database.
- ``verdict``: before against after, with the tolerances of the ``guard`` config section.
- ``history``: every decision in state.db (the report's trend; refusals are not retried unchanged).
- ``recall_guard``: the runner's hook that does the trial.
"""
