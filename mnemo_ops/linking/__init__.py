"""Graph links for associative recall: `orphans` gives live working memories that have no graph edge
``related_to`` edges to their best FTS5 matches, following Mnemosyne's own proactive linking, so
that ``recall_enhanced(..., use_associative=True)`` can reach them through their neighbours."""
