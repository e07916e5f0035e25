"""memory-block-migrate: keep Hermes' MEMORY.md and USER.md under their limits without losing an entry.

Entries move into Mnemosyne (stored through its API, recalled by their own text before they leave
the file) once a block passes ``memory_block_migrate.high_water`` of its limit, until it is under
``low_water``; the file is rewritten under Hermes' own lock after a copy went into quarantine. The
work lives in ``mnemo_ops.jobs.memory_block_migrate`` (the file format and Hermes' lock in
``mnemo_ops.memory_blocks``).
"""

from __future__ import annotations

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.jobs.memory_block_migrate import migration


def run(ctx: JobContext) -> JobResult:
    """Move the least valuable entries of a full block into Mnemosyne, verified first."""
    return migration.run(ctx)
