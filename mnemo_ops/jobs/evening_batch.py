"""evening-batch: episodic consolidation, then the topic map and the seed map, then freshness checks.

The steps run in order. A failing step is recorded with its error and the later steps still run;
the job then fails (exit 1) with every step's error collected, as borgmatic does, so monitoring sees
it. The sleep stages of DESIGN section 5 (decay, forgetting, Hebbian/downscaling, NREM, REM) slot in
as further steps between consolidation and the topic map.
"""

from __future__ import annotations

from mnemo_ops.consolidation import steps as memory_steps
from mnemo_ops.consolidation.batch import Step, run_steps
from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult
from mnemo_ops.topics import steps as map_steps

STEPS: tuple[Step, ...] = (
    Step("consolidation", memory_steps.consolidation_step),
    Step("summary-repair", memory_steps.summary_repair_step),
    # The sleep stages of DESIGN section 5 go here, each its own Step, so they see the new episodic rows
    # and the maps below see what they changed.
    Step("topic-map", map_steps.topic_map_step),
    Step("seed-map", map_steps.seed_map_step),
    Step("freshness", map_steps.freshness_step),
)


def run(ctx: JobContext) -> JobResult:
    """Run the evening batch (see the module docstring)."""
    return run_steps(ctx, STEPS)
