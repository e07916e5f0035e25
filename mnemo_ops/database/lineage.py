"""Lineage: which current rows were derived from which row, the one definition every reader shares.

A row is *derived from* another (its origin) when one of these says so:

- an episodic row's ``summary_of`` (a comma-separated list of origin ids: Mnemosyne's consolidation
  and the sleep stages' summaries);
- a row's metadata ``derived_from`` or ``summary_of`` (a list of ids, or one comma-separated string:
  distilled and graduated rows);
- a ``mnemo:derives`` graph edge from the derived row (``source``) to its origin (``target``);
- a canonical fact whose ``source`` is ``auto:<id>,<id>...`` (the facts the canonical trigger promotes),
  named ``canonical:<owner>/<category>/<name>`` as the eval's engine names a fact's line.

Only current rows count as derived (not closed with ``valid_until``, not superseded): a closed
summary carries nothing to anyone. Derivation is followed transitively (a summary of a distilled row
of the evidence is derived from the evidence).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import apsw

from mnemo_ops.database import column_names, table_names

AUTO_PREFIX = "auto:"
"""How a promoted canonical fact names the rows it came from: ``auto:<id>,<id>``."""
DERIVES_EDGE = "mnemo:derives"
"""The graph edge from a derived row to its origin."""
METADATA_KEYS = ("derived_from", "summary_of")
"""Metadata keys that list a row's origins."""


def auto_sources(source: str | None) -> list[str]:
    """The origin ids a canonical fact's ``source`` names (``auto:a,b`` -> ``[a, b]``), else []."""
    text = str(source or "")
    if not text.startswith(AUTO_PREFIX):
        return []
    return split_ids(text[len(AUTO_PREFIX) :])


def split_ids(value: object) -> list[str]:
    """Ids from a list, or from one comma-separated string; blanks dropped."""
    if isinstance(value, (list, tuple)):
        parts = [str(item) for item in value]
    elif value is None:
        parts = []
    else:
        parts = str(value).split(",")
    return [part.strip() for part in parts if part.strip()]


def canonical_name(owner: object, category: object, name: object) -> str:
    """How a canonical fact's line is named when no row stands for it."""
    return f"canonical:{owner}/{category}/{name}"


def metadata_origins(metadata: object) -> list[str]:
    """The origin ids a row's ``metadata_json`` names (``METADATA_KEYS``); none when it is not a
    JSON object."""
    try:
        data = json.loads(metadata) if isinstance(metadata, str) and metadata else {}
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    return [origin for key in METADATA_KEYS for origin in split_ids(data.get(key))]


def _current(columns: set[str]) -> str:
    """SQL conditions for a row still current, with the columns this table has."""
    conditions = []
    if "valid_until" in columns:
        conditions.append("(valid_until IS NULL OR valid_until = '')")
    if "superseded_by" in columns:
        conditions.append("(superseded_by IS NULL OR superseded_by = '')")
    return " AND ".join(conditions) or "1"


def derivations(connection: apsw.Connection) -> dict[str, set[str]]:
    """Origin id -> the ids of the current rows derived directly from it (see the module docstring)."""
    derived: dict[str, set[str]] = {}
    tables = table_names(connection)
    alive_in: dict[str, str] = {}

    def add(origin: str, row: str) -> None:
        if origin and row and origin != row:
            derived.setdefault(origin, set()).add(row)

    for table in ("working_memory", "episodic_memory"):
        if table not in tables:
            continue
        columns = set(column_names(connection, table))
        alive = _current(columns)
        alive_in[table] = alive
        if "summary_of" in columns:
            for row_id, summary_of in connection.execute(
                f"SELECT id, summary_of FROM {table} WHERE {alive} AND coalesce(summary_of, '') != ''"
            ):
                for origin in split_ids(summary_of):
                    add(origin, str(row_id))
        if "metadata_json" in columns:
            # Only rows whose metadata names an origin are parsed (a LIKE on the text first).
            for row_id, metadata in connection.execute(
                f"SELECT id, metadata_json FROM {table} WHERE {alive} AND "
                "(metadata_json LIKE '%derived_from%' OR metadata_json LIKE '%summary_of%')"
            ):
                for origin in metadata_origins(metadata):
                    add(origin, str(row_id))
    if "graph_edges" in tables and alive_in:
        # The derived end must be a current row of either table (looked up by its id, not read
        # into memory: a large home has millions of rows).
        exists = " OR ".join(
            f"EXISTS (SELECT 1 FROM {table} WHERE {table}.id = e.source AND {alive})"
            for table, alive in alive_in.items()
        )
        for source, target in connection.execute(
            f"SELECT e.source, e.target FROM graph_edges e WHERE e.edge_type = ? AND ({exists})",
            (DERIVES_EDGE,),
        ):
            add(str(target), str(source))
    if "canonical_facts" in tables:
        columns = set(column_names(connection, "canonical_facts"))
        for owner, category, name, source in connection.execute(
            "SELECT owner_id, category, name, source FROM canonical_facts "
            f"WHERE {_current(columns)} AND source LIKE 'auto:%'"
        ):
            for origin in auto_sources(source):
                add(origin, canonical_name(owner, category, name))
    return derived


def derived_from_any(derived: dict[str, set[str]], origins: Iterable[str]) -> set[str]:
    """Every current row derived from any of `origins`, following derivation transitively
    (`derived` is what `derivations` returned); the origins themselves are not included."""
    found: set[str] = set()
    frontier = [str(origin) for origin in origins]
    seen = set(frontier)
    while frontier:
        origin = frontier.pop()
        for row in derived.get(origin, ()):
            if row not in seen:
                seen.add(row)
                found.add(row)
                frontier.append(row)
    return found
