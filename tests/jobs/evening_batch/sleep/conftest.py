"""Helpers for the sleep-stage tests: settings for a home, the sleep steps run through the real runner
(its lock, ledger and state), and read-only looks at the database (apsw, opened and closed)."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

import pytest

from mnemo_ops import database, jobs
from mnemo_ops.core import runner
from mnemo_ops.jobs.evening_batch.consolidation.batch import Step, run_steps
from mnemo_ops.jobs.evening_batch.sleep import steps
from mnemo_ops.settings import load_settings

SLEEP_STEPS = (
    Step("reinforcement", steps.reinforcement_step),
    Step("prominence", steps.prominence_step),
    Step("forgetting", steps.forgetting_step),
    Step("edges", steps.edges_step),
)
IMPORTANT = [
    "Dana is allergic to penicillin and must never be given it",
    "Dana's daughter Mira was born on 14 March 2019 in Bergen",
    "Dana works as a structural engineer at Halden Bridges",
    "Dana's passport number ends in 4471 and expires in 2031",
    "Dana prefers meetings before eleven in the morning, never after lunch",
]
CHATTER = [
    "haha that is funny",
    "ok sounds good",
    "thanks a lot",
    "what a day",
    "see you later",
    "lol right",
    "good morning!",
    "oh nice",
    "hmm okay",
    "awesome, thank you 🙂",
]
"""Content-free turns: greetings, acknowledgements, fillers (``database.facts.is_chatter`` holds
for each pair of them), the noise forgetting exists for."""


def chatter(number: int) -> str:
    """The `number`-th distinct chatter turn: two phrases of `CHATTER` (100 distinct turns)."""
    first, second = divmod(number, len(CHATTER))
    return f"{CHATTER[first % len(CHATTER)]}, {CHATTER[second]}"


def settings_for(layout, tmp_path: Path, config: str = ""):
    """Settings for `layout`, with a config file holding `config` (YAML)."""
    path = tmp_path / f"config-{abs(hash(config))}.yaml"
    path.write_text(config or "{}\n", encoding="utf-8")
    return load_settings(
        db=layout.db_path, state_dir=layout.state_dir, config=path, environ=layout.environ()
    )


def run_sleep(settings, dry_run: bool = False):
    """The four sleep steps alone, through the real runner (lock, ledger row), the recall guard off:
    the guard's trial of these stages is tested through the whole job (``jobs.run_job``)."""
    return runner.run_job(
        settings.updated(guard={"enabled": False}),
        "evening-batch",
        lambda ctx: run_steps(ctx, SLEEP_STEPS),
        dry_run=dry_run,
        show_progress=False,
        hooks=jobs.HOOKS,
    )


def query(db_path: Path, sql: str, parameters=()) -> list[tuple]:
    """Rows of a read-only query on the memory database."""
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return [tuple(row) for row in connection.execute(sql, parameters)]
    finally:
        connection.close()


def live_working_ids(db_path: Path) -> set[str]:
    """Ids of the live working memories at Python's (possibly frozen) local time."""
    return {
        row[0]
        for row in query(
            db_path,
            "SELECT id FROM working_memory WHERE (superseded_by IS NULL OR superseded_by = '') "
            "AND (valid_until IS NULL OR valid_until > ?)",
            (datetime.now().isoformat(),),
        )
    }


def row_counts(db_path: Path) -> dict[str, int]:
    """Row counts of the memory tables (nothing may ever be deleted)."""
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return {
            table: count
            for table, count in database.row_counts(connection).items()
            if count is not None
        }
    finally:
        connection.close()


EXPERIMENT_AGE_DAYS = 90
"""The experiment's memories are written this long ago; its first night runs right after them (a
frozen clock), its second at the real now, when the stamps it writes are real for every process
(Mnemosyne's recall in the guard's worker included)."""


def experiment_spec(seed: int = 3, noise: int = 50) -> dict:
    """The forgetting experiment: 5 important stated memories and `noise` chit-chat ones."""
    rng = random.Random(seed)
    memories = [
        {
            "key": f"important-{number}",
            "content": text,
            "source": "user",
            "importance": 0.85 + 0.02 * number,
            "veracity": "stated",
            "session": "s1",
            "days_ago": EXPERIMENT_AGE_DAYS,
        }
        for number, text in enumerate(IMPORTANT)
    ]
    for number in range(noise):
        memories.append(
            {
                "key": f"noise-{number}",
                "content": chatter(number),
                "source": "conversation",
                "importance": round(rng.uniform(0.05, 0.3), 2),
                "session": f"s{1 + number % 3}",
                "days_ago": EXPERIMENT_AGE_DAYS,
            }
        )
    return {"memories": memories}


@pytest.fixture(scope="session")
def experiment_template(tmp_path_factory):
    """The forgetting experiment's home, written once by the real Mnemosyne API."""
    from tests.jobs.evening_batch.sleep.homes import build

    return build(tmp_path_factory.mktemp("experiment-template") / "home", experiment_spec())


@pytest.fixture
def experiment(experiment_template, tmp_path):
    """A private copy of the experiment home and its ids by key."""
    from tests.conftest import copy_sample

    layout, ids = experiment_template
    return copy_sample(layout, tmp_path / "experiment"), ids
