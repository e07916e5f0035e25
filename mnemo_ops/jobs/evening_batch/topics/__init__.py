"""The topic map (live memories clustered by salient terms) and the seed map (per topic, its strongest memories).

- `memories.py`: the live working and episodic memories, with a content fingerprint each.
- `changes.py`: which memories changed since the map was built (an anti-join inside SQLite).
- `clustering.py`: salient terms per memory, the full build and the incremental update.
- `seeds.py`: the seed map (canonical-backed first, then importance, recall count, recency).
- `store.py`: both maps in state.db.
- `freshness.py`: stale-map and stale-memory-block findings.
- `report.py`: ``reports/topics.md`` and the data ``mnemo-ops topics`` shows.
"""
