"""Checkpoints of the memory database: create (one read snapshot), verify, list, retain, restore.

A checkpoint is a folder ``<state_dir>/backups/<name>/`` holding ``mnemosyne.db``, ``state.db``,
``memory_blocks/`` and ``manifest.json`` (docs/contracts.md, "Checkpoints"). The backup job
(``mnemo_ops.jobs.backup.job``) and the ``backup`` commands are thin layers over these modules.
"""
