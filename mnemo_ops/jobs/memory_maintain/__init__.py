"""Canonical facts: the memory-maintain job's promotion of qualifying working memories into the
canonical lineage (``canonical_facts``, one current row per slot). `trigger` renders, installs and
reports the AFTER INSERT promotion trigger (sql/canonical_promotion.sql) that promotes rows as the
agent writes them; `backstop` applies the same rules to the rows the trigger never saw (written
before it was installed or while it was not, rows closed by time alone, bodies that changed)."""
