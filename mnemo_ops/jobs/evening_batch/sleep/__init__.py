"""The sleep stages of evening-batch (docs/sleep-stages.md).

After the summary repair and before the topic map, under the recall guard: reinforcement
(restatements confirm, proven contradictions close), prominence (decay), forgetting (archive, never
delete), edges (strengthening and downscaling of our own edges); and the adaptive triggers of
``run evening-batch --if-needed``. Their state lives in state.db (``store``), never in Mnemosyne's
tables; the edges they write have types beginning with ``mnemo:`` (``edges``).
"""
