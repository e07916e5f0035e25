"""The model layer: summaries, judgements and reflections from a pluggable model, with honest fallbacks.

When the config names a model (``models.model``, an id the `llm <https://llm.datasette.io>`_ library
knows, through any of its plugins), a task asks it through `ModelLayer.ask`; otherwise, or when the
model cannot answer, the task uses its own deterministic fallback. Every row a task stores says which
one made it: ``"method": "extractive"`` or the model id (`ModelLayer.method`).

What `ModelLayer.ask` guarantees, whatever the task:

- **Privacy.** Evidence marked private (`Evidence.private`, see `evidence.is_private_row`) never goes
  to a remote model (``models.remote``, true unless the config says the model runs on this machine)
  unless ``models.send_private_to_remote`` allows it; it is returned as withheld, for the fallback.
- **Secrets.** Every text (instructions and evidence) is redacted with the patterns of
  ``mnemo_ops.models.redaction`` (token shapes and the values stored in Hermes' auth files) first.
- **Budget.** At most ``models.calls_per_night`` calls and ``models.seconds_per_night`` seconds per
  night (noon to noon, local time), all jobs together, counted in state.db (``model_usage``); each call
  is abandoned after ``models.timeout_seconds``.
- **Answers.** The answer must be JSON that the task's validator accepts; a malformed answer is asked
  for once more, then the request is skipped and counted (never an exception: the run goes on).
- **Once.** Valid answers are kept by a hash of (model, options, prompt), in the process and in
  state.db (``model_answers``): the recall guard's trial and the live run get the same answer (one
  call), and a run killed and started again asks nothing twice.

Usage (a task)::

    layer = ModelLayer.open(settings, state_db, job="self-reflection", dry_run=ctx.dry_run)
    answer = layer.ask(Request(task="reflection", system=..., instructions=..., evidence=[...],
                               validate=parse_lessons))
    if answer.ok: use(answer.value)           # answer.method is the model id
    else: fallback(answer.withheld or all)    # answer.reason: budget, malformed, failed, ...
    ctx.result.stats["model"] = layer.stats()

Modules: ``config`` (the ``models`` settings), ``evidence`` (what may be sent, privacy), ``usage``
(the per-night budget and the answer store in state.db), ``backend`` (the llm call with its timeout),
``answers`` (JSON out of a model's reply), ``layer`` (`ModelLayer`).
"""

from __future__ import annotations

from mnemo_ops.models.answers import MalformedAnswer
from mnemo_ops.models.config import EXTRACTIVE
from mnemo_ops.models.evidence import Evidence, is_private_row
from mnemo_ops.models.layer import Answer, ModelLayer, Request

__all__ = [
    "EXTRACTIVE",
    "Answer",
    "Evidence",
    "MalformedAnswer",
    "ModelLayer",
    "Request",
    "is_private_row",
]
