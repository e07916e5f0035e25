"""Realistic generated memories: text with the statistics of a long-lived agent's conversation memory.

Benchmarks and scale tests need databases of 10k to 1M rows, far too many to write through
Mnemosyne's API, so the rows are written by SQL into a schema Mnemosyne created (its own FTS
triggers index them). What matters is that the text is as hard for FTS5 as real memories are. Real
conversations repeat themselves: the same everyday words in every turn, the user's name in almost
every session, a small cast of people and places within a session, topics that come back weeks
later, and a vocabulary that keeps growing, slowly. So a row's salient terms are held by many other
rows, and a query of them matches far more documents than uniformly random invented words do (the
old ``synthetic_memories`` generator, whose topic words stay rare at every size).

The model, per row:

- **Zipf-like word frequencies.** Ordinary words are drawn from one ranked vocabulary with
  probability proportional to ``1 / (rank + 1) ** 1.05`` (the Zipf-Mandelbrot law that English
  text follows). The head are real English function words; the rest are pronounceable invented
  words, each a distinct token. Drawing more rows from an unbounded tail makes the vocabulary grow
  by Heaps' law (about ``V ~ N ** 0.6`` tokens), slowly, as a real one does.
- **A small recurring cast per session.** Every session belongs to the same user (``USER_NAME``,
  in about half of the rows, as in the shipped sample) and has two to five people and one to three
  places, drawn from global pools with Zipf popularity, so a few names and places recur across many
  sessions.
- **Recurring topics.** A session talks about one to three topics from a global pool whose size
  grows with the square root of the sessions; topic popularity is Zipf-like too, so topics come back
  across sessions. A topic is about 30 mid-frequency words.
- **Near-duplicate turns.** About 5% of the rows restate an earlier row of their session with one
  word changed (the agent storing the same fact twice).
- Sources, veracity and importance in the shares of the shipped sample: about a third of the rows
  are user statements, most of those importance >= 0.7 and veracity ``stated`` (they qualify for
  canonical promotion); the rest conversation and tool notes.

`profile` computes the document-frequency profile that ``tests/devtools/samples/test_realistic_memories.py``
checks against the shipped sample conversations (``fixtures/conversations/sample.json``) at the
sample's own size, and the growth laws at larger sizes. The text is deterministic for a seed.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import json
import math
import os
import random
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

from devtools.samples.memory_rows import Batch, append_rows
from mnemo_ops.foundation.child_process import child_main, run_child
from mnemo_ops.foundation.flock import FileLock

USER_NAME = "dana"
ZIPF_EXPONENT = 1.05
ZIPF_OFFSET = 1.0
MEAN_TURNS = 150
"""Turns per session on average (sessions of a third of it to twice it)."""
VOCABULARY_SIZE = 400_000
"""Ranks drawn from: more than the largest generated home uses, so the tail keeps growing."""

# Real English head words, most frequent first: the words that every turn is made of.
_HEAD_WORDS = (
    "the and to of a in we for is on it that with was this at about her from by be are as "
    "but our have not so she they you he can will his if or all after when then more some out "
    "up also there just new one which what would again should before could now still next time "
    "day week last first other really maybe today later same back only two over into"
)
FUNCTION_WORDS = tuple(_HEAD_WORDS.split())
_ONSETS = ["", "b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br"]
_ONSETS += ["ch", "gr", "kl", "pr", "sh", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
_CODAS = ["", "", "n", "r", "s", "l", "t", "m", "nd", "st", "rk"]
_SYLLABLES = [onset + vowel + coda for onset in _ONSETS for vowel in _VOWELS for coda in _CODAS]
_SYLLABLES = sorted(set(_SYLLABLES))


def invented_word(index: int) -> str:
    """The `index`-th invented word: a bijective base-N spelling over syllables, so every index
    gives a distinct token (lower index, shorter word, as frequent words are short)."""
    base = len(_SYLLABLES)
    parts = []
    number = index + base  # at least two syllables: one-syllable words collide with real ones
    while number:
        number, digit = divmod(number, base)
        parts.append(_SYLLABLES[digit])
    return "".join(reversed(parts))


def _zipf_cumulative(size: int, exponent: float, offset: float) -> list[float]:
    return list(itertools.accumulate((rank + offset) ** -exponent for rank in range(size)))


@dataclasses.dataclass
class Row:
    """One generated working-memory row (before it gets its id and timestamp)."""

    session_id: str
    content: str
    source: str
    veracity: str
    importance: float
    memory_type: str
    session_number: int
    position: int


class RealisticText:
    """The generator: sessions of turns with the statistics described in the module docstring."""

    def __init__(self, seed: int = 7, expected_rows: int = 100_000):
        self.rng = random.Random(seed)
        self._cumulative = _zipf_cumulative(VOCABULARY_SIZE, ZIPF_EXPONENT, ZIPF_OFFSET)
        self._total = self._cumulative[-1]
        sessions = max(1, expected_rows // MEAN_TURNS)
        # People and places: pools that grow with the history, popularity Zipf-like.
        self.people = [invented_word(VOCABULARY_SIZE + index) for index in range(40 + sessions)]
        self.places = [
            invented_word(2 * VOCABULARY_SIZE + index) for index in range(20 + sessions // 2)
        ]
        self._people_weights = _zipf_cumulative(len(self.people), 1.0, 1.0)
        self._place_weights = _zipf_cumulative(len(self.places), 1.0, 1.0)
        # Topics: mid-frequency words (ranks 150..30,000), about 30 each; the pool grows as sqrt(sessions).
        topic_count = max(8, int(6 * math.sqrt(sessions)))
        self.topics = [
            [invented_word(self.rng.randint(150, 30_000)) for _ in range(30)]
            for _ in range(topic_count)
        ]
        self._topic_weights = _zipf_cumulative(topic_count, 0.9, 1.0)

    def _word(self, count: int) -> list[str]:
        ranks = [
            bisect.bisect_left(self._cumulative, self.rng.random() * self._total)
            for _ in range(count)
        ]
        return [
            FUNCTION_WORDS[rank] if rank < len(FUNCTION_WORDS) else invented_word(rank)
            for rank in ranks
        ]

    def _pick(self, pool: list, cumulative: list[float], count: int) -> list:
        chosen: list = []
        while len(chosen) < min(count, len(pool)):
            item = pool[bisect.bisect_left(cumulative, self.rng.random() * cumulative[-1])]
            if item not in chosen:
                chosen.append(item)
        return chosen

    def sessions(self, rows: int, mean_turns: int = 0) -> Iterator[Row]:
        """Yield `rows` rows, session after session (sessions of about `mean_turns` turns, from a
        third of it to twice it less a third)."""
        mean_turns = mean_turns or MEAN_TURNS
        shortest = max(2, mean_turns // 3)
        produced = 0
        for session_number in itertools.count():
            if produced >= rows:
                return
            turns = min(rows - produced, self.rng.randint(shortest, 2 * mean_turns - shortest))
            cast = self._pick(self.people, self._people_weights, self.rng.randint(2, 5))
            places = self._pick(self.places, self._place_weights, self.rng.randint(1, 3))
            topics = self._pick(self.topics, self._topic_weights, self.rng.randint(1, 3))
            session_id = f"session-{session_number:06d}"
            earlier: list[str] = []
            for position in range(turns):
                content = self._turn(cast, places, topics, earlier)
                earlier.append(content)
                yield self._row(session_id, content, session_number, position)
            produced += turns

    def _turn(self, cast, places, topics, earlier: list[str]) -> str:
        rng = self.rng
        if earlier and rng.random() < 0.05:
            # A near-duplicate: an earlier turn of this session, one word changed.
            words = rng.choice(earlier).split()
            words[rng.randrange(len(words))] = self._word(1)[0]
            return " ".join(words)
        length = rng.randint(7, 16)
        words = self._word(length)
        topic = rng.choice(topics)
        for _ in range(rng.choice((1, 2, 2, 3))):
            words[rng.randrange(len(words))] = rng.choice(topic)
        if rng.random() < 0.45:
            words.insert(rng.randrange(len(words) + 1), USER_NAME)
        if rng.random() < 0.4:
            words.insert(rng.randrange(len(words) + 1), rng.choice(cast))
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words) + 1), rng.choice(places))
        return " ".join(words).capitalize()

    def _row(self, session_id: str, content: str, session_number: int, position: int) -> Row:
        draw = self.rng.random()
        if draw < 0.29:  # the sample: 10 of 35 rows user-stated with importance >= 0.7
            source, veracity, importance = "user", "stated", round(self.rng.uniform(0.7, 0.9), 2)
        elif draw < 0.35:
            source, veracity, importance = "user", "stated", round(self.rng.uniform(0.4, 0.69), 2)
        elif draw < 0.38:
            source, veracity, importance = "tool", "tool", round(self.rng.uniform(0.4, 0.7), 2)
        else:
            source, veracity = "conversation", "unknown"
            importance = round(self.rng.uniform(0.2, 0.6), 2)
        memory_type = "preference" if source == "user" and draw < 0.1 else "fact"
        return Row(
            session_id,
            content,
            source,
            veracity,
            importance,
            memory_type,
            session_number,
            position,
        )


def generate_rows(count: int, seed: int = 7) -> list[Row]:
    """`count` rows of realistic text (deterministic for `seed`)."""
    return list(RealisticText(seed, expected_rows=count).sessions(count))


def add_realistic_memories(
    db_path: Path,
    count: int,
    seed: int = 7,
    episodic_every: int = 40,
    end: datetime | None = None,
    consolidated_days: float | None = 7,
    batch: int = 20_000,
) -> dict[str, int]:
    """Append `count` live working rows of realistic text to the Mnemosyne database at `db_path`.

    Sessions are a day apart and the last one ends about `end` (default now), so the history is as
    old as a long-lived agent's. As Mnemosyne's auto-sleep leaves such a history, rows older than
    `consolidated_days` are stamped ``consolidated_at`` (None: none are), and one episodic summary
    is added per `episodic_every` rows (a few turns of the session joined). Written by
    ``memory_rows.append_rows`` (Python's sqlite3: run it where no apsw connection to the file is
    open), `batch` rows a transaction. Returns the counts written.
    """
    end = end or datetime.now()
    start = end - timedelta(days=count / MEAN_TURNS + 1)
    cutoff = end - timedelta(days=consolidated_days) if consolidated_days is not None else None
    generator = RealisticText(seed, expected_rows=count)

    def batches() -> Iterator[Batch]:
        """The rows, `batch` at a time, each with the summaries of its stretch of sessions."""
        rows = generator.sessions(count)
        number = 0
        recent: list[str] = []
        while chunk := list(itertools.islice(rows, batch)):
            memories, summaries = [], []
            for row in chunk:
                row_id = hashlib.sha256(f"{seed}:{number}:{row.content}".encode()).hexdigest()[:16]
                moment = min(
                    end, start + timedelta(days=row.session_number, seconds=30 * row.position)
                )
                stamp = moment.isoformat()
                consolidated = (
                    (moment + timedelta(days=1)).isoformat()
                    if cutoff is not None and moment < cutoff
                    else None
                )
                memories.append(
                    (
                        row_id,
                        row.content,
                        row.source,
                        stamp,
                        row.session_id,
                        row.importance,
                        "{}",
                        row.veracity,
                        row.memory_type,
                        consolidated,
                    )
                )
                recent = (recent + [row.content])[-4:]
                if episodic_every and number % episodic_every == episodic_every - 1:
                    summaries.append(
                        (
                            f"ep{row_id}",
                            " ".join(recent),
                            "consolidation",
                            stamp,
                            row.session_id,
                            0.6,
                            "{}",
                            row_id,
                        )
                    )
                number += 1
            yield memories, summaries

    return append_rows(db_path, batches())


# --- The document-frequency profile -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Profile:
    """Document-frequency statistics of a set of documents (each a list of index tokens)."""

    documents: int
    terms: int
    tokens_per_document: float
    hapax_share: float  # share of distinct terms held by exactly one document
    top_term_share: float  # share of documents holding the most common term
    user_share: float  # share of documents holding the user's name
    top10_mean_share: float  # mean document share of the ten most common terms
    same_session_overlap: float  # share of same-session pairs sharing a content term
    cross_session_overlap: float  # the same for pairs from different sessions

    def to_dict(self) -> dict[str, float]:
        """The profile as a plain mapping (for printing and JSON)."""
        return dataclasses.asdict(self)


def profile(documents: Iterable[tuple[str, list[str]]]) -> Profile:
    """The profile of (session, tokens) documents; content terms exclude ``FUNCTION_WORDS``."""
    documents = [(session, set(terms)) for session, terms in documents]
    frequencies: Counter[str] = Counter()
    for _, terms in documents:
        frequencies.update(terms)
    count = max(1, len(documents))
    common = frequencies.most_common(10)
    function_words = set(FUNCTION_WORDS)
    same = [0, 0]
    cross = [0, 0]
    for (session_a, terms_a), (session_b, terms_b) in itertools.combinations(documents, 2):
        shared = bool((terms_a & terms_b) - function_words)
        bucket = same if session_a == session_b else cross
        bucket[0] += 1
        bucket[1] += shared
    return Profile(
        documents=len(documents),
        terms=len(frequencies),
        tokens_per_document=sum(len(terms) for _, terms in documents) / count,
        hapax_share=sum(1 for value in frequencies.values() if value == 1)
        / max(1, len(frequencies)),
        top_term_share=common[0][1] / count if common else 0.0,
        user_share=frequencies[USER_NAME] / count,
        top10_mean_share=sum(value for _, value in common) / max(1, len(common)) / count,
        same_session_overlap=same[1] / max(1, same[0]),
        cross_session_overlap=cross[1] / max(1, cross[0]),
    )


def sample_documents(path: Path) -> list[tuple[str, list[str]]]:
    """The shipped sample conversations as (session, tokens) documents."""
    from mnemo_ops.database.fts_query import tokens

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [
        (session["session_id"], tokens(memory["content"]))
        for session in data["sessions"]
        for memory in session["memories"]
    ]


def generated_documents(rows: int, seed: int, mean_turns: int = 150) -> list[tuple[str, list[str]]]:
    """`rows` generated rows as (session, tokens) documents."""
    from mnemo_ops.database.fts_query import tokens

    generator = RealisticText(seed, expected_rows=rows)
    return [(row.session_id, tokens(row.content)) for row in generator.sessions(rows, mean_turns)]


def build_realistic_sample(directory: Path, rows: int, seed: int = 7):
    """The sample home (written by Mnemosyne's API) grown by `rows` realistic rows; returns its layout.

    For scale tests and benchmarks: Mnemosyne creates the schema and the sample's own rows, the
    generated rows go in by SQL, and the WAL is checkpointed into the file.
    """
    from mnemo_ops.mnemosyne.sample_home import build_sample

    layout = build_sample(directory)
    add_realistic_memories(layout.db_path, rows, seed=seed)
    return layout


def cached_realistic_home(directory: Path, rows: int, name: str | None = None):
    """The realistic home of `rows` rows in ``directory/name`` (default ``realistic-<rows>``), built
    once and reused once complete (the benchmarks share it); returns its layout.

    Built by `build_realistic_sample` in a child process, so the caller's process never has the
    generator's memory nor a sqlite3 connection to the file (it may then open apsw on it). The
    database exists long before the build ends (a 1M-row home takes minutes), so a home counts as
    built only once its marker file is written; a second caller waits on the build's lock instead
    of reading a half-built home, and a build that was killed is started over.
    """
    from mnemo_ops.mnemosyne.sample_home import SampleLayout

    home = Path(directory) / (name or f"realistic-{rows}")
    layout = SampleLayout(home)
    marker = home.parent / f"{home.name}.built"
    home.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(home.parent / f"{home.name}.lock", mode="a").hold(wait_seconds=None):
        if not marker.exists():
            if home.exists():  # a build that did not finish: not a home to measure
                shutil.rmtree(home)
            environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
            # No limit: a 1M-row home takes minutes, and the caller waits for it in any case.
            run_child(
                "devtools.samples.realistic_memories",
                {"directory": str(home), "rows": rows},
                timeout=None,
                environment=environment,
            )
            marker.write_text(f"{rows}\n")
    return layout


def _build_in_child(request: dict) -> None:
    """The child's side of `cached_realistic_home`: build the home it names."""
    build_realistic_sample(Path(request["directory"]), int(request["rows"]))


if __name__ == "__main__":
    child_main(_build_in_child)
