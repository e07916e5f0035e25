"""What the assistant learned recently: the lessons stored or confirmed since a moment (read-only),
for the morning report's "learned this week"."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.jobs.self_reflection.lessons import METADATA_MARKER, SOURCE


def learned_since(
    connection: apsw.Connection, since: datetime, limit: int = 30
) -> list[dict[str, Any]]:
    """Live lessons first learned or last confirmed at or after local time `since`, newest first."""
    if "working_memory" not in database.table_names(connection):
        return []
    found = []
    for row in database.fetch_dicts(
        connection,
        "SELECT id, metadata_json FROM working_memory WHERE source = ? AND "
        f"{database.live_condition(now='?')} AND json_valid(metadata_json) AND "
        "json_extract(metadata_json, '$.\"' || ? || '\".key') IS NOT NULL AND "
        "max(COALESCE(json_extract(metadata_json, '$.first_learned'), ''), "
        "COALESCE(json_extract(metadata_json, '$.last_confirmed'), '')) >= ?",
        (SOURCE, datetime.now().isoformat(), METADATA_MARKER, since.isoformat()),
    ):
        metadata = json.loads(row["metadata_json"])
        first = metadata.get("first_learned") or ""
        found.append(
            {
                "memory_id": row["id"],
                "kind": metadata.get("kind"),
                "slot": metadata.get("slot"),
                "lesson": (metadata.get(METADATA_MARKER) or {}).get("body"),
                "method": metadata.get("method"),
                "confirmations": metadata.get("confirmations"),
                "new": first >= since.isoformat(),
                "when": max(first, metadata.get("last_confirmed") or ""),
            }
        )
    found.sort(key=lambda entry: (entry["when"], entry["memory_id"]), reverse=True)
    return found[:limit]
