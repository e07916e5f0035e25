"""self-reflection: the week's sessions become lessons the assistant keeps as its own notes.

The flow of a run (``run.run_reflection``):

1. ``week``: once per ISO week (the run ledger); ``--force`` runs again.
2. ``sessions``: the sessions that went idle since last week's run: Mnemosyne's working rows and
   summaries by session, and Hermes' session store when the Hermes home has one (read-only).
3. Lessons of four kinds (``lessons.KINDS``): from the model (``prompting``: one composite prompt per
   batch of sessions, a validated JSON answer) through the model layer (``mnemo_ops.models``), and
   from the deterministic ``extractor`` where there is no model, or for what the model was not shown
   (private evidence and a remote model) or did not answer.
4. ``plan``: merged, then matched against the stored lessons: new, reinforcing (new evidence ids only),
   superseding (same slot, different body), with each lesson's canonical fact in ``lesson:<kind>``.
5. ``apply`` + ``child``: the writes, through Mnemosyne's own API in a child process.

A lesson is stored as the assistant's own note: source ``reflection``, veracity ``inferred``,
trust tier ``DERIVED``, scope ``global``, never promoted as user-stated (the canonical promotion
trigger takes only ``user``/``fact`` rows with veracity ``stated``). `learned` gives the morning
report what was learned this week; `job` is the job's ``run(ctx)``.

Options: the ``self_reflection`` and ``models`` sections. Manifest: ``jobs/self-reflection.yaml``.
Docs: docs/jobs/self-reflection.md.
"""
