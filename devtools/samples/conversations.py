"""An aged, multi-session conversation home written through Mnemosyne's own API, with an eval suite.

For the recall guard's tests and ``benchmarks/recall_quality.py``: several sessions of a user (Dana)
talking with the agent, each session about its own topic with a small cast of recurring names and
places, topics and everyday words coming back across sessions (Zipf-like word use), and in each
session a set of stated facts whose questions form the eval suite (each case names the turn that
answers it). Every turn is stored by ``Mnemosyne.remember`` in the session it belongs to, in a child
process whose environment points Mnemosyne at the home only; the rows are then aged (all older than
Mnemosyne's sleep cut-off), as in a long-lived agent. Deterministic for a seed.

Layout (a Hermes home, so recall is measured the way the Hermes plugin recalls)::

    <dir>/hermes/memories/MEMORY.md, USER.md
    <dir>/hermes/mnemosyne/data/mnemosyne.db
    <dir>/hermes/mnemosyne/mnemo-ops/eval/suite.jsonl
"""

from __future__ import annotations

import dataclasses
import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from devtools.samples import hermes_dialogue
from mnemo_ops.foundation.child_process import ChildProcessFailed, child_main, run_child
from mnemo_ops.mnemosyne.sample_home import SampleLayout, backdate

TOPICS = {
    "garden": [
        "tomatoes",
        "raised",
        "beds",
        "compost",
        "seedlings",
        "basil",
        "mulch",
        "blight",
        "harvest",
        "greenhouse",
        "irrigation",
        "pruning",
        "zucchini",
        "soil",
        "trellis",
    ],
    "server": [
        "postgres",
        "backup",
        "nginx",
        "container",
        "kernel",
        "firewall",
        "disk",
        "cron",
        "certificate",
        "proxy",
        "volume",
        "upgrade",
        "logs",
        "snapshot",
        "router",
    ],
    "travel": [
        "flight",
        "train",
        "hotel",
        "passport",
        "itinerary",
        "luggage",
        "museum",
        "ferry",
        "booking",
        "layover",
        "visa",
        "hostel",
        "coast",
        "tickets",
        "airport",
    ],
    "cooking": [
        "sourdough",
        "starter",
        "oven",
        "recipe",
        "risotto",
        "spices",
        "braise",
        "dough",
        "knife",
        "stock",
        "fermenting",
        "pasta",
        "flour",
        "skillet",
        "marinade",
    ],
    "fitness": [
        "running",
        "intervals",
        "marathon",
        "stretching",
        "cycling",
        "recovery",
        "knee",
        "strength",
        "tempo",
        "swimming",
        "hydration",
        "shoes",
        "heart",
        "rowing",
        "yoga",
    ],
    "finance": [
        "budget",
        "savings",
        "mortgage",
        "invoice",
        "taxes",
        "pension",
        "insurance",
        "receipts",
        "spreadsheet",
        "rent",
        "index",
        "fund",
        "expenses",
        "salary",
        "loan",
    ],
    "car": [
        "tyres",
        "brakes",
        "battery",
        "mechanic",
        "service",
        "charging",
        "mileage",
        "wipers",
        "insurance",
        "parking",
        "engine",
        "inspection",
        "oil",
        "clutch",
        "garage",
    ],
    # The same words as the Hermes conversations' reading theme.
    "reading": list(next(t.words for t in hermes_dialogue.THEMES if t.name == "reading")),
}
# The two generators share their names: the first sixteen of the Hermes conversations' cast.
PEOPLE = list(hermes_dialogue.PEOPLE[:16])
# The first twelve cities of the Hermes conversations.
PLACES = list(hermes_dialogue.CITIES[:12])
EVERYDAY = [
    "the",
    "a",
    "to",
    "and",
    "of",
    "it",
    "we",
    "that",
    "you",
    "is",
    "was",
    "for",
    "on",
    "with",
    "this",
    "about",
    "think",
    "maybe",
    "really",
    "just",
    "good",
    "time",
    "week",
    "day",
    "today",
    "tomorrow",
    "yesterday",
    "later",
    "again",
    "still",
    "also",
    "then",
    "because",
    "should",
    "would",
    "could",
    "want",
    "need",
    "like",
    "make",
    "take",
    "look",
    "know",
    "said",
    "thing",
    "things",
    "work",
    "home",
    "plan",
    "idea",
    "nice",
    "great",
    "fine",
    "sure",
    "right",
    "okay",
    "thanks",
    "little",
    "bit",
    "more",
    "less",
    "first",
    "last",
    "next",
    "early",
    "late",
    "long",
    "short",
    "quick",
    "slow",
    "new",
    "old",
]
FACTS = [
    ("{person} moved to {place} in {month}", "Where did {person} move to?", "{place}"),
    (
        "{person} recommended the {thing} for {topic_word}",
        "What did {person} recommend for {topic_word}?",
        "{thing}",
    ),
    (
        "Dana wants the {topic_word} done before {month}",
        "When does Dana want the {topic_word} done?",
        "{month}",
    ),
    (
        "The {topic_word} costs {number} euros according to {person}",
        "How much does the {topic_word} cost?",
        "{number} euros",
    ),
    (
        "Dana decided to stop using the {thing} after the {topic_word} trouble",
        "Which thing did Dana stop using?",
        "{thing}",
    ),
    (
        "{person} and Dana meet every {weekday} to talk about {topic_word}",
        "On which day do Dana and {person} meet?",
        "{weekday}",
    ),
]
MONTHS = list(hermes_dialogue.MONTHS)
WEEKDAYS = list(hermes_dialogue.WEEKDAYS)
THINGS = [
    "blue notebook",
    "copper kettle",
    "spare router",
    "old bicycle",
    "cedar planter",
    "wool blanket",
    "steel thermos",
    "paper planner",
    "glass jar",
    "canvas bag",
    "oak ladder",
    "brass lamp",
]


@dataclasses.dataclass(frozen=True)
class Turn:
    """One stored turn: its key (for the suite), text, source, importance and veracity."""

    key: str
    content: str
    source: str = "conversation"
    importance: float = 0.5
    veracity: str = "unknown"


@dataclasses.dataclass
class Conversation:
    """One session: its id, how many days ago it happened, its turns, and its questions."""

    session_id: str
    days_ago: int
    turns: list[Turn]
    questions: list[dict[str, Any]]


def _zipf_word(rng: random.Random, words: list[str]) -> str:
    """A word drawn with weight 1/rank (everyday words recur the way they do in speech)."""
    weights = [1 / (rank + 1) for rank in range(len(words))]
    return rng.choices(words, weights=weights)[0]


def _chatter(rng: random.Random, topic_words: list[str], cast: list[str], length: int) -> str:
    words = []
    for _ in range(length):
        roll = rng.random()
        if roll < 0.18:
            words.append(_zipf_word(rng, topic_words))
        elif roll < 0.24:
            words.append(rng.choice(cast))
        else:
            words.append(_zipf_word(rng, EVERYDAY))
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def generate(
    sessions: int = 8, turns_per_session: int = 300, facts_per_session: int = 12, seed: int = 7
) -> list[Conversation]:
    """The conversations (deterministic for `seed`)."""
    rng = random.Random(seed)
    topics = list(TOPICS)
    conversations = []
    for number in range(sessions):
        topic = topics[number % len(topics)]
        # Topics come back: a later session mixes in the words of an earlier one.
        words = TOPICS[topic] + (
            TOPICS[topics[(number + 3) % len(topics)]][:5] if number >= 4 else []
        )
        cast = rng.sample(PEOPLE, 3)
        places = rng.sample(PLACES, 2)
        session_id = f"{topic}-{number + 1:02d}"
        fact_positions = set(rng.sample(range(10, turns_per_session - 5), facts_per_session))
        turns, questions = [], []
        for position in range(turns_per_session):
            key = f"{session_id}:{position}"
            if position in fact_positions:
                template, question, answer = FACTS[len(questions) % len(FACTS)]
                values = {
                    "person": rng.choice(cast),
                    "place": rng.choice(places),
                    "month": rng.choice(MONTHS),
                    "thing": rng.choice(THINGS),
                    "topic_word": rng.choice(words[:10]),
                    "number": rng.randrange(20, 900),
                    "weekday": rng.choice(WEEKDAYS),
                }
                content = (
                    template.format(**values)
                    + " "
                    + _chatter(rng, words, cast, rng.randrange(4, 9))
                )
                turns.append(Turn(key, content, source="user", importance=0.8, veracity="stated"))
                questions.append(
                    {
                        "id": f"q-{key}",
                        "query": question.format(**values),
                        "expect": [answer.format(**values)],
                        "relevant_key": key,
                        "session": session_id,
                        "category": topic,
                    }
                )
            else:
                speaker = "Dana: " if position % 2 == 0 else ""
                length = rng.randrange(8, 26)
                content = speaker + _chatter(rng, words, cast + places, length)
                turns.append(Turn(key, content, importance=round(rng.uniform(0.3, 0.6), 2)))
        conversations.append(
            Conversation(session_id, days_ago=40 - 4 * number, turns=turns, questions=questions)
        )
    return conversations


def build(
    directory: Path, sessions: int = 8, turns_per_session: int = 300, seed: int = 7
) -> SampleLayout:
    """Write the aged conversation home into `directory` (must not hold one yet); return its layout."""
    layout = SampleLayout(Path(directory))
    if layout.db_path.exists():
        raise FileExistsError(f"{layout.db_path} already exists")
    for folder in (
        layout.data_dir,
        layout.memory_blocks_dir,
        layout.state_dir / "eval",
        layout.directory / "home",
    ):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for block in ("MEMORY.md", "USER.md"):
        (layout.memory_blocks_dir / block).write_text("", encoding="utf-8")
    spec = {
        "db_path": str(layout.db_path),
        "sessions": sessions,
        "turns": turns_per_session,
        "seed": seed,
    }
    try:
        ids = run_child(
            "devtools.samples.conversations",
            spec,
            timeout=None,
            environment=layout.environ(variables={"MNEMOSYNE_NO_EMBEDDINGS": "1"}),
        )
    except ChildProcessFailed as error:
        raise error.with_context("building the conversation home") from None
    cases = []
    for conversation in generate(sessions, turns_per_session, seed=seed):
        for question in conversation.questions:
            memory_id = ids.get(question["relevant_key"])
            if memory_id:
                case = {key: value for key, value in question.items() if key != "relevant_key"}
                case["relevant"] = [memory_id]
                cases.append(case)
    suite = layout.state_dir / "eval" / "suite.jsonl"
    suite.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")
    return layout


AGENT_SESSION_PREFIX = "hermes_"
"""How the Hermes plugin names the sessions it writes: ``hermes_<session key>``."""


def as_agent_sessions(layout: SampleLayout) -> SampleLayout:
    """Make the home's conversations the Hermes plugin's own: session ``garden-01`` becomes
    ``hermes_garden-01`` (rows, their channel, and the suite's cases), so the plugin's prefetch,
    which recalls only in ``hermes_<key>`` sessions, finds them as the agent would. In place, on a
    home of ours (a copy); returns `layout`."""
    import sqlite3

    connection = sqlite3.connect(layout.db_path)
    with connection:
        for table in ("working_memory", "episodic_memory", "memories"):
            columns = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
            if "session_id" not in columns:
                continue
            renamed = ["session_id = ?1 || session_id"]
            if "channel_id" in columns:
                renamed.append("channel_id = ?1 || session_id")
            connection.execute(
                f"UPDATE {table} SET {', '.join(renamed)} WHERE session_id NOT LIKE ?2 "
                "ESCAPE '\\' AND session_id != 'global'",
                (AGENT_SESSION_PREFIX, AGENT_SESSION_PREFIX.replace("_", "\\_") + "%"),
            )
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    suite = layout.state_dir / "eval" / "suite.jsonl"
    cases = [json.loads(line) for line in suite.read_text(encoding="utf-8").splitlines() if line]
    for case in cases:
        if case.get("session") and not case["session"].startswith(AGENT_SESSION_PREFIX):
            case["session"] = AGENT_SESSION_PREFIX + case["session"]
    suite.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")
    return layout


def _write(spec: dict[str, Any]) -> dict[str, str | None]:
    """Runs in the child: store every turn through Mnemosyne, then age the rows; return key -> id."""
    from mnemosyne.core.memory import Mnemosyne

    db_path = Path(spec["db_path"])
    now = datetime.now()
    ids: dict[str, str | None] = {}
    ages: list[tuple[str, str]] = []
    for conversation in generate(spec["sessions"], spec["turns"], seed=spec["seed"]):
        memory = Mnemosyne(session_id=conversation.session_id, db_path=db_path)
        start = now - timedelta(days=conversation.days_ago)
        for position, turn in enumerate(conversation.turns):
            memory_id = memory.remember(
                turn.content, source=turn.source, importance=turn.importance, veracity=turn.veracity
            )
            ids[turn.key] = memory_id
            if memory_id:
                ages.append((memory_id, (start + timedelta(seconds=40 * position)).isoformat()))
    backdate(db_path, ages)
    return ids


if __name__ == "__main__":
    child_main(_write)
