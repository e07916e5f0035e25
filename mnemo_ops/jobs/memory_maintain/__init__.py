"""memory-maintain: canonical facts promoted, then orphan memories linked.

- `trigger`: the AFTER INSERT promotion trigger (sql/canonical_promotion.sql) that promotes
  qualifying rows into ``canonical_facts`` (one current row per slot) as the agent writes them:
  rendered, installed and reported;
- `backstop`: the same rules for the rows the trigger never saw (written before it was installed or
  while it was not, rows closed by time alone, bodies that changed);
- `orphans`: ``related_to`` edges from live working memories with no graph edge to their best FTS5
  matches, as Mnemosyne's own proactive linking makes them, so associative recall reaches them;
- `job`: the job's ``run(ctx)``.

Options: the ``memory_maintain`` section. Manifest: ``jobs/memory-maintain.yaml``.
Docs: docs/jobs/memory-maintain.md.
"""
