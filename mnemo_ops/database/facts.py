"""What a memory's text carries: chatter, or facts that must survive somewhere before it may go.

Shared by forgetting (what may be archived) and the recall guard (what counts as a lost fact); all
but `find_survivor` are pure functions over text:

- `is_chatter`: greetings, acknowledgements, fillers, laughter and emoji only: no content word.
- `content_words`: the words that say something (stop words and chatter words left out).
- `fact_items`: the specific things a text names: numbers, dates and times, names (a capitalised
  word inside a sentence), first-person tastes ("I prefer", "my favourite").
- `survivor`: which other text holds every fact item and nearly every content word of this
  one, so this one can go without the fact going with it;
- `find_survivor`: that text looked up among the current working memories through the full-text
  index (``fts_working``): a restatement shares the longest content words.

A role prefix the Hermes plugin writes (``[USER] ``, ``[ASSISTANT] ``, ``[IDENTITY] ``) is not part of
the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import apsw

from mnemo_ops.database.fts_query import quote, tokens

_ROLE = re.compile(r"^\s*\[[A-Z_]+\]\s*")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+(?:[.,:/-]\d+)*")
_SENTENCE_END = re.compile(r"[.!?]\s+$|^\s*$")


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOP_WORDS = _word_set(
    """a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't down during each few for from further had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into
    is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only
    or other ought our ours ourselves out over own same shan't she she'd she'll she's should
    shouldn't so some such than that that's the their theirs them themselves then there there's
    these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
    who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your
    yours yourself yourselves just also really quite still even much many lot lots one thing things
    get got gonna wanna yes yeah yep yup"""
)
"""Words that carry no content on their own (English; lower case)."""

CHATTER_WORDS = _word_set(
    """hi hello hey hiya heya howdy greetings morning afternoon evening night goodnight bye goodbye
    cya later soon thanks thank thx ty cheers welcome please pls ok okay okey k kk alright fine
    sure great good cool nice neat awesome amazing wonderful lovely perfect excellent brilliant
    sweet fantastic glad happy wow whoa oh ah ahh aha uh um umm hmm hm mm huh lol lmao rofl haha
    hahaha hehe heh omg oops yay nope nah right true exactly indeed agreed totally absolutely funny
    definitely probably maybe sounds seems see know guess think well anyway anyways ah so like
    love that's sounds appreciate care take talk chat catch you soon again day have nice"""
)
"""Words of greetings, acknowledgements and fillers: a text of only these and stop words is chatter."""

FIRST_PERSON = _word_set("i i'm i've i'd i'll me my mine myself we we're we've our ours us")

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DAYS = "monday tuesday wednesday thursday friday saturday sunday"
_RELATIVE = "yesterday today tomorrow tonight weekend ago last next birthday anniversary christmas"
DATE_WORDS = _word_set(_MONTHS + " " + _DAYS + " " + _RELATIVE)
"""Words that date a statement (a month, a weekday, a relative day)."""

_TASTE = re.compile(
    r"\b(i|we)\s+(really\s+|honestly\s+|absolutely\s+|just\s+|truly\s+)?"
    r"(prefer|love|like|hate|dislike|enjoy|adore|can't stand|cannot stand|don't like|"
    r"do not like|am allergic|'m allergic)\b|\bmy (favourite|favorite)\b",
    re.IGNORECASE,
)

SURVIVING_SHARE = 0.9
"""The share of a text's content words another text must hold for the first to survive in it."""


def body(text: str | None) -> str:
    """The text without the role prefix the Hermes plugin writes."""
    return _ROLE.sub("", text or "", count=1)


def words(text: str | None) -> list[str]:
    """The words and numbers of `text` (role prefix left out), lower-cased."""
    return [word.lower().replace("’", "'") for word in _WORD.findall(body(text))]


def content_words(text: str | None) -> set[str]:
    """The words that say something: not stop words, not chatter words, two letters or a number."""
    return {
        word
        for word in words(text)
        if word not in STOP_WORDS
        and word not in CHATTER_WORDS
        and (len(word) >= 2 or word[0].isdigit())
    }


def is_chatter(text: str | None) -> bool:
    """True when `text` says nothing a later question could ask about: greetings, thanks, fillers,
    laughter, emoji and punctuation only (no content word, no number)."""
    return not content_words(text)


def fact_items(text: str | None) -> set[str]:
    """The specific things `text` names, as ``kind:value`` items (``number:3``, ``date:tuesday``,
    ``name:biscuit``, ``taste:prefer``)."""
    found: set[str] = set()
    plain = body(text)
    for match in _WORD.finditer(plain):
        word = match.group(0)
        lower = word.lower()
        if word[0].isdigit():
            found.add(f"number:{lower}")
        elif lower in DATE_WORDS:
            found.add(f"date:{lower}")
        elif (
            word[0].isupper()
            and len(word) >= 3
            and lower not in STOP_WORDS
            and lower not in CHATTER_WORDS
            and not _SENTENCE_END.search(plain[: match.start()])
        ):
            found.add(f"name:{lower}")
    taste = _TASTE.search(plain)
    if taste:
        found.add(f"taste:{(taste.group(3) or taste.group(4) or '').lower()}")
    return found


def states_about_self(text: str | None) -> bool:
    """True when `text` is a first-person statement with content (the user about their world)."""
    said = words(text)
    return any(word in FIRST_PERSON for word in said) and len(content_words(text)) >= 2


def carries_fact(text: str | None) -> bool:
    """True when `text` holds something a later question could ask about: it is not chatter."""
    return not is_chatter(text)


def survivor(text: str | None, others: Iterable[tuple[str, str | None]]) -> str | None:
    """The id of the first of `others` (id, text) that holds every fact item and nearly every
    content word of `text` (`SURVIVING_SHARE`), or None: then `text` is the only place its facts
    are kept. Chatter has nothing to keep: the first id, or None when there is no other."""
    wanted_words = content_words(text)
    wanted_items = {item.partition(":")[2] for item in fact_items(text) if ":" in item}
    wanted_items -= {"prefer", "love", "like", "hate", "dislike", "enjoy", "adore"}
    for other_id, other in others:
        held = content_words(other) | {word for word in words(other)}
        if not wanted_items <= held:
            continue
        if len(wanted_words & held) >= SURVIVING_SHARE * len(wanted_words):
            return other_id
    return None


def specificity(text: str | None) -> int:
    """How many distinct specific items `text` names (numbers, dates, names, a taste): the ranking
    the importance stage raises by."""
    return len(fact_items(text))


SURVIVOR_TERMS = 6
"""Terms a survivor must match in the full-text index (the text's longest content words)."""
SURVIVORS_READ = 20
"""Index hits read per text, best first."""


def find_survivor(
    connection: apsw.Connection, text: str | None, excluded: Iterable[str] = ()
) -> str | None:
    """The id of a current working memory (not in `excluded`) that holds the facts of `text`, or
    None. Without the full-text index (``fts_working``) nothing is found: the text is kept."""
    excluded = set(excluded)
    wanted = content_words(text) | {item.partition(":")[2] for item in fact_items(text)}
    terms = sorted(
        (term for term in tokens(" ".join(sorted(wanted))) if term in wanted),
        key=lambda term: (-len(term), term),
    )[:SURVIVOR_TERMS]
    if not terms:
        return None
    has_index = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'fts_working'"
    ).fetchone()
    if not has_index:
        return None
    rows = connection.execute(
        "SELECT w.id, w.content FROM (SELECT id, bm25(fts_working) AS score FROM fts_working "
        "WHERE fts_working MATCH ? ORDER BY score, rowid LIMIT ?) h "
        "JOIN working_memory w ON w.id = h.id "
        "WHERE w.valid_until IS NULL AND (w.superseded_by IS NULL OR w.superseded_by = '') "
        "ORDER BY h.score, w.id",
        (" AND ".join(quote(term) for term in terms), SURVIVORS_READ + len(excluded)),
    ).fetchall()
    return survivor(text, [(row[0], row[1]) for row in rows if row[0] not in excluded])
