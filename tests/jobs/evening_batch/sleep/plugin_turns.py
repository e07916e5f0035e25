"""Turns written through the Hermes plugin's own ``sync_turn``, in a child process.

`write(layout, turns)` runs this file with the layout's environment (the 4.0 venv, where
``mnemosyne_hermes`` is installed): each session gets a new provider, initialised as Hermes
initialises it (``devtools.samples.hermes_conversations.PluginWriter``), then each turn is one
``sync_turn``; afterwards each turn's rows are moved `days_ago` days into the past in the line's own
time base, with what Mnemosyne derived from the write time (``hermes_conversations.backdate``).
A turn: ``{"session", "user", "assistant", "days_ago"}``. Returns the user rows' ids, in order.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from mnemo_ops.mnemosyne.sample_home import SampleLayout


def write(layout: SampleLayout, turns: list[dict]) -> list[str]:
    """Write `turns` into the home of `layout` (created when missing); the user rows' ids."""
    from devtools.samples.hermes_conversations import CONFIG_TEXT

    for folder in (
        layout.data_dir,
        layout.state_dir,
        layout.memory_blocks_dir,
        layout.directory / "home",
    ):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    config = layout.hermes_home / "config.yaml"
    if not config.exists():
        config.write_text(CONFIG_TEXT.format(roles="user, assistant"), encoding="utf-8")
    for block in ("MEMORY.md", "USER.md"):
        (layout.memory_blocks_dir / block).touch()
    environment = layout.environ()
    environment["MNEMOSYNE_NO_EMBEDDINGS"] = "1"
    completed = subprocess.run(
        [sys.executable, __file__, str(layout.hermes_home), str(layout.db_path)],
        input=json.dumps(turns),
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"writing through the plugin failed: {completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _write(hermes_home: Path, db_path: Path, turns: list[dict]) -> list[str]:
    from devtools.samples.hermes_conversations import PluginWriter, backdate

    writer = PluginWriter(hermes_home, db_path)
    ids, ages = [], {}
    session = None
    for turn in turns:
        if turn["session"] != session:
            if session is not None:
                writer.end()
            session = turn["session"]
            writer.start(session)
        found = writer.write(session, turn["user"], turn["assistant"])
        ids.append(found.get("user"))
        for memory_id in found.values():
            ages[memory_id] = turn.get("days_ago", 0)
    writer.end()
    writer.close()
    connection = sqlite3.connect(db_path)
    try:
        stamps = dict(connection.execute("SELECT id, timestamp FROM working_memory"))
        backdate(
            connection,
            {
                memory_id: datetime.fromisoformat(stamps[memory_id]) - timedelta(days=days)
                for memory_id, days in ages.items()
                if days and memory_id in stamps
            },
        )
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return ids


if __name__ == "__main__":
    import contextlib

    request = json.loads(sys.stdin.read())
    with contextlib.redirect_stdout(sys.stderr):
        result = _write(Path(sys.argv[1]), Path(sys.argv[2]), request)
    print(json.dumps(result))
