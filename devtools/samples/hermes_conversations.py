"""Conversation homes written the way the Hermes plugin writes them, with questions whose evidence
turns are known.

**What is generated** (deterministic for a seed, LoCoMo-like): one user talking with the agent in
several gateway chats (Telegram topics, say). Each chat is one *conversation*: a theme of the
user's life (garden, running, work, ...) with its own cast, and several *sessions* a few days apart
over weeks. A user turn is filler chatter (Zipf-like everyday words, the theme's words, topics of
other chats coming back) or a fact about the user's world with names, numbers and dates, including
relative dates ("yesterday", "last Friday", "two weeks ago") whose meaning depends on the session's
date; facts are restated, and some change (a friend moves city, changes job). The user's own world
(partner, dog, employer, home city) recurs across all chats, and the user changes job and moves
city once. The agent answers plausibly, repeating the fact sometimes. Every user turn that states a
fact is the evidence of one question, in the categories of `CATEGORIES`.

**Session keys.** A Hermes gateway chat keeps one stable session per chat: every session of a
conversation is stored in ``hermes_<chat key>``, and its questions are asked there. The
``new-session`` questions are asked from a key nothing was written in (a Hermes CLI run, a new
chat): only ``global`` rows (the plugin's ``[IDENTITY]`` rows) and canonical facts can reach it.

**Written through the real code.** When ``mnemosyne_hermes`` is importable in the writing
interpreter (the 4.0 venv), every turn goes through the plugin's own ``MnemosyneMemoryProvider``:
one provider per session (Hermes starts a new agent, and so a new provider, per session),
``initialize(chat_key, hermes_home=...)`` then ``sync_turn(user, assistant, session_id=chat_key)``.
The provider reads the home's ``config.yaml``; it finds ``$HERMES_HOME/mnemosyne/data/mnemosyne.db``
from ``hermes_home`` and names the session ``hermes_<chat key>`` itself. It stores:

- a user turn longer than 5 characters as ``[USER] <text>``, source ``conversation``, importance
  0.5, scope ``memory.mnemosyne.default_scope`` (``session``), with entity extraction;
- then, when the user turn holds one of its `IDENTITY_SIGNALS` ("i'm proud", "feeling like", ...),
  ``[IDENTITY] <text>`` with source ``identity``, importance 0.85, scope ``global``, veracity
  ``stated`` (in the chat's session, but global, so every session sees it);
- an assistant turn longer than 10 characters as ``[ASSISTANT] <text>``, importance 0.15, only when
  ``memory.mnemosyne.sync_roles`` names ``assistant``. **The plugin's default is ``user`` alone**;
  these homes write ``sync_roles: [user, assistant]`` into ``config.yaml`` unless built with
  ``sync_roles=("user",)`` (the out-of-the-box home). The plugin never injects an ``[ASSISTANT]``
  row (its source quality is 0), but they take places in the recall's top 16.

Mnemosyne's own write path adds, per row, what it always adds: entity ``mentions`` and an
``occurred_on`` annotation, a gist, regex ``memoria_*`` facts and preferences, an ``event_date``
parsed from the text, ``facts`` / ``consolidated_facts`` rows and ``ctx`` edges (both lines).

**The plugin's auto-sleep** is left as the plugin configures it (on; every 10th turn of a provider
it sleeps the session when it holds more than 50 working rows and some unconsolidated row is
older than ``MNEMOSYNE_WM_TTL_HOURS // 2`` = 84 hours, in a worker thread joined for 5 s). During
the build it never fires: every row is written "now" and aged only afterwards, so no row is ever
84 hours old while the plugin writes (the manifest records the episodic rows after the build: 0).
The same holds for Mnemosyne's trim, which deletes a session's unconsolidated rows older than
``MNEMOSYNE_WM_TTL_HOURS`` (168) on every write. So the home is a chat history as if every turn
had been kept and nothing consolidated yet: the input of the nightly cycle. A real chat used for
weeks differs: its rows older than 84 hours were consolidated by auto-sleep at the next 10th turn,
or deleted by the trim after 7 days when no sleep came first.

**Without the plugin** (the 3.15 venv, or ``writer="mnemosyne"``): the same rows through
``BeamMemory(session_id="hermes_<chat key>").remember(...)`` with the plugin's arguments (prefixes,
sources, importances, scopes, ``extract_entities=True``, the identity rows by the same signals).
What differs: no plugin code runs (no machine-envelope sanitising, no write-policy context, no
verbatim ledger, no auto-sleep check), and the row enrichment is that line's own.

**Dates** (``timeline="sessions"``, the default). Rows are then backdated to their session's date:
the last session of the home is yesterday (by the writing Mnemosyne's own clock: 4.0 stamps UTC,
3.15 local time), earlier sessions go back from there, and `age_days` shifts the whole home that
many days further into the past (the aged case of the tests and benchmarks: ``age_days=10``, every
memory at least 10 days old). Backdating moves every time Mnemosyne derived from the write time: the row's
``timestamp`` and ``created_at``, its ``event_date`` (re-parsed by Mnemosyne's own temporal parser
with the session's time as the reference, as it would have been parsed then), ``occurred_on``
annotations, gists, facts and their edges. The temporal questions' answers are resolved from
the session's (aged) date. With ``timeline="written"`` the rows keep the times the plugin stamped
(the whole history written within a minute or two, as an import through the plugin leaves it),
moved back by `age_days` only; the temporal answers are still resolved from the plan's session
dates, as LoCoMo's are.

Layout (a Hermes home, as `samples.conversations`)::

    <dir>/hermes/config.yaml                  Hermes config (the eval's ``auto``: a Hermes home)
    <dir>/hermes/memories/MEMORY.md, USER.md  empty memory blocks
    <dir>/hermes/mnemosyne/data/mnemosyne.db
    <dir>/hermes/mnemosyne/mnemo-ops/eval/suite.jsonl                the questions (the suite)
    <dir>/hermes/mnemosyne/mnemo-ops/eval/hermes_conversations.json  what was built (MANIFEST_NAME)
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from devtools.samples import hermes_dialogue as words
from devtools.samples.hermes_dialogue import RelativeDate, Theme, capitalised, zipf
from mnemo_ops.foundation.child_process import ChildProcessFailed, child_main, run_child
from mnemo_ops.mnemosyne.sample_home import SampleLayout

CATEGORIES = (
    "single-hop",
    "temporal",
    "multi-hop",
    "preference",
    "knowledge-update",
    "new-session",
)
"""Question categories, after LoCoMo's: a fact stated once (``single-hop``, maybe restated);
``temporal`` ("when did I ...", the answer resolved from the session date); ``multi-hop`` (two
facts in different sessions joined by a person or a thing); ``preference`` (the user's tastes and
opinions); ``knowledge-update`` (a fact that changed; the answer is the newest value, the evidence
the turns stating it); ``new-session`` (asked from a new session key: about the user's feelings,
whose evidence includes the plugin's global ``[IDENTITY]`` row, or about the user's own world,
whose evidence is session-scoped rows of every chat, reachable only through canonical facts)."""
PATTERN = (
    "single-hop",
    "temporal",
    "multi-hop",
    "preference",
    "knowledge-update",
    "new-session",
    "single-hop",
    "temporal",
    "single-hop",
    "preference",
    "multi-hop",
    "single-hop",
    "temporal",
    "knowledge-update",
    "new-session",
    "single-hop",
    "temporal",
    "multi-hop",
    "preference",
    "single-hop",
)
"""The order categories are handed out in, across the home (so a small home has each at least
once): per 20 questions 6 single-hop, 4 temporal, 3 multi-hop, 3 preference, 2 knowledge-update and
2 new-session."""
FACT_SHARE = 0.16
"""The share of a session's exchanges that carry a fact statement (about 1.4 per question)."""
STATEMENTS_PER_QUESTION = 1.4
WORLD_MENTION_CHANCE = 0.3
"""The chance that a session mentions the user's own world (partner, dog, employer, city)."""
IDENTITY_SIGNALS = (
    "feeling like",
    "imposter",
    "impostor",
    "barely know",
    "don't know my own",
    "don't even know how",
    "want them to feel",
    "i'm proud",
    "i feel like a",
    "i don't know how to",
)
"""The plugin's ``MnemosyneMemoryProvider._IDENTITY_SIGNALS`` (0.7.6): a user turn holding one gets
an ``[IDENTITY]`` row. Copied for the writer without the plugin; a test keeps it in step."""
USER_LIMIT = 400
"""Generated user turns stay under this length: the plugin cuts ``[USER]`` content at 500 and
``[IDENTITY]`` content at 400 characters, so no generated row is ever cut."""
MANIFEST_NAME = "hermes_conversations.json"
CONFIG_TEXT = """\
# Hermes config of a generated conversation home (devtools.samples.hermes_conversations).
memory:
  provider: mnemosyne
  memory_char_limit: 2200
  user_char_limit: 1375
  mnemosyne:
    sync_roles: [{roles}]
"""
TIMELINES = ("sessions", "written")
"""``sessions``: every row on its session's date (a chat used for weeks); ``written``: the rows keep
the times the plugin wrote them, a minute or so apart (a history imported through the plugin in one
go); in both, `age_days` moves the home back."""
WRITERS = ("auto", "plugin", "mnemosyne")
"""``auto``: the plugin when the writing interpreter can import it, else Mnemosyne's BeamMemory;
``plugin``: the plugin or fail; ``mnemosyne``: BeamMemory even where the plugin is installed."""
BENCHMARK_SIZE = {"conversations": 10, "sessions_per_conversation": 19, "turns_per_session": 30}
"""The benchmarks' home: ten conversations of 19 sessions of 30 turns (about 300 questions)."""


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One turn pair: the user's message and the agent's answer, `second` and `reply_second`
    seconds after the session's start."""

    key: str
    user: str
    assistant: str
    second: int
    reply_second: int


@dataclasses.dataclass
class Session:
    """One session of a conversation: `days_before` the home's anchor day, starting `start_second`
    seconds after midnight."""

    number: int
    days_before: int
    start_second: int
    exchanges: list[Exchange] = dataclasses.field(default_factory=list)

    def day(self, anchor: date) -> date:
        """The session's date when the home's last day is `anchor`."""
        return anchor - timedelta(days=self.days_before)


@dataclasses.dataclass(frozen=True)
class Evidence:
    """A row that answers a question: the exchange's key and which of its rows (``user``: the
    ``[USER]`` row; ``identity``: the ``[IDENTITY]`` row the plugin wrote for it)."""

    key: str
    role: str = "user"


@dataclasses.dataclass
class Question:
    """One case of the suite before the rows exist (the evidence is named by exchange key).

    `expect`: substrings of the answer, held by the evidence rows. `relative` and `session_days`:
    for a temporal question, the relative date its evidence says and the session it was said in,
    from which `answer_on` resolves the answer. `session_key` is the Hermes session key the
    question is asked in (the suite's ``session`` is ``hermes_<session_key>``).
    """

    id: str
    query: str
    category: str
    expect: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    session_key: str
    answer: str
    relative: RelativeDate | None = None
    session_days_before: int | None = None
    world_fact: str | None = None

    def answer_on(self, anchor: date) -> str:
        """The answer when the home's last day is `anchor` (temporal answers depend on it)."""
        if self.relative is None or self.session_days_before is None:
            return self.answer
        said_on = anchor - timedelta(days=self.session_days_before)
        said = f"{self.relative.phrase}, said on {words.long_date(said_on)}"
        return f"{self.relative.resolve(said_on)} ({said})"


@dataclasses.dataclass
class Conversation:
    """One gateway chat: its key, theme, sessions and the questions about it."""

    number: int
    chat_key: str
    theme: str
    sessions: list[Session]
    questions: list[Question] = dataclasses.field(default_factory=list)

    @property
    def session_id(self) -> str:
        """The session its rows are stored in (the plugin prefixes ``hermes_`` to the key)."""
        return f"hermes_{self.chat_key}"

    def exchanges(self) -> Iterator[tuple[Session, Exchange]]:
        """Every exchange in order, with its session."""
        for session in self.sessions:
            for exchange in session.exchanges:
                yield session, exchange


@dataclasses.dataclass
class Plan:
    """What a home holds before it is written: the conversations (with their questions)."""

    conversations: list[Conversation]
    seed: int

    def questions(self) -> list[Question]:
        """Every question, conversation by conversation."""
        return [
            question for conversation in self.conversations for question in conversation.questions
        ]

    def turns(self) -> int:
        """Messages (user and assistant) in the home."""
        return sum(2 * len(session.exchanges) for c in self.conversations for session in c.sessions)


# ---------------------------------------------------------------------------------------------
# The plan


class Picker:
    """Draws from a pool without repeats while it lasts (Zipf-weighted: popular entries first),
    so the values a conversation's questions ask about are distinct within it."""

    def __init__(self, rng: random.Random, pool: Sequence[str], exclude: Sequence[str] = ()):
        self.rng = rng
        self.pool = [item for item in pool if item not in exclude]
        self.used: set[str] = set()

    def take(self) -> str:
        """An entry not taken yet (any entry once all were taken)."""
        fresh = [item for item in self.pool if item not in self.used] or self.pool
        choice = zipf(self.rng, fresh, exponent=0.6)
        self.used.add(choice)
        return choice

    def left(self) -> int:
        """How many entries have not been taken yet."""
        return sum(1 for item in self.pool if item not in self.used)


@dataclasses.dataclass
class World:
    """The user's own world, shared by every conversation: who and where they are, their tastes,
    and two changes (a new job, a move), each announced in one session: ``(conversation number,
    days before the anchor)``; from that day on every chat says the new value."""

    partner: str
    dog: str
    employers: tuple[str, str]
    cities: tuple[str, str]
    drinks: tuple[str, str]
    dislike: str
    favourites: dict[str, str]
    job_change: tuple[int, int] | None = None
    move: tuple[int, int] | None = None
    mentions: dict[str, list[tuple[str, str]]] = dataclasses.field(default_factory=dict)
    """fact -> (exchange key, text) of every turn that mentions it."""

    def employer(self, days_before: int) -> str:
        """The user's employer on that day."""
        return self.employers[self._changed(self.job_change, days_before)]

    def city(self, days_before: int) -> str:
        """The user's home city on that day."""
        return self.cities[self._changed(self.move, days_before)]

    @staticmethod
    def _changed(change: tuple[int, int] | None, days_before: int) -> int:
        return 1 if change is not None and days_before <= change[1] else 0

    def current(self, fact: str) -> str:
        """The value a question asked now expects."""
        return {
            "employer": self.employer(0),
            "city": self.city(0),
            "dog": self.dog,
            "partner": self.partner,
        }[fact]


class Slots:
    """The free exchange positions of a conversation's sessions, and how many may hold facts."""

    def __init__(self, rng: random.Random, sessions: int, exchanges: int):
        self.rng = rng
        self.free = [list(range(1, exchanges)) for _ in range(sessions)]  # 0 is the greeting
        self.limit = max(1, (exchanges - 1) * 3 // 5)
        self.used = [0] * sessions

    def room(self, session: int) -> int:
        """How many more statements `session` can take."""
        return min(self.limit - self.used[session], len(self.free[session]))

    def pick(self, low: int = 0, high: int | None = None) -> int | None:
        """A session in [low, high) with room (weighted by room), or None."""
        high = len(self.free) if high is None else high
        candidates = [number for number in range(low, high) if self.room(number) > 0]
        if not candidates:
            return None
        return self.rng.choices(candidates, weights=[self.room(n) for n in candidates])[0]

    def take(self, session: int) -> int:
        """Reserve a free position in `session` for a statement."""
        position = self.rng.choice(self.free[session])
        self.free[session].remove(position)
        self.used[session] += 1
        return position


@dataclasses.dataclass
class Statement:
    """A fact turn placed in a session at a position."""

    session: int
    position: int
    user: str
    assistant: str

    @property
    def key_suffix(self) -> str:
        """The exchange key's session and position part."""
        return f"s{self.session + 1:02d}-e{self.position + 1:02d}"


class ConversationWriter:
    """Builds one conversation's statements and questions (one method per question kind)."""

    def __init__(
        self,
        rng: random.Random,
        number: int,
        chat_key: str,
        themes: tuple[Theme, Theme],
        sessions: list[Session],
        exchanges: int,
        world: World,
    ):
        self.rng = rng
        self.number = number
        self.chat_key = chat_key
        self.theme, self.other_theme = themes
        self.sessions = sessions
        self.exchanges = exchanges
        self.slots = Slots(rng, len(sessions), exchanges)
        self.world = world
        self.people = Picker(rng, words.PEOPLE, exclude=(world.partner,))
        self.cast = [self.people.take() for _ in range(6)]
        self.relations = dict(zip(self.cast, rng.sample(words.RELATIONS, 6), strict=True))
        self.cities = Picker(rng, words.CITIES, exclude=world.cities)
        self.employers = Picker(rng, words.EMPLOYERS, exclude=world.employers)
        self.venues = Picker(rng, words.VENUES)
        self.pets = Picker(rng, words.PET_NAMES, exclude=(world.dog,))
        self.cost_items = Picker(rng, self.theme.items)
        self.opinion_items = Picker(rng, self.theme.items)
        self.events = Picker(rng, [past for past, _ in self.theme.events])
        self.preferences = Picker(
            rng, ["drink", "dislike"] + [f"favourite:{what}" for what in sorted(world.favourites)]
        )
        self.statements: list[Statement] = []
        self.questions: list[Question] = []
        self.kind_pickers: dict[str, Picker] = {}

    # -- placement helpers

    def key(self, statement: Statement) -> str:
        """The exchange key of a placed statement."""
        return f"c{self.number + 1:02d}-{statement.key_suffix}"

    def state(self, session: int, user: str, assistant: str) -> Statement:
        """Place a statement in `session` (which must have room)."""
        statement = Statement(session, self.slots.take(session), user, assistant)
        self.statements.append(statement)
        return statement

    def acknowledge(self, repeat: str) -> str:
        """The agent's answer to a fact: the fact said back (40%) or a plain acknowledgement."""
        if self.rng.random() < 0.4:
            return repeat
        return self.rng.choice(words.ASSISTANT_ACKNOWLEDGEMENTS)

    def ask(
        self,
        category: str,
        queries: Sequence[str],
        expect: str,
        evidence: Sequence[Evidence],
        session_key: str | None = None,
        relative: RelativeDate | None = None,
        session_days_before: int | None = None,
    ) -> None:
        """Record a question (its id numbered within the conversation and category); asked in the
        conversation's own session unless `session_key` names another."""
        count = sum(1 for question in self.questions if question.category == category)
        self.questions.append(
            Question(
                id=f"c{self.number + 1:02d}-{category}-{count + 1:02d}",
                query=self.rng.choice(list(queries)),
                category=category,
                expect=(expect,),
                evidence=tuple(evidence),
                session_key=session_key or self.chat_key,
                answer=expect,
                relative=relative,
                session_days_before=session_days_before,
            )
        )

    def kind(self, category: str, kinds: Sequence[str]) -> str:
        """The next kind of question for `category`: each kind once before any comes back."""
        picker = self.kind_pickers.setdefault(category, Picker(self.rng, kinds))
        return picker.take()

    def person(self) -> str:
        """Someone of the conversation's cast (for chatter and for facts not about a person)."""
        return zipf(self.rng, self.cast, exponent=0.8)

    def new_person(self) -> tuple[str, str]:
        """Someone not named in a fact of this conversation yet, and their relation to the user
        (so no two facts of a conversation are about the same person)."""
        name = self.people.take()
        self.relations.setdefault(name, self.rng.choice(words.RELATIONS))
        return name, self.relations[name]

    def topic_word(self) -> str:
        """A word of the conversation's theme (popular ones more often)."""
        return zipf(self.rng, self.theme.words)

    # -- question kinds

    def single_hop(self) -> bool:
        """A fact stated once (restated in a later session one time in five)."""
        first = self.slots.pick()
        if first is None:
            return False
        rng = self.rng
        kinds = ["employer", "recommendation", "venue", "origin", "gift"]
        kinds += ["cost"] if self.cost_items.left() else []
        kinds += ["pet"] if self.pets.left() else []
        kind = self.kind("single-hop", kinds)
        name, relation = self.new_person()
        if kind == "employer":
            employer, role = self.employers.take(), rng.choice(words.ROLES)
            user = f"My {relation} {name} works at {employer} as a {role}."
            restated = f"{name} is still at {employer}, busy as ever."
            queries = (
                f"Where does my {relation} {name} work?",
                f"Which company does {name} work for?",
            )
            expect, repeat = employer, f"{name} at {employer} as a {role}? Sounds like a good fit."
        elif kind == "cost":
            item, price = self.cost_items.take(), rng.randrange(20, 900)
            verdict = rng.choice(("not cheap", "worth it I hope", "a bargain really"))
            user = f"The {item} cost me {price} euros in the end, {verdict}."
            restated = f"Still thinking about those {price} euros for the {item}."
            queries = (f"How much did the {item} cost?", f"How much did I pay for the {item}?")
            expect, repeat = f"{price} euros", f"{price} euros for the {item} is not bad at all."
        elif kind == "recommendation":
            what, brands = self.theme.recommend
            brand = rng.choice(brands)
            user = f"{name} swears by {brand} as a {what}, says nothing else comes close."
            restated = f"Tried {brand} like {name} said, and it really is good."
            queries = (f"Which {what} did {name} recommend?", f"What did {name} recommend to me?")
            expect, repeat = brand, f"{brand}, noted. {name} seems to know their stuff."
        elif kind == "pet":
            species, pet = rng.choice(words.SPECIES), self.pets.take()
            user = f"{name}'s {species} is called {pet}, and it rules the whole house."
            restated = f"{pet} ({name}'s {species}) was in a mood again today."
            queries = (
                f"What is the name of {name}'s {species}?",
                f"What is {name}'s {species} called?",
            )
            expect, repeat = pet, f"{pet} is a great name for a {species}!"
        elif kind == "venue":
            venue, weekday = self.venues.take(), rng.choice(words.WEEKDAYS)
            topic = self.topic_word()
            user = f"{name} and I meet at {venue} every {weekday} to talk about the {topic}."
            restated = f"Another {weekday} at {venue} with {name}."
            queries = (
                f"Where do {name} and I meet on {weekday}s?",
                f"Where do I meet {name} every week?",
            )
            expect, repeat = (
                venue.removeprefix("the "),
                f"{venue} every {weekday} sounds like a nice routine.",
            )
        elif kind == "origin":
            city = self.cities.take()
            user = f"{name} grew up in {city} and still misses the food there."
            restated = f"{name} was telling stories about growing up in {city} again."
            queries = (f"Where did {name} grow up?", f"Which city is my {relation} {name} from?")
            expect, repeat = city, f"{city}! No wonder {name} misses the food."
        else:
            gift = rng.choice(words.GIFTS)
            user = f"{name} gave me {gift} for my birthday, so thoughtful."
            restated = f"Using the present from {name} every day now: {gift}."
            queries = (
                f"What did {name} give me for my birthday?",
                f"What was {name}'s birthday present to me?",
            )
            expect = gift.split(" ", 1)[1] if gift.startswith(("a ", "an ")) else gift
            repeat = f"{capitalised(gift)}, how lovely of {name}."
        statements = [self.state(first, user, self.acknowledge(repeat))]
        later = self.slots.pick(first + 1) if rng.random() < 0.2 else None
        if later is not None:
            statements.append(
                self.state(later, restated, rng.choice(words.ASSISTANT_ACKNOWLEDGEMENTS))
            )
        self.ask("single-hop", queries, expect, [Evidence(self.key(s)) for s in statements])
        return True

    def temporal(self) -> bool:
        """Something done (or planned) on a relative date; the answer is resolved from the date
        of the session it was said in. The theme's own events first, then everyday ones with a
        person new to the conversation (so no event is said twice with two dates)."""
        session = self.slots.pick()
        if session is None:
            return False
        rng = self.rng
        if self.events.left():
            past = self.events.take()
            base = dict(self.theme.events)[past]
        else:
            past, base = rng.choice(words.GENERIC_EVENTS)
        values = {
            "person": self.new_person()[0],
            "city": self.cities.take(),
            "venue": self.venues.take(),
        }
        past, base = past.format(**values), base.format(**values)
        if rng.random() < 0.75:
            relative = rng.choice(words.PAST_RELATIVE)
            said = f"{past} {relative.phrase}"
            ending = rng.choice(
                (".", ", finally.", ", it went better than expected.", " and I am still tired.")
            )
            user = f"I {said}{ending}"
            queries: tuple[str, ...] = (f"When did I {base}?",)
            repeat = f"{capitalised(relative.phrase)}? How did it go?"
        else:
            relative = rng.choice(words.FUTURE_RELATIVE)
            said = f"{base} {relative.phrase}"
            ending = rng.choice((".", ", wish me luck.", ", a bit nervous about it."))
            user = f"I'm going to {said}{ending}"
            queries = (f"When am I going to {base}?", f"When do I plan to {base}?")
            repeat = f"{capitalised(relative.phrase)}, good luck!"
        statement = self.state(session, user, self.acknowledge(repeat))
        self.ask(
            "temporal",
            queries,
            said,
            [Evidence(self.key(statement))],
            relative=relative,
            session_days_before=self.sessions[session].days_before,
        )
        return True

    def multi_hop(self) -> bool:
        """Two facts in different sessions joined by a person or a thing."""
        first = self.slots.pick(0, len(self.sessions) - 1)
        second = None if first is None else self.slots.pick(first + 1)
        if first is None or second is None:
            return False
        rng = self.rng
        kinds = ["moved", "allergy", "visit", "office"] + (["pet"] if self.pets.left() else [])
        kind = self.kind("multi-hop", kinds)
        name, relation = self.new_person()
        if kind == "moved":
            city = self.cities.take()
            topic = self.topic_word()
            one = f"Had dinner with my {relation} {name}, we talked about the {topic} all night."
            two = f"{name} just moved to {city} for a new job."
            queries = (
                f"Which city did my {relation} move to?",
                f"Where did my {relation} move for the new job?",
            )
            expect = city
        elif kind == "allergy":
            group, expect = self.theme.group, rng.choice(words.ALLERGENS)
            one = f"{name} took over running the {group} this month."
            two = f"{name} is allergic to {expect}, so no {expect} at the next potluck."
            queries = (f"What is the person who runs the {group} allergic to?",)
        elif kind == "pet":
            species, pet, expect = (
                rng.choice(words.SPECIES),
                self.pets.take(),
                rng.choice(words.PET_LOVES),
            )
            one = f"{name} adopted a {species} called {pet}."
            two = f"{pet} is obsessed with {expect}, it's hilarious."
            queries = (
                f"What is {name}'s {species} obsessed with?",
                f"What does {name}'s new {species} love?",
            )
        elif kind == "visit":
            expect = self.cities.take()
            one = f"{name} lives in {expect} these days."
            two = f"I'm visiting my {relation} {name} next month, can't wait."
            queries = (
                "Which city am I visiting next month?",
                f"Which city does the {relation} I'm visiting live in?",
            )
        else:
            employer, expect = self.employers.take(), self.cities.take()
            one = f"{name} started working at {employer}."
            two = f"{employer} is moving its whole office to {expect}."
            queries = (
                f"Which city is the office of {name}'s company moving to?",
                f"Where is {name}'s employer moving?",
            )
        statements = [
            self.state(first, one, self.acknowledge(f"Good to hear about {name}.")),
            self.state(second, two, self.acknowledge(f"Oh, {expect}? That's news.")),
        ]
        self.ask("multi-hop", queries, expect, [Evidence(self.key(s)) for s in statements])
        return True

    def preference(self) -> bool:
        """A taste of the user's (the same in every chat: it is the user's) or an opinion."""
        session = self.slots.pick()
        if session is None:
            return False
        rng = self.rng
        taste = self.preferences.take() if self.preferences.left() else None
        world = self.world
        if taste == "drink":
            expect, other = world.drinks
            user = f"I really prefer {expect} over {other} these days."
            queries = ("What do I prefer to drink these days?", f"Do I prefer {expect} or {other}?")
        elif taste == "dislike":
            expect = world.dislike
            user = f"I honestly can't stand {expect}, it ruins every dish."
            queries = ("Which food can't I stand?", "What food do I hate?")
        elif taste is not None:
            what = taste.removeprefix("favourite:")
            expect = world.favourites[what]
            user = f"My favourite {what} has to be {expect}, no contest."
            queries = (f"What is my favourite {what}?", f"Which {what} do I like best?")
        elif self.opinion_items.left():
            item = self.opinion_items.take()
            expect = rng.choice(("overrated", "a waste of money", "worth every cent", "brilliant"))
            user = f"Honestly I think the {item} was {expect}, {self.person()} disagrees though."
            queries = (f"What do I think of the {item}?", f"What is my opinion of the {item}?")
        else:
            return False
        statement = self.state(session, user, self.acknowledge(f"Noted: {expect}."))
        self.ask("preference", queries, expect, [Evidence(self.key(statement))])
        return True

    def knowledge_update(self) -> bool:
        """A fact that changes: the old value (maybe restated), then the new one in a later
        session (maybe restated too); the answer and the evidence are the newest."""
        first = self.slots.pick(0, len(self.sessions) - 1)
        change = None if first is None else self.slots.pick(first + 1)
        if first is None or change is None:
            return False
        rng = self.rng
        kind = self.kind(
            "knowledge-update", ("employer", "meeting day", "meeting place", "city", "race")
        )
        name, _ = self.new_person()
        group = self.theme.group
        if kind == "employer":
            old, new = self.employers.take(), self.employers.take()
            before = f"{name} works at {old} as a {rng.choice(words.ROLES)}."
            again = f"{name} is still at {old}, not loving it."
            after = f"{name} left {old} and works at {new} now."
            queries = (f"Where does {name} work now?", f"Which company is {name} at these days?")
        elif kind == "meeting day":
            old = rng.choice(words.WEEKDAYS)
            new = rng.choice([day for day in words.WEEKDAYS if day != old])
            before = f"The {group} meets on {old}s, {name} runs it."
            again = f"{old} again, so {group} tonight."
            after = f"The {group} moved to {new}s, the room was double booked."
            queries = (
                f"Which day does the {group} meet now?",
                f"When does the {group} meet these days?",
            )
        elif kind == "meeting place":
            old, new = self.venues.take(), self.venues.take()
            before = f"The {group} meets at {old}, {name} found the place."
            again = f"Another evening of {group} at {old}."
            after = f"The {group} moved from {old} to {new}, more space there."
            old, new = old.removeprefix("the "), new.removeprefix("the ")
            queries = (
                f"Where does the {group} meet now?",
                f"Where is the {group} held these days?",
            )
        elif kind == "city":
            old, new = self.cities.take(), self.cities.take()
            before = f"{name} lives in {old}, near the old harbour."
            again = f"{name} sent photos from {old} again."
            after = f"{name} moved from {old} to {new}."
            queries = (
                f"Where does {name} live now?",
                f"Which city does {name} live in these days?",
            )
        else:
            city = self.cities.take()
            old = rng.choice(words.MONTHS)
            new = rng.choice([month for month in words.MONTHS if month != old])
            before = f"The {city} half marathon is in {old}, I signed up."
            again = f"Training for the {city} half marathon in {old} is going okay."
            after = f"The {city} half marathon got moved to {new}."
            queries = (
                f"When is the {city} half marathon now?",
                f"Which month is the {city} half marathon in now?",
            )
        self.state(first, before, self.acknowledge(f"Okay, {old}."))
        between = self.slots.pick(first + 1, change) if rng.random() < 0.4 else None
        if between is not None:
            self.state(between, again, rng.choice(words.ASSISTANT_ACKNOWLEDGEMENTS))
        newest = [self.state(change, after, self.acknowledge(f"So it's {new} now, got it."))]
        later = self.slots.pick(change + 1) if rng.random() < 0.3 else None
        if later is not None:
            newest.append(
                self.state(
                    later,
                    f"Still getting used to {new}.",
                    rng.choice(words.ASSISTANT_ACKNOWLEDGEMENTS),
                )
            )
        self.ask("knowledge-update", queries, new, [Evidence(self.key(s)) for s in newest])
        return True

    def new_session_identity(self, session_key: str) -> bool:
        """A feeling about oneself, which the plugin also stores as a global ``[IDENTITY]`` row;
        asked from a new session (only global rows reach it)."""
        session = self.slots.pick()
        if session is None:
            return False
        rng = self.rng
        domain = words.DOMAINS[self.theme.name]
        kind = self.kind("identity", ("proud", "imposter", "feel like a", "don't know how"))
        # Several phrasings of each feeling: a real user's identity statements do not share a
        # template's words, which would give every one of them lexical evidence for any other.
        if kind == "proud":
            clause, expect = rng.choice(self.theme.achievements)
            user = rng.choice(
                (
                    f"I'm proud I finally {clause}.",
                    f"Not to brag, but I'm proud of myself: I {clause}.",
                    f"I {clause}, and honestly I'm proud of that.",
                )
            )
            queries = (
                f"What am I proud of {domain}?",
                f"What did I achieve {domain} that I'm proud of?",
            )
        elif kind == "imposter":
            expect, word = self.theme.group, self.topic_word()
            user = rng.choice(
                (
                    f"Honestly I'm feeling like an imposter at the {expect} lately, "
                    f"everyone knows more about {word}.",
                    f"At the {expect} I get this imposter feeling, they all talk about {word} "
                    "like experts.",
                    f"Does everyone feel like an impostor sometimes? The {expect} people know so "
                    f"much about {word}.",
                )
            )
            queries = (f"Where do I feel like an imposter because of the {word} talk?",)
        elif kind == "feel like a":
            clause, _ = rng.choice(self.theme.achievements)
            expect = f"real {words.ROLE_NOUNS[self.theme.name]}"
            user = rng.choice(
                (
                    f"I feel like a {expect} now that I {clause}.",
                    f"Since I {clause}, I feel like a {expect}.",
                    f"Weird thing to say, but I feel like a {expect} these days; I {clause}.",
                )
            )
            queries = (
                f"What do I feel like now that I {clause}?",
                f"What have I started to feel like {domain}?",
            )
        else:
            _, expect = rng.choice(self.theme.events)
            expect = expect.format(
                person=self.person(), city=self.cities.take(), venue=self.venues.take()
            )
            user = rng.choice(
                (
                    f"I don't know how to {expect}, it's driving me mad.",
                    f"Help, I don't know how to {expect} and everyone assumes I do.",
                    f"I don't even know how to {expect}, to be honest.",
                )
            )
            queries = (
                f"What is it {domain} that I can't work out how to do?",
                f"What is driving me mad {domain}?",
            )
        statement = self.state(
            session, user, self.acknowledge("You're doing better than you think.")
        )
        key = self.key(statement)
        self.ask(
            "new-session",
            queries,
            expect,
            [Evidence(key, "identity"), Evidence(key)],
            session_key=session_key,
        )
        return True

    # -- the rest of the session

    def fill(self, template: str, theme: Theme | None = None) -> str:
        """A chatter template with the conversation's words, people and places."""
        rng = self.rng
        theme = theme or (self.theme if rng.random() < 0.85 else self.other_theme)
        word = zipf(rng, theme.words)
        return template.format(
            word=word,
            other=zipf(rng, [other for other in theme.words if other != word]),
            person=zipf(rng, self.cast + [self.world.partner], exponent=0.8),
            time=rng.choice(words.TIMES_OF_DAY),
            weather=rng.choice(words.WEATHER),
            weekday=rng.choice(words.WEEKDAYS),
            item=rng.choice(theme.items),
            food=rng.choice(words.FOODS),
            tip=rng.choice(theme.tips),
        )

    def chatter(self) -> tuple[str, str]:
        """A filler exchange: small talk with the theme's words (another chat's topic now and
        then), people and places; once in a while a turn the plugin takes for an identity one."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:
            return rng.choice(words.USER_SHORT), rng.choice(words.ASSISTANT_SHORT)
        if roll < 0.115:
            return self.fill(
                rng.choice(words.IDENTITY_SLIPS)
            ), "Ha, fair enough. Listen to your body."
        first, second = rng.sample(words.USER_CLAUSES, 2)
        text = capitalised(self.fill(first))
        if rng.random() < 0.4:
            text += rng.choice((", and ", ". Also ", "; ")) + self.fill(second)
        text += "."
        if rng.random() < 0.35:
            text += " " + self.fill(rng.choice(words.USER_QUESTIONS))
        return text, self.fill(rng.choice(words.ASSISTANT_REPLIES))

    def greeting(self, session: Session) -> tuple[str, str]:
        """The first exchange of a session (a morning or an evening one)."""
        rng = self.rng
        timely = (
            words.MORNING_GREETINGS if session.start_second < 12 * 3600 else words.EVENING_GREETINGS
        )
        user = rng.choice(words.USER_GREETINGS + timely)
        if rng.random() < 0.6:
            user += " " + capitalised(self.fill(rng.choice(words.USER_CLAUSES), self.theme)) + "."
        return user, rng.choice(words.ASSISTANT_GREETINGS)


def _timeline(rng: random.Random, number: int, sessions: int) -> list[Session]:
    """A conversation's sessions, a few days apart over weeks, the last within the home's last
    week (the first conversation's last session is on the anchor day: the home's newest rows)."""
    last = 0 if number == 0 else rng.randrange(0, 6)
    days = [last]
    for _ in range(sessions - 1):
        days.append(days[-1] + rng.choice((1, 2, 2, 3, 3, 3, 4, 4, 5, 6, 7)))
    days.reverse()
    result = []
    for index, days_before in enumerate(days):
        evening = rng.random() < 0.75
        hour = rng.uniform(17.0, 21.5) if evening else rng.uniform(7.5, 9.5)
        result.append(Session(index, days_before, int(hour * 3600)))
    return result


WORLD_TEMPLATES = {
    "employer": (
        "Long day at {value}, my job is mostly meetings these days.",
        "Lunch with my team from {value} today, good fun.",
        "{value} wants me in the office three days a week.",
    ),
    "city": (
        "It's been {weather} all week here in {value}.",
        "There's a food market in {value} this weekend, I might go.",
        "Cycling around {value} is so much easier when it's dry.",
    ),
    "dog": (
        "Took my dog {value} to the vet, all fine.",
        "My dog {value} stole a sock again.",
        "Walked my dog {value} by the river before work.",
    ),
    "partner": (
        "My partner {value} made {dish} tonight.",
        "My partner {value} says hi.",
        "{value}, my partner, booked us a weekend away.",
    ),
}
WORLD_QUESTIONS = {
    "employer": ("Where do I work now?", "Which company do I work for now?"),
    "city": ("Which city do I live in now?", "Where do I live these days?"),
    "dog": ("What is my dog's name?", "What's my dog called?"),
    "partner": ("What is my partner's name?", "Who is my partner?"),
}
"""The user's own world, asked from a new session; the answer is the value now (`World.current`)."""


def _world_mention(
    rng: random.Random, world: World, fact: str, number: int, session: Session
) -> tuple[str, str]:
    """The user's world said in passing on that day, or its change announced."""
    for changed, change, values, announce in (
        (
            "employer",
            world.job_change,
            world.employers,
            (
                "Big news: today was my first day at {new}! Leaving {old} was the right call.",
                "Congratulations on the new job at {new}!",
            ),
        ),
        (
            "city",
            world.move,
            world.cities,
            (
                "We've moved! Our new flat is in {new}, boxes everywhere. Goodbye {old}.",
                "Welcome to {new}! Unpack the kettle first.",
            ),
        ),
    ):
        if fact == changed and change == (number, session.days_before):
            old, new = values
            return announce[0].format(old=old, new=new), announce[1].format(new=new)
    value = {
        "employer": world.employer(session.days_before),
        "city": world.city(session.days_before),
        "dog": world.dog,
        "partner": world.partner,
    }[fact]
    text = rng.choice(WORLD_TEMPLATES[fact]).format(
        value=value, weather=rng.choice(words.WEATHER), dish=rng.choice(words.FAVOURITES["dish"])
    )
    return text, rng.choice(words.ASSISTANT_ACKNOWLEDGEMENTS)


def generate(
    conversations: int = 3,
    sessions_per_conversation: int = 4,
    turns_per_session: int = 24,
    seed: int = 26,
) -> Plan:
    """The conversations and their questions (deterministic for the arguments).

    `turns_per_session` counts messages, the user's and the agent's (half are the user's). Each
    conversation draws from its own generator (seeded by `seed` and its number), so its text does
    not depend on how many conversations the home has, only the handing out of categories does.
    """
    exchanges = turns_per_session // 2
    if conversations < 1 or sessions_per_conversation < 1 or exchanges < 3:
        raise ValueError("a home needs a conversation, a session and at least 6 turns per session")
    home = random.Random(f"hermes-home:{seed}")
    employers, cities, drinks = (
        home.sample(pool, 2) for pool in (words.EMPLOYERS, words.CITIES, words.DRINKS)
    )
    world = World(
        partner=home.choice(words.PEOPLE),
        dog=home.choice(words.PET_NAMES),
        employers=(employers[0], employers[1]),
        cities=(cities[0], cities[1]),
        drinks=(drinks[0], drinks[1]),
        dislike=home.choice(words.FOODS),
        favourites={what: home.choice(values) for what, values in sorted(words.FAVOURITES.items())},
    )
    rngs = [
        random.Random(f"hermes-conversation:{seed}:{number}") for number in range(conversations)
    ]
    timelines = [_timeline(rngs[n], n, sessions_per_conversation) for n in range(conversations)]
    _place_world_changes(home, world, timelines)
    themes = list(words.THEMES)
    home.shuffle(themes)
    plan = Plan([], seed)
    position = 0  # in PATTERN, across the home
    world_facts = list(WORLD_QUESTIONS)
    new_sessions = 0
    for number in range(conversations):
        rng = rngs[number]
        writer = ConversationWriter(
            rng,
            number,
            f"telegram-{rng.randrange(10**6, 10**7)}",
            # A topic of another chat comes back in this one's chatter.
            (themes[number % len(themes)], themes[(number + 3) % len(themes)]),
            timelines[number],
            exchanges,
            world,
        )
        mentions = _reserve_world_mentions(rng, writer, world)
        questions = (
            sessions_per_conversation * (exchanges - 1) * FACT_SHARE / STATEMENTS_PER_QUESTION
        )
        for _ in range(max(1, round(questions))):
            category = PATTERN[position % len(PATTERN)]
            position += 1
            if category == "new-session":
                new_sessions += 1
                session_key = f"cli-{rng.randrange(16**6):06x}"
                if new_sessions % 2 == 0 and world_facts:
                    fact = world_facts.pop(0)
                    value = world.current(fact)
                    writer.ask("new-session", WORLD_QUESTIONS[fact], value, [], session_key)
                    writer.questions[-1].world_fact = fact
                    continue
                placed = writer.new_session_identity(session_key)
            else:
                placed = getattr(writer, category.replace("-", "_"))()
            if not placed:
                writer.single_hop()  # a session too full for this kind still takes a fact
        _fill_sessions(writer, mentions)
        plan.conversations.append(
            Conversation(
                number, writer.chat_key, writer.theme.name, writer.sessions, writer.questions
            )
        )
    _complete_world_evidence(plan, world)
    return plan


def _place_world_changes(rng: random.Random, world: World, timelines: list[list[Session]]) -> None:
    """The sessions announcing the new job (about 45% back into the home's span) and the move
    (about 70% back): the sessions nearest those days."""
    every = [(number, session) for number, sessions in enumerate(timelines) for session in sessions]
    span = max(session.days_before for _, session in every)
    if span < 2:
        return  # a home of a day or two has no changes

    def nearest(days_before: float) -> tuple[int, int]:
        """The (conversation, days before) of the session nearest that many days back."""
        number, session = min(
            every, key=lambda item: (abs(item[1].days_before - days_before), item[0])
        )
        return number, session.days_before

    world.job_change = nearest(span * rng.uniform(0.4, 0.5))
    move = nearest(span * rng.uniform(0.65, 0.75))
    world.move = None if move[1] == world.job_change[1] else move  # one change a day


def _reserve_world_mentions(
    rng: random.Random, writer: ConversationWriter, world: World
) -> dict[tuple[int, int], str]:
    """(session, position) -> fact of this conversation's mentions of the user's world: the
    announcements of the changes that fall here, then about one session in three."""
    mentions: dict[tuple[int, int], str] = {}
    for fact, change in (("employer", world.job_change), ("city", world.move)):
        if change is not None and change[0] == writer.number:
            session = next(s for s in writer.sessions if s.days_before == change[1])
            if writer.slots.room(session.number):
                mentions[(session.number, writer.slots.take(session.number))] = fact
    for session in writer.sessions:
        if rng.random() < WORLD_MENTION_CHANCE and writer.slots.room(session.number):
            fact = zipf(rng, ("dog", "partner", "employer", "city"), exponent=0.5)
            mentions[(session.number, writer.slots.take(session.number))] = fact
    return mentions


def _fill_sessions(writer: ConversationWriter, mentions: dict[tuple[int, int], str]) -> None:
    """Lay out every session: the greeting, the statements and world mentions at their positions,
    chatter everywhere else, with the times the turns were said."""
    rng = writer.rng
    placed = {(statement.session, statement.position): statement for statement in writer.statements}
    for session in writer.sessions:
        second = 0
        for position in range(writer.exchanges):
            key = f"c{writer.number + 1:02d}-s{session.number + 1:02d}-e{position + 1:02d}"
            where = (session.number, position)
            if position == 0:
                user, assistant = writer.greeting(session)
            elif where in placed:
                user, assistant = placed[where].user, placed[where].assistant
            elif where in mentions:
                fact = mentions[where]
                user, assistant = _world_mention(rng, writer.world, fact, writer.number, session)
                writer.world.mentions.setdefault(fact, []).append((key, user))
            else:
                user, assistant = writer.chatter()
            if len(user) >= USER_LIMIT:
                raise AssertionError(f"a generated turn is too long to be stored whole: {user!r}")
            reply = second + rng.randrange(8, 45)
            session.exchanges.append(Exchange(key, user, assistant, second, reply))
            second = reply + rng.randrange(30, 180)


def _complete_world_evidence(plan: Plan, world: World) -> None:
    """The evidence of the questions about the user's world: every turn, in any chat, that says
    the value expected (a question no turn answers is dropped)."""
    for conversation in plan.conversations:
        for question in list(conversation.questions):
            if question.world_fact is None:
                continue
            value = question.expect[0]
            question.evidence = tuple(
                Evidence(key)
                for key, text in world.mentions.get(question.world_fact, [])
                if value in text
            )
            if not question.evidence:
                conversation.questions.remove(question)


# ---------------------------------------------------------------------------------------------
# Writing the home


def build(
    directory: Path,
    conversations: int = 3,
    sessions_per_conversation: int = 4,
    turns_per_session: int = 24,
    age_days: int = 0,
    seed: int = 26,
    sync_roles: Sequence[str] = ("user", "assistant"),
    writer: str = "auto",
    timeline: str = "sessions",
    python: str | Path | None = None,
    environment: dict[str, str] | None = None,
) -> SampleLayout:
    """Write a conversation home into `directory` (which must not hold one yet); return its layout.

    The default size is for tests (3 conversations of 4 sessions of 24 turns: 288 turns, 15
    questions); `BENCHMARK_SIZE` is the benchmarks' (5,700 turns, 300 questions). `age_days` moves the
    whole home that many days further into the past. `sync_roles` goes into the home's
    ``config.yaml`` as the plugin's ``memory.mnemosyne.sync_roles`` (``("user",)`` is the plugin's
    default). `writer` is one of `WRITERS`, `timeline` one of `TIMELINES`. `python` writes with
    another interpreter (its Mnemosyne, and its plugin when it has one), which must find mnemo-ops
    through `environment` (e.g. ``PYTHONPATH``). The caller's own ``MNEMOSYNE_*`` variables are not
    passed on, so the home is written with the defaults and the home's config only (`environment`
    may still set some).
    """
    started = time.monotonic()
    roles = tuple(dict.fromkeys(sync_roles))
    if not roles or not set(roles) <= {"user", "assistant"}:
        raise ValueError(f"sync_roles must name user and/or assistant, got {sync_roles!r}")
    if timeline not in TIMELINES:
        raise ValueError(f"timeline must be one of {', '.join(TIMELINES)}, got {timeline!r}")
    if writer not in WRITERS:
        raise ValueError(f"writer must be one of {', '.join(WRITERS)}, got {writer!r}")
    if age_days < 0:
        raise ValueError("age_days cannot be negative")
    layout = SampleLayout(Path(directory).absolute())
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
    # The plugin reads memory.mnemosyne.* from here at initialize(), so it is written first.
    (layout.hermes_home / "config.yaml").write_text(
        CONFIG_TEXT.format(roles=", ".join(roles)), encoding="utf-8"
    )
    sizes = {
        "conversations": conversations,
        "sessions_per_conversation": sessions_per_conversation,
        "turns_per_session": turns_per_session,
        "seed": seed,
    }
    plan = generate(**sizes)
    spec = {
        **sizes,
        "db_path": str(layout.db_path),
        "hermes_home": str(layout.hermes_home),
        "age_days": age_days,
        "sync_roles": list(roles),
        "writer": writer,
        "timeline": timeline,
    }
    base = {name: value for name, value in os.environ.items() if not name.startswith("MNEMOSYNE_")}
    child_environment = layout.environ(base=base, variables={"MNEMOSYNE_NO_EMBEDDINGS": "1"})
    try:
        written = run_child(
            "devtools.samples.hermes_conversations",
            spec,
            timeout=None,
            environment={**child_environment, **(environment or {})},
            python=python,
        )
    except ChildProcessFailed as error:
        raise error.with_context("building the Hermes conversation home") from None
    anchor = date.fromisoformat(written["anchor"])
    cases, unanswered = suite_cases(plan, written["ids"], anchor)
    suite = layout.state_dir / "eval" / "suite.jsonl"
    suite.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")
    manifest = {
        **sizes,
        "age_days": age_days,
        "timeline": timeline,
        "sync_roles": list(roles),
        "writer": written["writer"],
        "versions": written["versions"],
        "today": written["today"],
        "anchor": written["anchor"],
        "turns": plan.turns(),
        "rows": written["rows"],
        "episodic_rows": written["episodic_rows"],
        "unshifted": written["unshifted"],
        "questions": dict(Counter(case["category"] for case in cases)),
        "unanswered": unanswered,
        "write_seconds": written["write_seconds"],
        "build_seconds": round(time.monotonic() - started, 1),
        "conversations_written": [
            {
                "chat_key": conversation.chat_key,
                "session_id": conversation.session_id,
                "theme": conversation.theme,
                "session_days": [
                    session.day(anchor).isoformat() for session in conversation.sessions
                ],
            }
            for conversation in plan.conversations
        ],
    }
    (layout.state_dir / "eval" / MANIFEST_NAME).write_text(
        json.dumps(manifest, indent=2) + "\n", encoding="utf-8"
    )
    return layout


def suite_cases(
    plan: Plan, ids: dict[str, dict[str, str]], anchor: date
) -> tuple[list[dict[str, Any]], list[str]]:
    """The suite's cases (`evaluation.suite` fields) from the plan and the ids the rows got, and
    the ids of the questions none of whose evidence rows were stored (with ``sync_roles`` that
    leave the user out, say)."""
    cases, unanswered = [], []
    for question in plan.questions():
        relevant = [
            ids[evidence.key][evidence.role]
            for evidence in question.evidence
            if evidence.role in ids.get(evidence.key, {})
        ]
        if not relevant:
            unanswered.append(question.id)
            continue
        cases.append(
            {
                "id": question.id,
                "query": question.query,
                "relevant": list(dict.fromkeys(relevant)),
                "expect": list(question.expect),
                "session": f"hermes_{question.session_key}",
                "category": question.category,
                "answer": question.answer_on(anchor),
            }
        )
    return cases, unanswered


def read_manifest(layout: SampleLayout) -> dict[str, Any]:
    """What `build` wrote about a home (`MANIFEST_NAME`)."""
    return json.loads((layout.state_dir / "eval" / MANIFEST_NAME).read_text(encoding="utf-8"))


def identity_signal(text: str) -> bool:
    """Whether the plugin writes an ``[IDENTITY]`` row for this user turn (`IDENTITY_SIGNALS`,
    matched as the plugin matches them: lower-cased, on word boundaries)."""
    lowered = text.lower()
    return any(re.search(r"\b" + re.escape(signal) + r"\b", lowered) for signal in IDENTITY_SIGNALS)


def stored_contents(user: str, assistant: str) -> dict[str, str]:
    """The contents the plugin stores for a turn, by role (before it decides which to store)."""
    return {
        "user": f"[USER] {user}",
        "identity": f"[IDENTITY] {user[:400]}",
        "assistant": f"[ASSISTANT] {assistant}",
    }


class PluginWriter:
    """Writes turns through the Hermes plugin's own provider (runs in the child)."""

    name = "mnemosyne-hermes"

    def __init__(self, hermes_home: Path, db_path: Path):
        from mnemosyne_hermes import MnemosyneMemoryProvider

        self.provider_class = MnemosyneMemoryProvider
        self.hermes_home = hermes_home
        self.db_path = db_path
        self.provider: Any = None
        self.lookup: sqlite3.Connection | None = None

    def start(self, chat_key: str) -> None:
        """A new Hermes session in the chat: a new provider, initialised as Hermes does."""
        provider = self.provider_class()
        provider.initialize(chat_key, hermes_home=str(self.hermes_home))
        if provider._beam is None:  # the plugin reports a failed init only through its state
            raise RuntimeError(f"the plugin did not initialise: {provider._init_error!r}")
        self.provider = provider
        if self.lookup is None:
            self.lookup = sqlite3.connect(self.db_path)

    def write(self, chat_key: str, user: str, assistant: str) -> dict[str, str]:
        """One ``sync_turn``; the ids of the rows it stored, by role. sync_turn swallows its
        errors, so its own failure counter is checked after every call."""
        failed = self.provider._sync_turn_diagnostics()["failed"]
        self.provider.sync_turn(user, assistant, session_id=chat_key)
        diagnostics = self.provider._sync_turn_diagnostics()
        if diagnostics["failed"] > failed:
            raise RuntimeError(f"the plugin's sync_turn failed: {diagnostics['last_error']}")
        assert self.lookup is not None
        found = {}
        for role, content in stored_contents(user, assistant).items():
            row = self.lookup.execute(
                "SELECT id FROM working_memory WHERE session_id = ? AND content = ? "
                "ORDER BY rowid DESC LIMIT 1",
                (f"hermes_{chat_key}", content),
            ).fetchone()
            if row is not None:
                found[role] = row[0]
        return found

    def end(self) -> None:
        """The session ends: the provider shuts down."""
        self.provider.shutdown()
        self.provider = None

    def close(self) -> None:
        """Release the lookup connection."""
        if self.lookup is not None:
            self.lookup.close()


class BeamWriter:
    """Writes the rows the plugin would, through Mnemosyne's BeamMemory (runs in the child)."""

    name = "mnemosyne"

    def __init__(self, db_path: Path, roles: Sequence[str]):
        from mnemosyne.core.beam import BeamMemory

        self.beam_class = BeamMemory
        self.db_path = db_path
        self.roles = set(roles)
        self.beam: Any = None

    def start(self, chat_key: str) -> None:
        """A new session in the chat, in the session the plugin names ``hermes_<key>``."""
        self.beam = self.beam_class(session_id=f"hermes_{chat_key}", db_path=self.db_path)

    def write(self, chat_key: str, user: str, assistant: str) -> dict[str, str]:
        """The plugin's sync_turn, call for call: user row, identity row, assistant row."""
        contents = stored_contents(user, assistant)
        found = {}
        if "user" in self.roles and len(user) > 5:
            found["user"] = self.beam.remember(
                content=contents["user"],
                source="conversation",
                importance=0.5,
                scope="session",
                extract_entities=True,
            )
            if found["user"] and identity_signal(user):
                found["identity"] = self.beam.remember(
                    content=contents["identity"],
                    source="identity",
                    importance=0.85,
                    scope="global",
                    veracity="stated",
                )
        if "assistant" in self.roles and len(assistant) > 10:
            found["assistant"] = self.beam.remember(
                content=contents["assistant"],
                source="conversation",
                importance=0.15,
                scope="session",
                extract_entities=True,
            )
        return {role: memory_id for role, memory_id in found.items() if memory_id}

    def end(self) -> None:
        """The session ends: its connection is closed."""
        connection = getattr(self.beam, "conn", None)
        if connection is not None:
            connection.close()
        self.beam = None

    def close(self) -> None:
        """Nothing is left open."""


def _open_writer(choice: str, hermes_home: Path, db_path: Path, roles: Sequence[str]) -> Any:
    if choice in ("auto", "plugin"):
        try:
            return PluginWriter(hermes_home, db_path)
        except ImportError:
            if choice == "plugin":
                raise
    return BeamWriter(db_path, roles)


def row_times(plan: Plan, anchor: date, ids: dict[str, dict[str, str]]) -> dict[str, datetime]:
    """memory id -> when it was said: the user's row at the turn's time, the identity row a second
    later, the agent's at its reply. A row written twice (the same words in one chat, which
    Mnemosyne stores once) takes the time of the last, as Mnemosyne's dedup does."""
    times: dict[str, datetime] = {}
    for conversation in plan.conversations:
        for session, exchange in conversation.exchanges():
            start = datetime.combine(session.day(anchor), datetime.min.time())
            start += timedelta(seconds=session.start_second)
            said = {
                "user": start + timedelta(seconds=exchange.second),
                "identity": start + timedelta(seconds=exchange.second + 1),
                "assistant": start + timedelta(seconds=exchange.reply_second),
            }
            for role, memory_id in ids.get(exchange.key, {}).items():
                times[memory_id] = said[role]
    return times


def _shifted(value: Any, delta: timedelta) -> Any:
    """A time string moved by `delta`, in its own format (``T`` or space, with or without
    microseconds); anything else as it is."""
    if not isinstance(value, str) or len(value) < 19:
        return value
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return value
    separator = "T" if "T" in value else " "
    return (parsed + delta).isoformat(
        sep=separator, timespec="microseconds" if "." in value else "seconds"
    )


DERIVED_TIMES = (
    ("gists", "memory_id", ("timestamp", "created_at")),
    ("annotations", "memory_id", ("created_at",)),
    ("facts", "source_msg_id", ("timestamp", "created_at")),
    ("memoria_facts", "source_memory_id", ("timestamp",)),
    ("memories", "id", ("timestamp", "created_at")),
)
"""Rows Mnemosyne derives from a memory at write time and stamps with the write time: (table, the
column naming the memory, the time columns). The ``ctx`` edges and consolidated facts are
handled apart (their owner is spelled inside other values)."""


def backdate(connection: sqlite3.Connection, times: dict[str, datetime]) -> None:
    """Move every row of `times` to its time, with what Mnemosyne derived from the write time.

    The working row's ``timestamp`` is set and the rest moves by the same amount (its
    ``created_at``; gists, annotations and facts of it). Its ``event_date`` is parsed again by
    Mnemosyne's own temporal parser with the new time as the reference, as the row's write would
    have parsed it then ("last Friday" depends on the day it is said), and ``occurred_on``
    annotations name the new day. Runs in the child (it imports Mnemosyne's parser).
    """
    from mnemosyne.core.temporal_parser import extract_temporal

    tables = {
        name
        for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    columns = {
        table: {row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')}
        for table in tables
    }
    deltas: dict[str, timedelta] = {}
    with connection:
        for memory_id, timestamp, created_at, content in connection.execute(
            "SELECT id, timestamp, created_at, content FROM working_memory"
        ).fetchall():
            if memory_id not in times:
                continue
            target = times[memory_id]
            delta = deltas[memory_id] = target - datetime.fromisoformat(timestamp)
            temporal = extract_temporal(content, reference=target)
            connection.execute(
                "UPDATE working_memory SET timestamp = ?, created_at = ? WHERE id = ?",
                (target.isoformat(timespec="microseconds"), _shifted(created_at, delta), memory_id),
            )
            if temporal.get("event_date"):
                connection.execute(
                    "UPDATE working_memory SET event_date = ?, event_date_precision = ?, "
                    "temporal_tags = ? WHERE id = ?",
                    (
                        temporal["event_date"],
                        temporal["event_date_precision"],
                        json.dumps(temporal["temporal_tags"]),
                        memory_id,
                    ),
                )
        for table, owner, time_columns in DERIVED_TIMES:
            present = [column for column in time_columns if column in columns.get(table, ())]
            if not present or owner not in columns.get(table, ()):
                continue
            for rowid, memory_id, *values in connection.execute(
                f'SELECT rowid, "{owner}", {", ".join(present)} FROM "{table}"'
            ).fetchall():
                if memory_id in deltas:
                    assignments = ", ".join(f'"{column}" = ?' for column in present)
                    shifted = [_shifted(value, deltas[memory_id]) for value in values]
                    connection.execute(
                        f'UPDATE "{table}" SET {assignments} WHERE rowid = ?', (*shifted, rowid)
                    )
        if "annotations" in tables:
            connection.executemany(
                "UPDATE annotations SET value = ? WHERE memory_id = ? AND kind = 'occurred_on'",
                [(times[memory_id].date().isoformat(), memory_id) for memory_id in deltas],
            )
        if "graph_edges" in tables:
            # The episodic graph links a memory's gist to its facts: gist_<id> -> fact_<id>_<n>.
            for rowid, source, timestamp, created_at in connection.execute(
                "SELECT rowid, source, timestamp, created_at FROM graph_edges"
            ).fetchall():
                delta = deltas.get(str(source).removeprefix("gist_"))
                if delta is not None:
                    connection.execute(
                        "UPDATE graph_edges SET timestamp = ?, created_at = ? WHERE rowid = ?",
                        (_shifted(timestamp, delta), _shifted(created_at, delta), rowid),
                    )
        if "consolidated_facts" in tables:
            # A consolidated fact is first and last seen in the memories it was read from.
            for rowid, sources in connection.execute(
                "SELECT rowid, sources_json FROM consolidated_facts"
            ).fetchall():
                seen = sorted(times[m] for m in json.loads(sources or "[]") if m in deltas)
                if seen:
                    connection.execute(
                        "UPDATE consolidated_facts SET first_seen = ?, last_seen = ?, "
                        "created_at = ?, updated_at = ? WHERE rowid = ?",
                        (
                            seen[0].isoformat(timespec="microseconds"),
                            seen[-1].isoformat(timespec="microseconds"),
                            seen[0].isoformat(sep=" ", timespec="seconds"),
                            seen[-1].isoformat(sep=" ", timespec="seconds"),
                            rowid,
                        ),
                    )
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def unshifted_times(connection: sqlite3.Connection, days: Sequence[date]) -> dict[str, int]:
    """``table.column`` -> how many values still start with one of `days` (the build's): what
    backdating missed. Empty for a complete backdating."""
    found: dict[str, int] = {}
    for (table,) in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE 'fts_%' AND name NOT LIKE 'vec_%'"
    ).fetchall():
        for row in connection.execute(f'PRAGMA table_info("{table}")').fetchall():
            column = row[1]
            if column in ("event_date", "temporal_tags"):
                continue  # a plan said yesterday for "tomorrow" is today's date, rightly
            for day in days:
                count = connection.execute(
                    f'SELECT count(*) FROM "{table}" WHERE typeof("{column}") = \'text\' '
                    f'AND "{column}" LIKE ?',
                    (f"{day.isoformat()}%",),
                ).fetchone()[0]
                if count:
                    found[f"{table}.{column}"] = found.get(f"{table}.{column}", 0) + count
    return found


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for package in ("mnemosyne-memory", "mnemosyne-hermes"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _write(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs in the child: write every turn (through the plugin when it can), then backdate."""
    started = time.monotonic()
    plan = generate(
        spec["conversations"],
        spec["sessions_per_conversation"],
        spec["turns_per_session"],
        spec["seed"],
    )
    db_path, hermes_home = Path(spec["db_path"]), Path(spec["hermes_home"])
    writer = _open_writer(spec["writer"], hermes_home, db_path, spec["sync_roles"])
    ids: dict[str, dict[str, str]] = {}
    for conversation in plan.conversations:
        for session in conversation.sessions:
            writer.start(conversation.chat_key)
            for exchange in session.exchanges:
                ids[exchange.key] = writer.write(
                    conversation.chat_key, exchange.user, exchange.assistant
                )
            writer.end()
    writer.close()
    connection = sqlite3.connect(db_path)
    # Anchored on the writing Mnemosyne's own clock (4.0 stamps UTC, 3.15 local time): its newest
    # row is "now", the home's last session is the day before, so every row is in the past.
    newest = connection.execute("SELECT max(timestamp) FROM working_memory").fetchone()[0]
    today = datetime.fromisoformat(newest).date()
    anchor = today - timedelta(days=1 + spec["age_days"])
    episodic = connection.execute("SELECT count(*) FROM episodic_memory").fetchone()[0]
    if spec["timeline"] == "sessions":
        times = row_times(plan, anchor, ids)
    else:  # as written, only aged
        times = {
            memory_id: datetime.fromisoformat(timestamp) - timedelta(days=spec["age_days"])
            for memory_id, timestamp in connection.execute(
                "SELECT id, timestamp FROM working_memory"
            )
        }
    backdate(connection, times)
    rows = dict(
        connection.execute(
            "SELECT CASE WHEN content LIKE '[USER] %' THEN 'user' WHEN content LIKE '[IDENTITY] %' "
            "THEN 'identity' WHEN content LIKE '[ASSISTANT] %' THEN 'assistant' ELSE 'other' END, "
            "count(*) FROM working_memory GROUP BY 1"
        ).fetchall()
    )
    unshifted = (
        unshifted_times(connection, sorted({today, date.today()}))
        if spec["timeline"] == "sessions" or spec["age_days"]
        else {}  # written and not aged: the build's date is every row's date
    )
    connection.close()
    return {
        "ids": ids,
        "today": today.isoformat(),
        "anchor": anchor.isoformat(),
        "writer": writer.name,
        "versions": _versions(),
        "rows": rows,
        "episodic_rows": episodic,
        "unshifted": unshifted,
        "write_seconds": round(time.monotonic() - started, 1),
    }


if __name__ == "__main__":
    child_main(_write)
