"""The NREM/REM test home and helpers: two related clusters linked as orphan linking links them,
chatter with no edges, written by the real Mnemosyne API (``homes.build``), and a night of all six
sleep steps through the real runner."""

from __future__ import annotations

import sqlite3

from mnemo_ops import jobs
from mnemo_ops.core import runner
from mnemo_ops.jobs.evening_batch.consolidation.batch import Step, run_steps
from mnemo_ops.jobs.evening_batch.sleep import dream_steps
from tests.jobs.evening_batch.sleep.conftest import CHATTER, SLEEP_STEPS

NIGHT_STEPS = (
    *SLEEP_STEPS,
    Step("nrem", dream_steps.nrem_step),
    Step("rem", dream_steps.rem_step),
)
BRIDGE = [
    "Dana inspects the Halden bridge girders every spring with Henrik.",
    "The Halden bridge inspection on 14 April 2025 found rust on girder 7.",
    "Henrik ordered new bolts for girder 7 of the Halden bridge, 240 of them.",
    "Dana wants the girder 7 repair on the Halden bridge finished before June.",
]
GARDEN = [
    "Mira planted basil and tomatoes in the greenhouse in Bergen.",
    "The greenhouse tomatoes in Bergen caught blight in August.",
    "Mira sprayed copper on the greenhouse tomatoes twice a week.",
]


def dream_spec() -> dict:
    """Cluster "bridge" (session s1), cluster "garden" (session s2), ten chatter rows (s3)."""
    memories = []
    for group, texts, session in (("bridge", BRIDGE, "s1"), ("garden", GARDEN, "s2")):
        for number, text in enumerate(texts):
            memories.append(
                {
                    "key": f"{group}-{number}",
                    "content": text,
                    "session": session,
                    "source": "conversation",
                    "importance": 0.5 + 0.05 * number,
                    "days_ago": 3 - 0.01 * number,
                }
            )
    for number, text in enumerate(CHATTER):
        memories.append(
            {
                "key": f"chatter-{number}",
                "content": f"{text} {number}",
                "session": "s3",
                "importance": 0.3,
                "days_ago": 2,
            }
        )
    return {"memories": memories}


def link_chains(db_path, ids: dict[str, str]) -> None:
    """related_to edges along each cluster (a chain: ends two or more hops apart), as orphan
    linking writes them."""
    connection = sqlite3.connect(db_path)
    with connection:
        for group, size in (("bridge", len(BRIDGE)), ("garden", len(GARDEN))):
            for number in range(size - 1):
                connection.execute(
                    "INSERT INTO graph_edges (source, target, edge_type, weight, timestamp) "
                    "VALUES (?, ?, 'related_to', 0.9, datetime('now'))",
                    (ids[f"{group}-{number}"], ids[f"{group}-{number + 1}"]),
                )
    connection.close()


def set_scope(db_path, ids: list[str], scope: str) -> None:
    """Give these working rows `scope` (``global`` rows may go to a remote model)."""
    connection = sqlite3.connect(db_path)
    with connection:
        connection.executemany(
            "UPDATE working_memory SET scope = ? WHERE id = ?", [(scope, i) for i in ids]
        )
    connection.close()


def run_night(settings, dry_run: bool = False):
    """All six sleep steps through the real runner (lock, ledger), the recall guard off."""
    return runner.run_job(
        settings.updated(guard={"enabled": False}),
        "evening-batch",
        lambda ctx: run_steps(ctx, NIGHT_STEPS),
        dry_run=dry_run,
        show_progress=False,
        hooks=jobs.HOOKS,
    )
