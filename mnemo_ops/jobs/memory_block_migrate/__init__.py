"""memory-block-migrate: keep Hermes' MEMORY.md and USER.md under their limits without losing an
entry.

- `plan`: which entries move (least valuable first: oldest first-seen; never a kept one, never the
  last entry of the file) until the block is under its low water mark;
- `stored_rows`: the entries already in the database, found by the key kept in their metadata;
- `store` + `store_worker`: store entries through Mnemosyne's API in a child process, exactly once;
- `verify`: recall each stored entry by its own text, as the Hermes plugin would, in a child process;
- `rewrite`: take the verified entries out of the file under Hermes' lock, after a copy of the file
  went into quarantine (nightly-selfcare's `quarantine`);
- `migration`: one run, step by step; `job`: the job's ``run(ctx)``.

Options: the ``memory_block_migrate`` section. Manifest: ``jobs/memory-block-migrate.yaml``.
Docs: docs/jobs/memory-block-migrate.md.
"""
