"""What ``mnemo-ops topics`` shows and what ``reports/topics.md`` holds: both maps and their freshness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mnemo_ops import database
from mnemo_ops.core import state
from mnemo_ops.foundation.private_files import write_atomic
from mnemo_ops.jobs.evening_batch.topics import freshness, store
from mnemo_ops.jobs.evening_batch.topics.changes import diff_since_map
from mnemo_ops.settings import Settings

REPORT_NAME = "topics.md"


def unclustered_count(db) -> int:
    """Memories on the map that belong to no topic."""
    if db is None or "topic_members" not in db.table_names():
        return 0
    return db.execute("SELECT count(*) FROM topic_members WHERE topic IS NULL").fetchone()[0]


def maps_data(db) -> dict[str, Any]:
    """Both stored maps as plain data (state.db may be None: nothing built yet)."""
    topic_build = store.load_build(db, store.TOPIC_MAP)
    seed_build = store.load_build(db, store.SEED_MAP)
    return {
        "topic_map": {
            "built_at": (topic_build or {}).get("built_at"),
            "full_build_at": (topic_build or {}).get("full_build_at"),
            "mode": (topic_build or {}).get("mode"),
            "live_memories": (topic_build or {}).get("live_memories"),
            "unclustered": unclustered_count(db),
            "topics": store.load_topics(db),
        },
        "seed_map": {
            "built_at": (seed_build or {}).get("built_at"),
            "topics": store.load_seeds(db),
        },
    }


def collect(settings: Settings) -> dict[str, Any]:
    """Read-only overview for ``mnemo-ops topics``: both maps and the freshness findings."""
    connection = database.open_memory_db(settings.db_path, readonly=True)
    db = state.open_state_readonly(settings.state_db_path)
    try:
        data = maps_data(db)
        findings, figures = freshness.map_staleness(
            diff_since_map(connection, settings.state_db_path),
            store.load_build(db, store.TOPIC_MAP),
            store.load_build(db, store.SEED_MAP),
            settings.evening_batch.stale_fraction,
        )
        findings += freshness.stale_block_entries(
            connection,
            settings.memory_blocks_dir,
            settings.owner,
            settings.evening_batch.block_match_similarity,
        )
    finally:
        connection.close()
        if db is not None:
            db.conn.close()
    data["freshness"] = figures
    data["warnings"] = [finding.to_dict() for finding in findings]
    return data


def render_markdown(data: dict[str, Any]) -> str:
    """``reports/topics.md``: every topic with its terms and its seeds."""
    topic_map, seed_map = data["topic_map"], data["seed_map"]
    lines = ["# Topic map", ""]
    lines.append(
        f"Built {topic_map['built_at'] or 'never'} ({topic_map['mode'] or '-'}; last full build "
        f"{topic_map['full_build_at'] or '-'}), {topic_map['live_memories'] or 0} live memories, "
        f"{len(topic_map['topics'])} topics, {topic_map['unclustered']} memories in no topic."
    )
    lines.append(f"Seed map built {seed_map['built_at'] or 'never'}.")
    lines.append("")
    for topic in topic_map["topics"]:
        aliases = f" (also: {', '.join(topic['aliases'])})" if topic["aliases"] else ""
        lines.append(f"## {topic['label']}{aliases}")
        lines.append("")
        lines.append(f"{topic['size']} memories; terms: {', '.join(topic['terms'])}")
        lines.append("")
        for rank, seed in enumerate(seed_map["topics"].get(topic["label"], []), start=1):
            marker = " [canonical]" if seed["canonical"] else ""
            lines.append(
                f"{rank}. `{seed['key']}`{marker} (importance {seed['importance']:.2f}, "
                f"recalled {seed['recall_count']}×) {seed['preview']}"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_report(reports_dir: Path, text: str) -> bool:
    """Write ``topics.md`` atomically (temp file + rename); False when it already says exactly this."""
    target = reports_dir / REPORT_NAME
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        return False
    reports_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(target, text.encode("utf-8"))
    return True
