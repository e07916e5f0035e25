"""evening-batch: episodic consolidation, the summary repair, the sleep stages, then the maps.

- `consolidation/`: the step runner (`batch`), Mnemosyne's own sleep in a child process
  (`episodic`, `child`), the summary repair;
- `sleep/`: the sleep stages (reinforcement, importance, prominence and decay, forgetting, edges,
  NREM and REM) and the adaptive triggers of ``--if-needed``;
- `topics/`: the topic map and the seed map;
- `job`: the job's ``run(ctx)``, the steps in order.

Options: the ``evening_batch`` and ``sleep`` sections. Manifest: ``jobs/evening-batch.yaml``.
Docs: docs/jobs/evening-batch.md, docs/sleep-stages.md.
"""
