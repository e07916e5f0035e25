"""Graduation: what the owner told the agent in one conversation reaches every later one.

The Hermes plugin's prefetch is session-scoped: a ``[USER] ...`` row reaches only the session it was
written in; ``scope='global'`` rows and the owner's canonical facts are all that cross to a new
conversation. This stage reads the owner's own statements across every session and writes, for
what states a specific fact, one global row through Mnemosyne's own API (``mnemosyne.graduation``,
in a child process):

- **what is read**: live working memories that are the user's own words: ``[USER] ...`` rows of
  source ``conversation`` (the plugin's turns), and rows of source ``user`` or ``fact`` with
  veracity ``stated``; not already global; authored by nobody or by the owner. A row is judged
  once (``sleep_graduation_sources``).
- **what graduates**: a statement of fact or taste (``importance.states_a_fact``: a number, a date
  word, a name, a first-person taste), never chatter (``facts.is_chatter``), most specific first.
- **how it is distilled**: with a model (``models.model``, through the model layer, task
  ``graduation``): short standalone statements in the user's own words, each citing the rows it
  comes from, with up to three words naming the kind of thing ("dog", "job") a later question may
  use instead of the user's words. Without one (or for rows withheld from a remote model): the
  statement itself without the role prefix, with the kind words of a small table (``KIND_OF``:
  "greyhound" is a dog, "sister" family) (extractive). Either way relative dates are resolved
  against the day the row was said ("yesterday (2026-03-04)") and the row ends with that day.
- **faithful**: every content word, number and date of a distilled statement must be in its
  source rows (a date may also be what a relative phrase of a source names, said that day); a
  statement that fails is not written, is counted (``unfaithful``), and its rows graduate
  extractively instead. The kind words are checked apart: common words only (no number, date or
  name), so they can name a kind but never add a fact.
- **what is written**: source ``fact``, scope ``global``, veracity ``inferred`` (so the canonical
  trigger does not make it a canonical fact the plugin tokenises every turn), the owner as
  ``author_id``, importance graded as the importance stage grades, metadata ``{"derived_from":
  [source ids], "graduation": {"key", "owner", "night", "said_on", "confirmations", "method"}}``
  and a ``mnemo:derives`` edge to each source: the lineage, as NREM's summaries name theirs.
- **restatements merge**: a statement whose facts a graduated row already holds, or that holds
  every fact of one (``facts.survivor``), reinforces that row (its id added to ``derived_from``,
  ``confirmations`` + 1, one more derives edge) instead of writing another.
- **a changed fact supersedes**: when every source of a graduated row was superseded (the
  reinforcement stage, or Mnemosyne, closed it for a newer statement), the row is closed
  (``valid_until``) with ``superseded_by`` naming the graduated row of the newer statement, or the
  newer statement itself while it has not graduated; nothing is deleted, so the history stays.
- **bounded**: at most ``sleep.graduate_per_night`` new rows a night and ``sleep.graduate_max_rows``
  live ones per owner: every global row is a candidate in every session's recall.
- **boundaries**: a home several people talk to is one where a global row would reach all of
  them. It is recognised by a user row authored by someone other than the owner, or by a session
  of a group or channel chat (Hermes' gateway keys read ``...:group:<id>``, ``...:channel:<id>``).
  Nothing graduates there unless ``sleep.graduate_shared_home`` is on, and then only rows stamped
  with the owner as author. A Hermes profile with its own home (or its own bank, the plugin's
  ``profile_isolation``) has its own database: the stage reads and writes that one only.

Each write is recorded in state.db (``sleep_graduation``) before it is made; a run killed between
the two leaves planned entries that the next run writes first (the child finds a row it stored
before by its key). The slow work (reading, distilling, the model) happens before the child opens
its write transactions, each of which is one short write. A source of a graduated row is never
archived by forgetting. ``mnemo-ops graduated restore`` closes graduated rows (``valid_until``),
where they are still ours.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from datetime import date, datetime, timedelta
from typing import Any

import apsw

from mnemo_ops.database import facts, transactions
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.jobs.evening_batch.sleep import importance, store
from mnemo_ops.jobs.evening_batch.sleep.context import SleepRun
from mnemo_ops.mnemosyne import graduation as writer
from mnemo_ops.mnemosyne import versions
from mnemo_ops.models import EXTRACTIVE, Evidence, MalformedAnswer, Request, is_private_row

STORE, REINFORCE, SUPERSEDE = "store", "reinforce", "supersede"
GRADUATED, MERGED, PASSED, WITHHELD = "graduated", "merged", "passed", "withheld"
SHARED_HOME = "shared-home"
TASK = "graduation"
MODEL_ROWS = 40
"""Rows sent to the model in one request."""
KIND_WORDS = 3
"""Kind words a model may add to one statement."""
STATEMENT_CHARS = 400
"""A distilled statement longer than this is not a short statement: the answer is refused."""
FRAMING_WORDS = frozenset({"user", "said"})
"""Words a statement may hold that its sources need not: how it names who said it and when."""
GROUP_SESSION = re.compile(r":(?:group|supergroup|channel|thread)(?::|$)", re.IGNORECASE)
"""A session key of a chat several people write in (Hermes' gateway keys)."""

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_RELATIVE = re.compile(
    r"\b(?:(yesterday|today|tonight|tomorrow)"
    r"|(last|next|this) (week|month|year|weekend|" + "|".join(_WEEKDAYS) + r")"
    r"|(\d+|a|an|one|two|three|four|five|six) (day|week|month)s? ago)\b",
    re.IGNORECASE,
)
_KIND = re.compile(r"^[a-z][a-z -]{1,40}$")


def _kinds_of(table: str) -> dict[str, str]:
    return {
        word: kind.strip()
        for line in table.strip().splitlines()
        for kind, _, words in [line.partition(":")]
        for word in words.split()
    }


KIND_OF = _kinds_of(
    """
    dog: greyhound labrador retriever poodle terrier beagle collie spaniel dachshund husky puppy
    cat: kitten tabby siamese persian
    pet: dog cat rabbit hamster parrot goldfish tortoise
    family: sister brother mother father mum mom dad daughter son aunt uncle cousin grandmother
    family: grandfather grandma grandpa niece nephew wife husband
    partner: wife husband girlfriend boyfriend fiance fiancee spouse
    job: engineer nurse teacher doctor developer designer accountant lawyer manager chef
    job: electrician plumber carpenter architect pilot
    illness: flu covid migraine asthma diabetes allergy
    trip: flight flying holiday vacation
    home: flat apartment house
    """
)
"""Kind words for specifics a statement names (extractive): "a greyhound" is also "a dog". A kind
is a common word and adds no fact; a question rarely repeats the user's own words."""


@dataclasses.dataclass
class Draft:
    """One statement that may graduate: its text (relative dates resolved), the rows it comes
    from, the day it was said, the kind words, and what made it (``extractive`` or a model id)."""

    statement: str
    sources: list[str]
    said_on: date | None
    kinds: tuple[str, ...] = ()
    method: str = EXTRACTIVE


def said_on(stamp: str | None) -> date | None:
    """The local day a row was written, from its timestamp (the line's time base)."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(versions.local_time(str(stamp))).date()
    except ValueError:
        return None


def _resolved(match: re.Match, day: date) -> str:
    """The date a relative phrase names, said on `day` (a day, or a week's / month's start)."""
    single, which, unit, count, count_unit = match.groups()
    if single:
        offset = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}[single.lower()]
        return (day + timedelta(days=offset)).isoformat()
    if which:
        which, unit = which.lower(), unit.lower()
        step = {"last": -1, "next": 1, "this": 0}[which]
        if unit in _WEEKDAYS:
            target = _WEEKDAYS.index(unit)
            delta = (target - day.weekday()) % 7
            if step < 0:
                delta = delta - 7 if delta > 0 else -7
            elif step > 0:
                delta = delta or 7
            return (day + timedelta(days=delta)).isoformat()
        if unit in ("week", "weekend"):
            start = day - timedelta(days=day.weekday()) + timedelta(weeks=step)
            if unit == "weekend":
                start += timedelta(days=5)
            return f"week of {start.isoformat()}" if unit == "week" else start.isoformat()
        if unit == "month":
            month = day.month + step
            year = day.year + (month - 1) // 12
            return f"{year:04d}-{(month - 1) % 12 + 1:02d}"
        return f"{day.year + step:04d}"
    amount = int(count) if count.isdigit() else _NUMBERS[count.lower()]
    days = {"day": 1, "week": 7, "month": 30}[count_unit.lower()] * amount
    moment = day - timedelta(days=days)
    return moment.isoformat() if count_unit.lower() != "month" else moment.strftime("%Y-%m")


def resolved_dates(content: str, day: date | None) -> set[str]:
    """The dates the relative phrases of `content` name, said on `day` (as the words they read)."""
    if day is None:
        return set()
    return {
        word
        for match in _RELATIVE.finditer(facts.body(content))
        for word in facts.words(_resolved(match, day))
    }


def distilled(content: str, day: date | None) -> str:
    """The statement as it graduates extractively: no role prefix, relative dates resolved."""
    text = " ".join(facts.body(content).split())
    if day is None:
        return text
    return _RELATIVE.sub(lambda match: f"{match.group(0)} ({_resolved(match, day)})", text)


def composed(draft: Draft) -> str:
    """The graduated row's text: the statement, the day it was said, and the kind words."""
    notes = []
    if draft.said_on is not None:
        notes.append(f"said on {draft.said_on.isoformat()}")
    if draft.kinds:
        notes.append("about: " + ", ".join(draft.kinds))
    text = draft.statement.rstrip()
    return f"{text} ({'; '.join(notes)})" if notes else text


def _plain(word: str) -> str:
    """A word without a possessive ending ("caroline's" -> "caroline")."""
    return word[:-2] if word.endswith(("'s", "’s")) else word


def unsupported(statement: str, sources: list[tuple[str, date | None]]) -> set[str]:
    """The content words, numbers and dates of `statement` that none of its `sources` (text, day
    said) holds; a date also counts as held when a relative phrase of a source said that day names
    it, or it is that day. Empty: the statement is faithful to its sources."""
    held: set[str] = set(FRAMING_WORDS)
    for text, day in sources:
        held |= {_plain(word) for word in facts.words(text)}
        held |= resolved_dates(text, day)
        if day is not None:
            held.add(day.isoformat())
    wanted = {_plain(word) for word in facts.content_words(statement)}
    wanted |= {item.partition(":")[2] for item in facts.fact_items(statement)}
    return {word for word in wanted if word and word not in held}


def kind_words(kinds: Any) -> tuple[str, ...]:
    """The usable kind words of a model's answer: lower-case common words (no number, no date, no
    capitalised word, which may be a name), at most `KIND_WORDS`, so they can name a kind but never
    add a fact."""
    usable: list[str] = []
    for kind in kinds if isinstance(kinds, list) else []:
        text = " ".join(str(kind).split())
        if (
            _KIND.match(text)  # lower case: a capitalised word is a name, a name is a fact
            and len(text.split()) <= 3
            and not any(word in facts.DATE_WORDS for word in facts.words(text))
            and text not in usable
        ):
            usable.append(text)
    return tuple(usable[:KIND_WORDS])


def graduation_key(owner: str, text: str) -> str:
    """The record's key: the owner and the statement's words."""
    words = " ".join(facts.words(text))
    return hashlib.sha256(f"{owner}\n{words}".encode()).hexdigest()[:24]


def _is_users_statement(content: str | None, source: str | None, veracity: str | None) -> bool:
    if not isinstance(content, str):
        return False
    if source == importance.SOURCE:
        return content.startswith(importance.USER_PREFIX)
    return source in ("user", "fact") and veracity == "stated"


_USER_ROWS = (
    "((source = 'conversation' AND substr(content, 1, 7) = '[USER] ') "
    "OR (source IN ('user', 'fact') AND veracity = 'stated'))"
)


def shared_home(connection: apsw.Connection, owner: str) -> str | None:
    """Why the home is one several people talk to (None: one person): another author's row, or a
    session of a group or channel chat."""
    other = connection.execute(
        "SELECT count(*) FROM working_memory WHERE author_id IS NOT NULL AND author_id != '' "
        f"AND author_id != ? AND {_USER_ROWS}",
        (owner,),
    ).fetchone()[0]
    if other:
        return "another-author"
    for (session,) in connection.execute(
        f"SELECT DISTINCT session_id FROM working_memory WHERE {_USER_ROWS}"
    ):
        if session and GROUP_SESSION.search(str(session)):
            return "group-chat"
    return None


def candidates(run: SleepRun, state_db, connection: apsw.Connection) -> tuple[list[dict], int]:
    """The owner's statements not judged yet, most specific first, then oldest: (rows, rows read)."""
    judged = {
        row[0]
        for row in state_db.conn.execute(f"SELECT memory_key FROM {store.GRADUATION_SOURCES}")
    }
    shared = run.options.graduate_shared_home
    found, read = [], 0
    for memory_id, content, source, veracity, stamp, author, scope, metadata in connection.execute(
        "SELECT id, content, source, veracity, timestamp, author_id, scope, metadata_json "
        "FROM working_memory WHERE (valid_until IS NULL OR valid_until = '') "
        "AND (superseded_by IS NULL OR superseded_by = '') "
        f"AND coalesce(scope, 'session') != 'global' AND {_USER_ROWS} ORDER BY rowid"
    ):
        read += 1
        key = store.key_of(store.WORKING, memory_id)
        if key in judged or not _is_users_statement(content, source, veracity):
            continue
        if (author or "") != run.owner and (shared or author):
            continue  # another's row; in a shared home only the owner's own stamped rows
        found.append(
            {
                "memory_id": memory_id,
                "key": key,
                "content": content,
                "states_a_fact": importance.states_a_fact(content)
                and not facts.is_chatter(content),
                "said_on": said_on(stamp),
                "stamp": stamp or "",
                "private": is_private_row(scope, _metadata(metadata)),
            }
        )
    found.sort(key=lambda row: (-facts.specificity(row["content"]), row["stamp"]))
    return found, read


def _metadata(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _live_graduated(state_db, connection: apsw.Connection, owner: str) -> list[dict[str, Any]]:
    """The owner's graduated rows still live: record id, memory id, content, sources."""
    live = []
    for record in store.rows(
        state_db,
        f"SELECT id, memory_id FROM {store.GRADUATION} WHERE op = ? AND owner = ? "
        "AND applied = ? AND restored_at IS NULL AND memory_id IS NOT NULL ORDER BY id",
        (STORE, owner, store.APPLIED),
    ):
        row = connection.execute(
            "SELECT content, metadata_json FROM working_memory WHERE id = ? "
            "AND (valid_until IS NULL OR valid_until = '') "
            "AND (superseded_by IS NULL OR superseded_by = '')",
            (record["memory_id"],),
        ).fetchone()
        if row is not None:
            sources = _metadata(row[1]).get(writer.LINEAGE_KEY) or []
            live.append(
                {
                    "record": record["id"],
                    "memory_id": record["memory_id"],
                    "content": row[0],
                    "sources": [str(source) for source in sources],
                }
            )
    return live


def _merge_target(text: str, graduated: list[tuple[Any, str]]) -> Any:
    """The graduated entry (its handle) `text` restates: one holds its facts, or it holds theirs."""
    for handle, other in graduated:
        if facts.survivor(text, [(handle, other)]) is not None:
            return handle
        if facts.survivor(other, [(handle, text)]) is not None:
            return handle
    return None


def extractive_kinds(statement: str) -> tuple[str, ...]:
    """The kind words of `KIND_OF` for the specifics `statement` names, not already in it."""
    said = set(facts.words(statement))
    found = [KIND_OF[word] for word in facts.words(statement) if word in KIND_OF]
    return tuple(dict.fromkeys(kind for kind in found if kind not in said))[:KIND_WORDS]


def _extractive(row: dict[str, Any]) -> Draft:
    statement = distilled(row["content"], row["said_on"])
    return Draft(statement, [row["memory_id"]], row["said_on"], extractive_kinds(statement))


def model_request(rows: list[dict[str, Any]]) -> Request:
    """The model's question for `rows` (the owner's statements): standalone statements in the
    user's own words, each citing its rows, with kind words."""

    def validate(parsed: Any, sent: frozenset[str]) -> list[dict[str, Any]]:
        statements = parsed.get("statements") if isinstance(parsed, dict) else None
        if not isinstance(statements, list):
            raise MalformedAnswer('expected {"statements": [...]}')
        usable = []
        for entry in statements:
            if not isinstance(entry, dict):
                raise MalformedAnswer("a statement is not an object")
            refs = [ref for ref in entry.get("refs") or [] if ref in sent]
            text = entry.get("text")
            if not refs or not isinstance(text, str) or not text.strip():
                raise MalformedAnswer("a statement needs its text and the refs it comes from")
            if len(text) > STATEMENT_CHARS:
                raise MalformedAnswer("a statement is too long")
            usable.append(
                {"refs": refs, "text": " ".join(text.split()), "kinds": entry.get("kinds")}
            )
        return usable

    return Request(
        task=TASK,
        system=(
            "You turn what a person told their assistant into short standalone statements of fact "
            "that the assistant will remember in every later conversation."
        ),
        instructions=(
            "Each evidence line is something the user said, with the day it was said. For each "
            "line that states a lasting fact about the user or their world (a person, a pet, a "
            "place, a plan, an event and its date, a preference and its reason), write one "
            "statement with only the user's own words (first person as they said it), every "
            "name, number and date kept, and a relative date ('yesterday', 'last Friday') "
            "replaced by the date it names (YYYY-MM-DD). Several lines saying one thing make one "
            "statement citing all of them. Leave out chatter and what is not a fact. Add up to "
            "three common words naming the kind of thing (a pet's species, 'job', 'city') that a "
            'later question may use. Answer JSON: {"statements": [{"refs": ["m:<id>", ...], '
            '"text": "...", "kinds": ["dog"]}]}'
        ),
        evidence=[
            Evidence(
                ref=f"m:{row['memory_id']}",
                text=(
                    f"(said on {row['said_on'].isoformat() if row['said_on'] else 'unknown'}) "
                    + " ".join(facts.body(row["content"]).split())
                ),
                private=row["private"],
            )
            for row in rows
        ],
        validate=validate,
    )


def _drafts(
    rows: list[dict[str, Any]], layer, totals: dict[str, Any], room: int
) -> tuple[list[Draft], set[str], set[str]]:
    """Tonight's drafts for the fact-stating `rows`, the ids the model passed over (judged: not a
    fact), and the ids left for a later night (the model failed or is over its budget). The model
    is asked only until `room` drafts are there: the rest wait for a later night, unread. With no
    room, only restatements of graduated rows can be written: the extractive drafts find them."""
    if layer is None or not layer.use_model or room == 0:
        return [_extractive(row) for row in rows], set(), set()
    by_id = {row["memory_id"]: row for row in rows}
    drafts: list[Draft] = []
    passed: set[str] = set()
    later: set[str] = set()
    for start in range(0, len(rows), MODEL_ROWS):
        if len(drafts) >= room:
            break
        chunk = rows[start : start + MODEL_ROWS]
        answer = layer.ask(model_request(chunk))
        withheld = {ref[2:] for ref in answer.withheld}
        if not answer.ok:
            if answer.reason in ("failed", "malformed", "budget"):
                # The next request would fare no better tonight: these rows and the rest wait.
                later |= {row["memory_id"] for row in chunk}
                totals["deferred"] += len(chunk)
                break
            if answer.reason == "dry-run":
                totals["would_send_to_model"] += len(chunk) - len(withheld)
            drafts.extend(_extractive(row) for row in chunk)
            continue
        cited: set[str] = set()
        for entry in answer.value:
            sources = [ref[2:] for ref in entry["refs"] if ref[2:] in by_id]
            source_rows = [by_id[memory_id] for memory_id in sources]
            if not source_rows:
                continue
            cited.update(sources)
            missing = unsupported(
                entry["text"], [(row["content"], row["said_on"]) for row in source_rows]
            )
            if missing:
                totals["unfaithful"] += 1
                totals["unfaithful_words"].extend(sorted(missing)[:5])
                drafts.extend(_extractive(row) for row in source_rows)
                continue
            days = [row["said_on"] for row in source_rows if row["said_on"] is not None]
            drafts.append(
                Draft(
                    entry["text"],
                    sources,
                    max(days) if days else None,
                    kind_words(entry.get("kinds")),
                    answer.method,
                )
            )
        for row in chunk:
            memory_id = row["memory_id"]
            if memory_id in withheld:
                drafts.append(_extractive(row))
            elif memory_id not in cited:
                passed.add(memory_id)
    return drafts, passed, later


def _checked(drafts: list[Draft], rows: dict[str, dict[str, Any]], totals) -> list[Draft]:
    """The drafts that are faithful to their sources (every one is checked, extractive ones too)."""
    kept = []
    for draft in drafts:
        sources = [(rows[i]["content"], rows[i]["said_on"]) for i in draft.sources]
        if draft.method == EXTRACTIVE and unsupported(draft.statement, sources):
            totals["unfaithful"] += 1
            continue
        kept.append(draft)
    return kept


def _graduated_as(state_db, memory_id: str) -> str | None:
    """The memory id of the graduated row a source went into, when it graduated or merged."""
    row = state_db.conn.execute(
        f"SELECT g.memory_id FROM {store.GRADUATION_SOURCES} s JOIN {store.GRADUATION} g "
        "ON g.id = s.graduation_id WHERE s.memory_key = ? AND g.memory_id IS NOT NULL "
        "AND g.restored_at IS NULL",
        (store.key_of(store.WORKING, memory_id),),
    ).fetchone()
    return row[0] if row else None


def _changed(connection: apsw.Connection, live: list[dict[str, Any]]) -> list[tuple[dict, list]]:
    """The live graduated rows whose every source was superseded, with the newer statements."""
    changed = []
    for entry in live:
        if not entry["sources"]:
            continue
        states = connection.execute(
            "SELECT id, valid_until, superseded_by FROM working_memory WHERE id IN "
            f"({','.join('?' * len(entry['sources']))})",
            entry["sources"],
        ).fetchall()
        closed = [row for row in states if row[1] and row[1] != ""]
        newer = [row[2] for row in states if row[2]]
        if states and len(closed) == len(states) == len(entry["sources"]) and newer:
            changed.append((entry, newer))
    return changed


def plan(run: SleepRun, state_db, connection: apsw.Connection, layer=None) -> dict[str, Any]:
    """Record tonight's graduations, merges and supersessions (state.db) before anything is
    written."""
    options, owner = run.options, run.owner
    totals: dict[str, Any] = {
        "planned": 0,
        "merged": 0,
        "superseded": 0,
        "rows_read": 0,
        "passed": 0,
        "unfaithful": 0,
        "unfaithful_words": [],
        "deferred": 0,
        "would_send_to_model": 0,
        "methods": {},
    }
    shared = shared_home(connection, owner)
    if shared and not options.graduate_shared_home:
        return {**totals, "skipped": SHARED_HOME, "why": shared}
    rows, totals["rows_read"] = candidates(run, state_db, connection)
    live = _live_graduated(state_db, connection, owner)
    totals["live_before"] = len(live)
    room = max(0, min(options.graduate_per_night, options.graduate_max_rows - len(live)))
    # A statement whose global row took a chat's own evidence out of the agent's lines (the recall
    # guard's finding on this run's trial) stays in its chat, now and on later nights. Its place is
    # not refilled tonight: the next statements in line would take the same lines, so the retry
    # writes what the refused try wrote, less what crowded.
    judged: list[tuple[str, str, Any]] = [
        (row["key"], WITHHELD, None) for row in rows if row["memory_id"] in run.withheld
    ]
    room = max(0, room - len(judged))
    rows = [row for row in rows if row["memory_id"] not in run.withheld]
    by_id = {row["memory_id"]: row for row in rows}
    judged += [(row["key"], PASSED, None) for row in rows if not row["states_a_fact"]]
    stating = [row for row in rows if row["states_a_fact"]]
    drafts, passed, _later = _drafts(stating, layer, totals, room)
    judged += [(by_id[memory_id]["key"], PASSED, None) for memory_id in sorted(passed)]
    drafts = _checked(drafts, by_id, totals)
    # Merge targets: the live graduated rows (by memory id) and tonight's new ones (by position).
    targets: list[tuple[Any, str]] = [
        (("row", entry["memory_id"]), entry["content"]) for entry in live
    ]
    new: list[tuple[Draft, str]] = []
    merges: dict[Any, list[str]] = {}
    for draft in drafts:
        target = _merge_target(draft.statement, targets)
        if target is not None:
            merges.setdefault(target, []).extend(draft.sources)
            judged += [(by_id[i]["key"], MERGED, target) for i in draft.sources]
            continue
        if len(new) >= room:
            continue  # not judged: a later night, with room, takes it
        handle = ("new", len(new))
        new.append((draft, graduation_key(owner, draft.statement)))
        targets.append((handle, composed(draft)))  # as the live rows read: "said on" too
        judged += [(by_id[i]["key"], GRADUATED, handle) for i in draft.sources]
    supersessions = []
    for entry, newer in _changed(connection, live):
        replaced_by, key = None, None
        for memory_id in newer:
            position = next(
                (n for n, (draft, _) in enumerate(new) if memory_id in draft.sources), None
            )
            if position is not None:
                key = new[position][1]
                break
            replaced_by = replaced_by or _graduated_as(state_db, memory_id)
        if key is None and replaced_by is None:
            # The newer statement has not graduated (yet): the row still points to what replaced
            # it, so the close is a supersession, never an unexplained loss.
            replaced_by = newer[0]
        supersessions.append((entry, key, replaced_by))
    now = isoformat(utc_now())
    ids: dict[Any, int] = {}
    with state_db.conn:
        for position, (draft, key) in enumerate(new):
            draft.sources = list(dict.fromkeys(draft.sources + merges.pop(("new", position), [])))
            cursor = state_db.conn.execute(
                f"INSERT INTO {store.GRADUATION} (op, graduation_key, owner, night, content, "
                "derived_from, said_on, importance, method, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    STORE,
                    key,
                    owner,
                    run.night.key,
                    composed(draft),
                    json.dumps(draft.sources),
                    draft.said_on.isoformat() if draft.said_on else None,
                    max(
                        importance.graded(options.importance_raise_to, by_id[i]["content"], 0)
                        for i in draft.sources
                    ),
                    draft.method,
                    now,
                ),
            )
            ids[("new", position)] = cursor.lastrowid
            totals["methods"][draft.method] = totals["methods"].get(draft.method, 0) + 1
        for target, sources in merges.items():
            _, memory_id = target
            state_db.conn.execute(
                f"INSERT INTO {store.GRADUATION} (op, graduation_key, owner, night, derived_from, "
                "memory_id, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (REINFORCE, memory_id, owner, run.night.key, json.dumps(sources), memory_id, now),
            )
            ids[target] = next(e["record"] for e in live if e["memory_id"] == memory_id)
        for entry, key, replaced_by in supersessions:
            state_db.conn.execute(
                f"INSERT INTO {store.GRADUATION} (op, graduation_key, owner, night, derived_from, "
                "memory_id, replaced_by, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    SUPERSEDE,
                    key or entry["memory_id"],
                    owner,
                    run.night.key,
                    json.dumps(entry["sources"]),
                    entry["memory_id"],
                    replaced_by,
                    now,
                ),
            )
        state_db.conn.executemany(
            f"INSERT OR IGNORE INTO {store.GRADUATION_SOURCES} (memory_key, graduation_id, night, "
            "outcome) VALUES (?, ?, ?, ?)",
            [(key, ids.get(target), run.night.key, outcome) for key, outcome, target in judged],
        )
    totals.update(
        planned=len(new),
        merged=sum(1 for _, outcome, _ in judged if outcome == MERGED),
        superseded=len(supersessions),
        passed=sum(1 for _, outcome, _ in judged if outcome == PASSED),
        withheld=sum(1 for _, outcome, _ in judged if outcome == WITHHELD),
        unfaithful_words=totals["unfaithful_words"][:10],
    )
    return totals


def write_planned(run: SleepRun, state_db) -> dict[str, int]:
    """Write every planned entry (tonight's or a killed run's) through Mnemosyne, in a child."""
    planned = list(
        store.rows(
            state_db,
            f"SELECT * FROM {store.GRADUATION} WHERE applied = ? ORDER BY id",
            (store.PLANNED,),
        )
    )
    done = {"stored": 0, "reinforced": 0, "superseded": 0, "given_up": 0}
    if not planned:
        return done
    actions = []
    for entry in planned:
        action = {"op": entry["op"], "derived_from": json.loads(entry["derived_from"])}
        if entry["op"] == STORE:
            action.update(
                key=entry["graduation_key"],
                content=entry["content"],
                night=entry["night"],
                said_on=entry["said_on"],
                importance=entry["importance"],
                method=entry["method"] or EXTRACTIVE,
            )
        elif entry["op"] == SUPERSEDE:
            action.update(
                memory_id=entry["memory_id"],
                key=entry["graduation_key"],
                replaced_by=entry["replaced_by"],
            )
        else:
            action["memory_id"] = entry["memory_id"]
        actions.append(action)
    run.before_write()
    outcomes = writer.write_graduated(
        run.db_path,
        run.hermes_home or run.db_path.parent,
        run.owner,
        actions,
        home=run.private_home,
    )
    with state_db.conn:
        for entry, outcome in zip(planned, outcomes):
            memory_id = outcome.get("memory_id")
            if entry["op"] == STORE:
                done["stored"] += bool(memory_id) and not outcome.get("existed")
            elif entry["op"] == REINFORCE:
                done["reinforced"] += int(outcome.get("added") or 0)
            else:
                done["superseded"] += bool(outcome.get("closed"))
            done["given_up"] += not memory_id
            state_db.conn.execute(
                f"UPDATE {store.GRADUATION} SET applied = ?, memory_id = ?, "
                "replaced_by = coalesce(?, replaced_by) WHERE id = ?",
                (
                    store.APPLIED if memory_id else store.ABANDONED,
                    memory_id,
                    outcome.get("replaced_by"),
                    entry["id"],
                ),
            )
    return done


def graduate(run: SleepRun, layer=None) -> dict[str, Any]:
    """Plan and write tonight's graduations (module docstring); the stage's stats. `layer`: the
    run's model layer (None: extractive)."""
    state_db = run.open_state()
    try:
        leftover = write_planned(run, state_db)
        connection = run.open_memory(readonly=True)
        try:
            planned = plan(run, state_db, connection, layer)
        finally:
            connection.close()
        written = write_planned(run, state_db)
    finally:
        state_db.close()
    done = {name: leftover[name] + written[name] for name in leftover}
    run.count("statements_graduated", done["stored"])
    return {**planned, **done, "owner": run.owner}


def recorded(
    state_db, night: str | None = None, include_restored: bool = False
) -> list[dict[str, Any]]:
    """The graduated rows stored, newest night first (optionally one night's, or restored ones
    too); each with its ``memory_key``, as the other stages' records have."""
    return [
        {**entry, "memory_key": store.key_of(store.WORKING, entry["memory_id"])}
        for entry in store.written_records(state_db, store.GRADUATION, night, include_restored)
        if entry["op"] == STORE and entry["memory_id"]
    ]


def describe(connection: apsw.Connection, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as the command shows them: the row's text, its sources and whether it is live."""
    described = []
    for entry in entries:
        row = connection.execute(
            "SELECT content, valid_until, superseded_by FROM working_memory WHERE id = ?",
            (entry["memory_id"],),
        ).fetchone()
        if entry.get("restored_at"):
            status = "restored"
        elif row is None:
            status = "missing"
        elif row[2]:
            status = "superseded"
        else:
            status = "closed" if row[1] else "live"
        described.append(
            {
                "memory_id": entry["memory_id"],
                "night": entry["night"],
                "status": status,
                "method": entry["method"],
                "derived_from": json.loads(entry["derived_from"]),
                "content": row[0] if row else entry["content"],
            }
        )
    return described


def select_for_restore(
    state_db, memory_ids: list[str], night: str | None, everything: bool
) -> list[dict[str, Any]]:
    """The unrestored graduated rows named by memory id, by night, or all of them."""
    return store.named_records(recorded(state_db, night=night), memory_ids, night, everything)


def restore(
    connection: apsw.Connection, state_db, entries: list[dict[str, Any]], dry_run: bool
) -> dict[str, int]:
    """Close each graduated row (``valid_until`` now) where it is still live and ours, and record
    it: a restored row is never written again (its sources stay judged)."""
    now = versions.memory_time(datetime.now())
    closed = changed = 0
    for entry in entries:
        row = connection.execute(
            "SELECT valid_until, source, scope FROM working_memory WHERE id = ?",
            (entry["memory_id"],),
        ).fetchone()
        ours = row is not None and not row[0] and row[1] == writer.SOURCE and row[2] == writer.SCOPE
        closed += ours
        changed += not ours
        if dry_run:
            continue
        if ours:
            transactions.write_statement(
                connection,
                "UPDATE working_memory SET valid_until = ? WHERE id = ? "
                "AND (valid_until IS NULL OR valid_until = '')",
                (now, entry["memory_id"]),
                label="graduation-restore",
            )
        with state_db.conn:
            state_db.conn.execute(
                f"UPDATE {store.GRADUATION} SET restored_at = ?, restore_note = ? WHERE id = ?",
                (isoformat(utc_now()), "closed" if ours else "changed-since", entry["id"]),
            )
    return {"restored": closed, "changed_since": changed}
