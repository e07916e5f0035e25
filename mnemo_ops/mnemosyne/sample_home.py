"""Build the sample Hermes home with a Mnemosyne database written by the real mnemosyne-memory API.

Used by ``mnemo-ops demo`` and by the tests. The layout is the one a real user has::

    <dir>/hermes/                         HERMES_HOME
    <dir>/hermes/memories/MEMORY.md       memory blocks (Hermes format, entries split by "\\n§\\n")
    <dir>/hermes/mnemosyne/data/mnemosyne.db
    <dir>/hermes/mnemosyne/mnemo-ops/     our state dir (default: beside data/)
    <dir>/hermes/mnemosyne/mnemo-ops/queue/new/   a few captured items waiting for bridge-drain

The database is written in a child process whose environment points Mnemosyne at <dir> only, because
importing Mnemosyne initialises a database at its default path (docs/mnemosyne.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo_ops.foundation.child_process import ChildProcessFailed, child_main, run_child
from mnemo_ops.foundation.resources import resource_dir
from mnemo_ops.mnemosyne.api import mnemosyne_environment


@dataclasses.dataclass(frozen=True)
class SampleLayout:
    """Paths of a built sample home."""

    directory: Path

    @property
    def hermes_home(self) -> Path:
        """HERMES_HOME of the sample."""
        return self.directory / "hermes"

    @property
    def data_dir(self) -> Path:
        """Mnemosyne's data folder (MNEMOSYNE_DATA_DIR)."""
        return self.hermes_home / "mnemosyne" / "data"

    @property
    def db_path(self) -> Path:
        """The sample mnemosyne.db."""
        return self.data_dir / "mnemosyne.db"

    @property
    def state_dir(self) -> Path:
        """Our state dir, where the default rule puts it (beside data/)."""
        return self.hermes_home / "mnemosyne" / "mnemo-ops"

    @property
    def memory_blocks_dir(self) -> Path:
        """Where Hermes keeps MEMORY.md and USER.md."""
        return self.hermes_home / "memories"

    def environ(
        self, base: dict[str, str] | None = None, variables: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """An environment in which Mnemosyne and mnemo-ops find this sample and nothing else
        (with `variables`, ``MNEMOSYNE_*`` settings, for a child that writes it)."""
        env = mnemosyne_environment(
            self.data_dir,
            self.hermes_home,
            home=self.directory / "home",
            variables=variables,
            base=base,
        )
        for name in ("MNEMO_OPS_DB", "MNEMO_OPS_STATE_DIR", "MNEMO_OPS_CONFIG", "XDG_CONFIG_HOME"):
            env.pop(name, None)
        return env


def backdate(db_path: Path, ages: list[tuple[str, str]]) -> None:
    """Give rows written through Mnemosyne's API the times of the conversation they stand for.

    `ages` holds (memory id, ISO time). Mnemosyne stamps every row "now"; an aged home needs its
    turns spread over the past (working_memory and its legacy ``memories`` twin), then the WAL
    checkpointed into the file so a copy of the file alone is complete.
    """
    connection = sqlite3.connect(db_path)
    with connection:
        connection.executemany(
            "UPDATE working_memory SET timestamp = ?2, created_at = ?2 WHERE id = ?1", ages
        )
        connection.executemany("UPDATE memories SET timestamp = ?2 WHERE id = ?1", ages)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def copy_home(template: SampleLayout, target: Path) -> SampleLayout:
    """A private copy of a built home (sample, conversations, realistic), pointed at itself.

    Mnemosyne 3.15 seeds config.yaml with the home's absolute data_dir, and its config wins over the
    environment: the copy's is rewritten so nothing run on the copy writes into the original.
    """
    shutil.copytree(template.directory, target, symlinks=True)
    layout = SampleLayout(Path(target))
    config = layout.data_dir / "config.yaml"
    if config.exists():  # 4.0 reads it only when present and never seeds it
        config.write_text(config.read_text().replace(str(template.data_dir), str(layout.data_dir)))
    return layout


def conversations_file() -> Path:
    """The sample conversations (fixtures/conversations/sample.json)."""
    return resource_dir("fixtures") / "conversations" / "sample.json"


def build_sample(
    directory: Path, python: str | Path | None = None, environment: dict[str, str] | None = None
) -> SampleLayout:
    """Build the sample home in `directory` (created if needed; must not already hold a sample).

    `python` writes the database with another interpreter's Mnemosyne (tests: a database written by
    the other Mnemosyne line), which must find mnemo-ops through `environment` (e.g. PYTHONPATH).
    """
    layout = SampleLayout(Path(directory).absolute())
    if layout.db_path.exists():
        raise FileExistsError(f"a sample database already exists at {layout.db_path}")
    (layout.directory / "home").mkdir(parents=True, exist_ok=True)
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        run_child(
            "mnemo_ops.mnemosyne.sample_home",
            {"directory": str(layout.directory)},
            timeout=None,
            environment={**layout.environ(), **(environment or {})},
            python=python,
        )
    except ChildProcessFailed as error:
        raise error.with_context(f"writing the sample database in {layout.directory}") from None
    _install_memory_blocks(layout)
    _install_queue_items(layout)
    return layout


def _install_memory_blocks(layout: SampleLayout) -> None:
    layout.memory_blocks_dir.mkdir(parents=True, exist_ok=True)
    for block in ("MEMORY.md", "USER.md"):
        shutil.copyfile(resource_dir("memory_blocks") / block, layout.memory_blocks_dir / block)


def _install_queue_items(layout: SampleLayout) -> None:
    queue = layout.state_dir / "queue"
    for sub in ("tmp", "new", "cur", "failed"):
        (queue / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(layout.state_dir, 0o700)
    os.chmod(queue, 0o700)
    for item in sorted((resource_dir("fixtures") / "queue").iterdir()):
        if item.suffix in (".json", ".jsonl"):
            shutil.copyfile(item, queue / "new" / item.name)


def _write_database(request: dict[str, Any]) -> None:
    """Runs in the child process: write every memory through Mnemosyne, then age the timestamps."""
    from mnemosyne.core.memory import Mnemosyne

    layout = SampleLayout(Path(request["directory"]))

    sample = json.loads(conversations_file().read_text(encoding="utf-8"))
    now = datetime.now()
    ages: list[tuple[str, str]] = []
    for session in sample["sessions"]:
        memory = Mnemosyne(session_id=session["session_id"], db_path=layout.db_path)
        start = now - timedelta(days=session["days_ago"], hours=2)
        for position, item in enumerate(session["memories"]):
            memory_id = memory.remember(
                item["content"],
                source=item.get("source", "conversation"),
                importance=item.get("importance", 0.5),
                veracity=item.get("veracity", "unknown"),
                metadata={"sample": True},
            )
            if memory_id and session["days_ago"]:
                ages.append((memory_id, (start + timedelta(minutes=3 * position)).isoformat()))
    # Age the rows as if they had been written on those days (timestamps are Mnemosyne's naive local ISO).
    backdate(layout.db_path, ages)


if __name__ == "__main__":
    child_main(_write_database)
