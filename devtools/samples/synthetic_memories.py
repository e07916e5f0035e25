"""Synthetic memories written by SQL into a schema Mnemosyne created: large fixtures and benchmarks.

Writing 100k rows through Mnemosyne's API would take hours, so rows go straight into
``working_memory`` and ``episodic_memory`` (Mnemosyne's own FTS triggers index them). The text is
deterministic for a seed: each row talks about one topic (a few topic words) with common filler,
so rows of the same topic share rare terms the way real memories of one subject do; topic words
may recur across topics, but stay rare at every size.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from devtools.samples.memory_rows import Batch, append_rows

_FILLER = [
    "the",
    "we",
    "and",
    "to",
    "of",
    "a",
    "in",
    "for",
    "on",
    "with",
    "was",
    "is",
    "it",
    "that",
    "about",
    "our",
    "this",
    "at",
    "from",
    "by",
    "as",
    "new",
    "old",
    "today",
    "later",
    "again",
    "maybe",
    "still",
    "really",
    "after",
    "before",
    "some",
    "more",
    "other",
    "then",
    "also",
]
_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "ti",
    "vo",
    "pe",
    "da",
    "ri",
    "no",
    "fu",
    "ze",
    "ga",
    "bi",
    "to",
    "ya",
    "mo",
    "ke",
    "lu",
    "shi",
    "ra",
    "po",
    "ni",
    "ba",
    "de",
    "gi",
    "ko",
    "mu",
    "na",
    "re",
    "si",
    "tu",
    "wa",
    "ye",
    "zo",
    "ha",
    "je",
]


def _word(rng: random.Random) -> str:
    # 3 to 5 of 40 syllables: enough distinct words that topic words stay rare at a million rows
    # (the same shape of data at every size; a small word space would make the terms of big
    # fixtures ever more common).
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(3, 5)))


def topic_words(topics: int, seed: int = 7, per_topic: int = 6) -> list[list[str]]:
    """`per_topic` invented rare words for each topic."""
    rng = random.Random(seed)
    return [[_word(rng) for _ in range(per_topic)] for _ in range(topics)]


def memory_text(rng: random.Random, words: list[str]) -> str:
    """One memory: three or four topic words among filler, 9 to 14 words long."""
    chosen = rng.sample(words, k=min(len(words), rng.randint(3, 4)))
    body = chosen + rng.choices(_FILLER, k=rng.randint(6, 10))
    rng.shuffle(body)
    return " ".join(body).capitalize()


def add_synthetic_memories(
    db_path: Path,
    count: int,
    seed: int = 7,
    rows_per_topic: int = 20,
    episodic_every: int = 25,
    stated_every: int = 40,
    batch: int = 20000,
) -> dict[str, int]:
    """Append `count` live working rows (and one episodic summary per `episodic_every`) to `db_path`.

    Every `stated_every`-th row is a user-stated fact of importance 0.8 (it qualifies for canonical
    promotion). Returns the counts written.
    """
    rng = random.Random(seed)
    topics = topic_words(max(1, count // rows_per_topic), seed)
    start = datetime(2026, 1, 1)

    def batches() -> Iterator[Batch]:
        """The rows, `batch` at a time, each with its episodic summaries."""
        for offset in range(0, count, batch):
            rows, summaries = [], []
            for number in range(offset, min(count, offset + batch)):
                topic = topics[number % len(topics)]
                text = memory_text(rng, topic)
                row_id = hashlib.sha256(f"{seed}:{number}:{text}".encode()).hexdigest()[:16]
                stated = number % stated_every == 0
                rows.append(
                    (
                        row_id,
                        f"{text} ({number})",
                        "user" if stated else "conversation",
                        (start + timedelta(seconds=number)).isoformat(),
                        f"synthetic-{number % 50}",
                        0.8 if stated else 0.4,
                        "{}",
                        "stated" if stated else "unknown",
                        "fact",
                        None,  # never consolidated
                    )
                )
                if episodic_every and number % episodic_every == 0:
                    summaries.append(
                        (
                            f"ep{row_id}",
                            memory_text(rng, topic),
                            "consolidation",
                            (start + timedelta(seconds=number)).isoformat(),
                            f"synthetic-{number % 50}",
                            0.6,
                            "{}",
                            row_id,
                        )
                    )
            yield rows, summaries

    return append_rows(db_path, batches())
