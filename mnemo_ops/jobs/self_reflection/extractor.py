"""The deterministic extractor: lessons found by patterns, when no model is configured or may be used.

What it looks for, statement by statement (each lesson cites the statements it came from):

- **Preferences**: a stated preference or refusal, in the first person or about the user by name
  ("I prefer X", "I'd rather X", "please always X", "Dana prefers X", "I don't want X", "never X",
  "I hate X", "Dana avoids X"). Body: "The user prefers X." / "The user does not want X."
- **Procedures**: ordered steps ("1. ... 2. ... 3. ...", "step 1: ...", "first X, then Y, then Z") in
  a session where a later (or the same) statement says it worked ("that worked", "works now",
  "fixed", "done, thanks"). Steps without such a confirmation are counted, not stored.
- **Failures**: an error ("... error ...", "failed", "permission denied", "not found", a traceback)
  followed, in the same statement or within the next few of its session, by its fix ("fixed it by",
  "the fix was", "solved by", "turned out", "the problem was", "works after"). An error nobody fixed
  is counted, not stored.
- **Environment quirks**: a statement naming a version ("PostgreSQL 15", "Python 3.12", "v2.4.1"), a
  path ("/etc/nginx/sites-enabled", "~/.config/x") or a setting (``KEY=value``), together with a
  word that makes it a quirk ("only", "needs", "requires", "must", "breaks", "doesn't work",
  "instead", "pinned", "lives in", "installed in", "runs").

What it cannot find, it says (``stats.reflection.extractor``): preferences phrased without these words
("dark themes hurt my eyes"), procedures nobody confirmed, failures whose fix was never written down,
lessons that need understanding more than matching ("what went well" and "what to do differently" are
questions only a model answers).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from mnemo_ops.jobs.self_reflection.lessons import Lesson, add_evidence, salient, slot_of, tidy
from mnemo_ops.jobs.self_reflection.sessions import Session, Turn

METHOD = "extractive"
FIX_LOOKAHEAD = 6
"""Statements after an error in which its fix may be told."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")
_SPEAKER = re.compile(r"^\s*(?:[A-Z][a-z]+|user|assistant)\s*:\s*")
_NAME = r"(?:I|[Ww]e|(?P<name>[A-Z][a-z]{2,}))"
_NOT_NAMES = {
    "The",
    "This",
    "That",
    "There",
    "These",
    "Those",
    "It",
    "He",
    "She",
    "They",
    "You",
    "What",
}
_PREFER = re.compile(
    _NAME
    + r"(?:'d|\s+would|\s+really|\s+strongly|\s+always|\s+still)?\s+"
    + r"(?P<verb>prefers?|rather|always\s+wants?)\s+(?P<what>[^.;!?]{3,160})"
)
_REFUSE = re.compile(
    _NAME
    + r"\s+(?P<verb>(?:do\s+not|don't|does\s+not|doesn't|never)\s+(?:want|like|use|need)s?|"
    + r"hates?|dislikes?|avoids?|can't\s+stand)\s+(?P<what>[^.;!?]{3,160})"
)
_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?P<polarity>always|never|don't|do\s+not|stop)\s+(?:ever\s+)?"
    + r"(?P<what>(?:send|use|call|add|put|show|give|suggest|ask|write|reply|answer|book|schedule|"
    + r"email|text|notify|format|commit|push|deploy|run)\b[^.;!?]{2,160})",
    re.IGNORECASE,
)
_NUMBERED = re.compile(
    r"(?:^|[\s:;])(?:step\s*)?(\d{1,2})[.):]\s+(.+?)(?=(?:[\s;,])(?:step\s*)?\d{1,2}[.):]\s|$)",
    re.IGNORECASE | re.DOTALL,
)
_THEN_CHAIN = re.compile(
    r"\bfirst(?:ly)?\b[,:]?\s+(?P<steps>.+?\bthen\b.+?)(?:$|[.!?](?:\s|$))",
    re.IGNORECASE | re.DOTALL,
)
_WORKED = re.compile(
    r"\b(?:(?:that|it|this)\s+(?:worked|works|did\s+it|did\s+the\s+trick)|works\s+now|"
    r"working\s+now|success(?:fully)?|solved|fixed|done,\s+thanks|all\s+good\s+now)\b",
    re.IGNORECASE,
)
_ERROR = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failing|fails|failure|crash(?:ed|es)?|"
    r"permission\s+denied|not\s+found|no\s+such\s+file|timed\s+out|refused|segfault)\b",
    re.IGNORECASE,
)
_FIX = re.compile(
    r"\b(?:fixed\s+(?:it\s+|this\s+|that\s+)?by|the\s+fix\s+(?:was|is)|solved\s+(?:it\s+)?by|"
    r"resolved\s+(?:it\s+)?by|the\s+solution\s+(?:was|is)|works?\s+(?:again\s+)?after|"
    r"worked\s+after|turned\s+out|the\s+(?:problem|cause|culprit)\s+was|fixed\s+after|"
    r"after\s+\w+ing\b.+\b(?:it\s+)?works?)\b",
    re.IGNORECASE,
)
_VERSION = re.compile(
    r"\b(?P<name>[A-Za-z][A-Za-z0-9+#_-]{1,30})\s+(?:version\s+)?v?(?P<version>\d+(?:\.\d+){0,3})\b"
    r"|\bv(?P<bare>\d+\.\d+(?:\.\d+)*)\b"
)
_PATH = re.compile(r"(?<![\w/])(?:~|/)[\w.@-]+(?:/[\w.@-]+)+/?|\b[A-Z]:\\[\w\\. -]+")
_SETTING = re.compile(r"\b[A-Z][A-Z0-9_]{2,}=[^\s,;]+")
_QUIRK = re.compile(
    r"\b(?:only|needs?|requires?|must|breaks?|broke|broken|doesn't|does\s+not|won't|will\s+not|"
    r"incompatible|instead|pin(?:ned)?|works\s+with|not\s+work|lives?\s+(?:in|at|under)|"
    r"installed\s+(?:in|at|under)|located|quirk|careful|beware|workaround|"
    r"(?:server|machine|laptop|host|box|computer|vm|container|cluster)\s+runs|runs\s+on|"
    r"defaults?\s+to|expects?)\b",
    re.IGNORECASE,
)
_NOT_SOFTWARE = {
    "tram",
    "bus",
    "line",
    "route",
    "page",
    "chapter",
    "room",
    "gate",
    "platform",
    "year",
}


@dataclasses.dataclass
class ExtractorReport:
    """What the extractor saw but could not turn into lessons (it says so instead of guessing)."""

    statements: int = 0
    procedures_unconfirmed: int = 0
    failures_without_fix: int = 0
    found: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_stats(self) -> dict[str, object]:
        """The JSON form (``stats.reflection.extractor``)."""
        return {
            "statements_read": self.statements,
            "found": dict(sorted(self.found.items())),
            "procedures_unconfirmed": self.procedures_unconfirmed,
            "failures_without_fix": self.failures_without_fix,
            "cannot_find": "preferences without a preference word, unconfirmed procedures, unfixed "
            "failures, what went well or badly (only a model answers those)",
        }


def sentences(text: str) -> list[str]:
    """`text` split into sentences (speaker prefixes such as "Dana:" removed)."""
    cleaned = _SPEAKER.sub("", text.strip())
    return [part.strip() for part in _SENTENCE.split(cleaned) if part and part.strip()]


def _lesson(kind: str, slot: str, body: str, turns: Iterable[Turn], steps=None) -> Lesson:
    lesson = Lesson(kind=kind, slot=slot, body=tidy(body), method=METHOD, steps=list(steps or []))
    for turn in turns:
        add_evidence(lesson, turn.ref)
        lesson.sessions.add(turn.session_id)
        lesson.private = lesson.private or turn.private
        lesson.newest = max(lesson.newest, turn.timestamp)
    return lesson


_PRONOUNS = (
    (re.compile(r"\bI'm\b"), "they are"),
    (re.compile(r"\bI've\b"), "they have"),
    (re.compile(r"\bI\b"), "they"),
    (re.compile(r"\bme\b", re.IGNORECASE), "them"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "their"),
    (re.compile(r"\bmine\b", re.IGNORECASE), "theirs"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "themselves"),
)


def _clean_object(text: str) -> str:
    """What a preference is about, cut at its reason, in the third person (a note about the user,
    never the user's own words)."""
    # The object ends at a reason, an aside or a remark ("..., as I said", "..., email is fine").
    text = re.split(
        r"\b(?:because|since|but|although|so that|as (?:i|we) (?:said|told)|as always)\b|,",
        text,
        flags=re.IGNORECASE,
    )[0]
    for pattern, replacement in _PRONOUNS:
        text = pattern.sub(replacement, text)
    return " ".join(text.split()).strip(" ,:-")


def preferences(turn: Turn) -> list[Lesson]:
    """Stated preferences and refusals in one statement."""
    found = []
    for sentence in sentences(turn.text):
        for pattern, positive in ((_PREFER, True), (_REFUSE, False)):
            for match in pattern.finditer(sentence):
                if match.group("name") in _NOT_NAMES:
                    continue
                what = _clean_object(match.group("what"))
                if len(salient(what)) == 0:
                    continue
                verb = match.group("verb").lower()
                if positive:
                    body = (
                        f"The user prefers {what}"
                        if "rather" not in verb
                        else f"The user would rather {what}"
                    )
                elif verb.startswith(("avoid", "hate", "dislike", "can't")):
                    body = f"The user {_third_person(verb)} {what}"
                else:
                    body = f"The user does not want {what}"
                found.append(_lesson("preference", slot_of(what), body, [turn]))
        match = _IMPERATIVE.match(sentence)
        if match:
            what = _clean_object(match.group("what"))
            polarity = match.group("polarity").lower()
            if polarity == "always":
                body = f"Always {what}: the user asked for it"
            else:
                body = f"Never {what}: the user asked not to"
            found.append(_lesson("preference", slot_of(what), body, [turn]))
    return found


def _third_person(verb: str) -> str:
    verb = verb.split()[0].lower()
    if verb == "can't":
        return "cannot stand"
    return verb if verb.endswith("s") else verb + "s"


def _steps(text: str) -> list[str]:
    numbered = [(int(number), step) for number, step in _NUMBERED.findall(text)]
    if len(numbered) >= 2 and [number for number, _ in numbered] == list(
        range(1, len(numbered) + 1)
    ):
        return [tidy(step, 160).rstrip(".") for _, step in numbered]
    match = _THEN_CHAIN.search(text)
    if match:
        parts = re.split(
            r"[,;]?\s*\b(?:and\s+)?(?:then|finally|after\s+that)\b\s*", match.group("steps")
        )
        steps = [tidy(part, 160).rstrip(".") for part in parts if part.strip(" ,.")]
        if len(steps) >= 2:
            return steps
    return []


def _topic(text: str, before: Turn | None) -> str:
    head = re.split(
        r"(?:^|[\s:;])(?:step\s*)?1[.):]\s|\bfirst(?:ly)?\b", text, maxsplit=1, flags=re.IGNORECASE
    )[0]
    match = re.search(r"\b(?:to|how\s+to|for)\s+([^:.;!?]{3,80})", head, re.IGNORECASE)
    if match:
        return match.group(1).strip()
    if len(salient(head)) >= 2:
        return head.strip(" :")
    if before is not None:
        match = re.search(
            r"\b(?:how\s+(?:do\s+i|to|can\s+i)|to)\s+([^?.!]{3,80})", before.text, re.IGNORECASE
        )
        if match:
            return match.group(1).strip()
        return " ".join(salient(before.text)[:4])
    return " ".join(salient(text)[:4])


def procedures(session: Session, report: ExtractorReport) -> list[Lesson]:
    """Ordered steps in a session that someone later says worked."""
    found = []
    for position, turn in enumerate(session.turns):
        steps = _steps(turn.text)
        if not steps:
            continue
        confirmation = next(
            (later for later in session.turns[position:] if _WORKED.search(later.text)), None
        )
        if confirmation is None:
            report.procedures_unconfirmed += 1
            continue
        topic = _topic(turn.text, session.turns[position - 1] if position else None)
        numbered = "; ".join(f"{number}) {step}" for number, step in enumerate(steps, start=1))
        body = f"To {topic}: {numbered}" if topic else f"Steps that worked: {numbered}"
        evidence = [turn] if confirmation is turn else [turn, confirmation]
        found.append(_lesson("procedure", slot_of(topic or numbered), body, evidence, steps))
    return found


def failures(session: Session, report: ExtractorReport) -> list[Lesson]:
    """Errors in a session followed by what fixed them."""
    found, used = [], set()
    turns = session.turns
    for position, turn in enumerate(turns):
        if turn.ref in used:
            continue
        error_sentence = next((s for s in sentences(turn.text) if _ERROR.search(s)), None)
        if error_sentence is None:
            continue
        fix_turn, fix_sentence = None, None
        for candidate in turns[position : position + 1 + FIX_LOOKAHEAD]:
            for sentence in sentences(candidate.text):
                if sentence != error_sentence and _FIX.search(sentence):
                    fix_turn, fix_sentence = candidate, sentence
                    break
            if fix_turn is not None:
                break
        if fix_turn is None:
            report.failures_without_fix += 1
            continue
        used.add(fix_turn.ref)
        body = f"{error_sentence.rstrip('.')} — what fixed it: {fix_sentence}"
        evidence = [turn] if fix_turn is turn else [turn, fix_turn]
        found.append(_lesson("failure", slot_of(error_sentence), body, evidence))
    return found


def environment(turn: Turn) -> list[Lesson]:
    """Versions, paths and settings stated together with what is peculiar about them."""
    found = []
    for sentence in sentences(turn.text):
        # A fix belongs to its failure lesson; a quirk is something that stays true.
        if not _QUIRK.search(sentence) or _FIX.search(sentence):
            continue
        slot = None
        for match in _VERSION.finditer(sentence):
            name = (match.group("name") or "").lower()
            if match.group("bare"):
                slot = f"v{match.group('bare')}"
                break
            if (
                name
                and name not in _NOT_SOFTWARE
                and not name.isdigit()
                and ("." in match.group("version") or match.group("name")[0].isupper())
            ):
                slot = f"{name}-{match.group('version')}"
                break
        if slot is None:
            path = _PATH.search(sentence)
            setting = _SETTING.search(sentence)
            if path:
                slot = "path-" + "-".join(part for part in path.group(0).split("/") if part)[-60:]
            elif setting:
                slot = "setting-" + setting.group(0).split("=", 1)[0].lower()
        if slot:
            found.append(_lesson("environment", slot.replace("_", "-"), sentence, [turn]))
    return found


def extract(sessions: Iterable[Session]) -> tuple[list[Lesson], ExtractorReport]:
    """Every lesson the patterns find in `sessions` (not yet merged) and the extractor's report."""
    report = ExtractorReport()
    lessons: list[Lesson] = []
    for session in sessions:
        for turn in session.turns:
            report.statements += 1
            if turn.role in ("assistant",):
                lessons += environment(turn)
                continue
            lessons += preferences(turn)
            lessons += environment(turn)
        lessons += procedures(session, report)
        lessons += failures(session, report)
    for lesson in lessons:
        report.found[lesson.kind] = report.found.get(lesson.kind, 0) + 1
    return lessons, report
