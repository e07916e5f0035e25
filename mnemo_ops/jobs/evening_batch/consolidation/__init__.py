"""Episodic consolidation through Mnemosyne's own sleep, run in a child process.

`episodic.py` is the parent side (plan, environment, snapshot for dry runs, result parsing);
`child.py` is the entry point the child runs (``python -m mnemo_ops.jobs.evening_batch.consolidation.child``).
"""
