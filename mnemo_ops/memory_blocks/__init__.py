"""Hermes' memory blocks (``$HERMES_HOME/memories/MEMORY.md`` and ``USER.md``) as files.

- `blocks`: the format (entries joined by ``"\\n§\\n"``, counted as Hermes counts them) and a safe
  read (no symlink followed, strict UTF-8, a size cap).
- `limits`: each block's character limit, from Hermes' ``config.yaml`` when it sets one.
- `hermes_lock`: Hermes' write convention (``fcntl.flock`` on ``<file>.lock``, re-read under it,
  temp file in the same folder, fsync, rename), so a rewrite of ours never loses the agent's.
- `in_prompt`: the entries of both blocks, as the agent receives them in every prompt (the eval
  and the recall guard count them as received).
- `entry_history`: first-seen dates and moves of entries, in state.db (the files keep no dates).

The migration that moves entries into Mnemosyne lives in ``mnemo_ops.jobs.memory_block_migrate``.
"""
