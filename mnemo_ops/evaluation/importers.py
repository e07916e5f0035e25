"""Importers for LoCoMo and LongMemEval: a Mnemosyne database plus a suite whose gold ids come from the evidence.

Each dialogue turn is stored through ``Mnemosyne.remember`` (in a child process whose Mnemosyne
environment points at a temp dir beside the output, so nothing lands elsewhere), with metadata naming
its origin. The database is moved into place only when complete; the suite is written by temp file +
rename. Turns that Mnemosyne's own write filter drops are counted, and questions whose evidence was
never stored are skipped (counted by reason), never silently scored as misses.

LoCoMo (a list of samples, or one): per sample ``speaker_a``, ``speaker_b``, ``session_N_date_time``
and ``session_N`` (turns ``{speaker, dia_id, text}``), either at the top level or under
``conversation``; ``qa``: ``{question, answer, evidence: [dia_ids], category}``. Category 5
(adversarial) has no evidence.

LongMemEval (a list of records): ``question_id``, ``question``, ``question_type``,
``haystack_session_ids``, ``haystack_sessions`` (lists of ``{role, content, has_answer}``),
``answer_session_ids``, ``answer``. Sessions shared between records are stored once. All questions
search the one database (the benchmark gives each question its own haystack; here they share one,
which is harder, and is what an agent's real memory looks like).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.evaluation.suite import Case, write_jsonl
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.mnemosyne.api import mnemosyne_environment

LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
"""LoCoMo's numeric categories, named as in the mem0 evaluation of the released file."""

_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclasses.dataclass
class Plan:
    """What to store (sessions of turns, each with a key) and the questions that refer to turn keys."""

    sessions: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    questions: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)

    def skip(self, reason: str) -> None:
        """Count a question left out, by reason."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    @property
    def turn_count(self) -> int:
        """How many turns will be stored."""
        return sum(len(session["turns"]) for session in self.sessions)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from None


def _text(where: str, data: dict[str, Any], field: str) -> str:
    value = data.get(field)
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: field '{field}' must be a non-empty string")
    return value


def _evidence_ids(value: Any) -> list[str]:
    """LoCoMo evidence: a list of dia_ids, some of them written as "D1:3; D1:5" in the released file."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    found = []
    for item in items:
        found.extend(part for part in re.split(r"[;,\s]+", str(item)) if part)
    return found


def plan_locomo(path: Path, limit: int | None = None) -> Plan:
    """Parse a LoCoMo file into sessions to store and questions keyed by ``<sample>/<dia_id>``."""
    data = _load_json(path)
    samples = data if isinstance(data, list) else [data]
    plan = Plan()
    for number, sample in enumerate(samples[:limit] if limit else samples, start=1):
        where = f"{path}: sample {number}"
        if not isinstance(sample, dict):
            raise UsageError(f"{where}: must be an object")
        conversation = sample.get("conversation", sample)
        if not isinstance(conversation, dict):
            raise UsageError(f"{where}: field 'conversation' must be an object")
        sample_id = str(sample.get("sample_id") or f"conv-{number}")
        speakers = {conversation.get("speaker_a"), conversation.get("speaker_b")} - {None}
        sessions = sorted(
            (int(match.group(1)), key) for key in conversation if (match := _SESSION_KEY.match(key))
        )
        if not sessions:
            raise UsageError(
                f"{where}: no session_N lists (expected under 'conversation' or at the top level)"
            )
        for session_number, key in sessions:
            turns_data = conversation[key]
            if not isinstance(turns_data, list):
                raise UsageError(f"{where}: field '{key}' must be a list of turns")
            date = conversation.get(f"{key}_date_time")
            turns = []
            for position, turn in enumerate(turns_data, start=1):
                turn_where = f"{where}: {key} turn {position}"
                if not isinstance(turn, dict):
                    raise UsageError(f"{turn_where}: must be an object")
                speaker = _text(turn_where, turn, "speaker")
                dia_id = _text(turn_where, turn, "dia_id")
                text = turn.get("text")
                if not isinstance(text, str):
                    raise UsageError(f"{turn_where}: field 'text' must be a string")
                if speakers and speaker not in speakers:
                    raise UsageError(
                        f"{turn_where}: speaker {speaker!r} is neither speaker_a nor speaker_b"
                    )
                content = f"{speaker}: {text}"
                if turn.get("blip_caption"):
                    content += f" [shares a photo: {turn['blip_caption']}]"
                turns.append(
                    {
                        "key": f"{sample_id}/{dia_id}",
                        "content": content,
                        "source": "import",
                        "metadata": {
                            "benchmark": "locomo",
                            "sample": sample_id,
                            "dia_id": dia_id,
                            "session_date": date,
                        },
                    }
                )
            plan.sessions.append(
                {"session_id": f"{sample_id}-session_{session_number}", "turns": turns}
            )
        questions = sample.get("qa") or []
        if not isinstance(questions, list):
            raise UsageError(f"{where}: field 'qa' must be a list")
        for index, question in enumerate(questions, start=1):
            question_where = f"{where}: qa {index}"
            if not isinstance(question, dict):
                raise UsageError(f"{question_where}: must be an object")
            category = question.get("category")
            evidence = _evidence_ids(question.get("evidence"))
            if category == 5 or not evidence:
                plan.skip("adversarial or without evidence")
                continue
            answer = question.get("answer", question.get("adversarial_answer"))
            plan.questions.append(
                {
                    "id": f"{sample_id}-q{index}",
                    "query": _text(question_where, question, "question"),
                    "keys": [f"{sample_id}/{dia_id}" for dia_id in evidence],
                    "category": LOCOMO_CATEGORIES.get(category, f"category-{category}")
                    if category is not None
                    else None,
                    "answer": None if answer is None else str(answer),
                }
            )
    return plan


def plan_longmemeval(path: Path, limit: int | None = None) -> Plan:
    """Parse a LongMemEval file into unique sessions and questions keyed by ``<session>/<turn index>``."""
    data = _load_json(path)
    if not isinstance(data, list):
        raise UsageError(f"{path}: a LongMemEval file is a list of question records")
    plan = Plan()
    stored: set[str] = set()
    for number, record in enumerate(data[:limit] if limit else data, start=1):
        where = f"{path}: record {number}"
        if not isinstance(record, dict):
            raise UsageError(f"{where}: must be an object")
        question_id = str(record.get("question_id") or f"q{number}")
        session_ids = record.get("haystack_session_ids")
        sessions = record.get("haystack_sessions")
        if (
            not isinstance(session_ids, list)
            or not isinstance(sessions, list)
            or len(session_ids) != len(sessions)
        ):
            raise UsageError(
                f"{where}: 'haystack_session_ids' and 'haystack_sessions' must be lists of equal length"
            )
        answer_sessions = {str(item) for item in record.get("answer_session_ids") or []}
        gold: list[str] = []
        for session_id, turns_data in zip(map(str, session_ids), sessions):
            if not isinstance(turns_data, list):
                raise UsageError(f"{where}: session {session_id} must be a list of turns")
            turns, flagged, all_keys = [], [], []
            for position, turn in enumerate(turns_data):
                turn_where = f"{where}: session {session_id} turn {position + 1}"
                if not isinstance(turn, dict):
                    raise UsageError(f"{turn_where}: must be an object")
                role = _text(turn_where, turn, "role")
                content = turn.get("content")
                if not isinstance(content, str):
                    raise UsageError(f"{turn_where}: field 'content' must be a string")
                key = f"{session_id}/{position}"
                all_keys.append(key)
                if turn.get("has_answer"):
                    flagged.append(key)
                turns.append(
                    {
                        "key": key,
                        "content": f"{role}: {content}",
                        "source": "import",
                        "metadata": {
                            "benchmark": "longmemeval",
                            "session": session_id,
                            "turn": position,
                        },
                    }
                )
            if session_id in answer_sessions:
                gold.extend(
                    flagged or all_keys
                )  # no turn flagged: the whole answer session is the evidence
            if session_id not in stored:
                stored.add(session_id)
                plan.sessions.append({"session_id": session_id, "turns": turns})
        if not gold:
            plan.skip("no answer session in the haystack")
            continue
        plan.questions.append(
            {
                "id": question_id,
                "query": _text(where, record, "question"),
                "keys": gold,
                "category": str(record["question_type"]) if record.get("question_type") else None,
                "answer": None if record.get("answer") is None else str(record["answer"]),
            }
        )
    return plan


def _store(plan: Plan, db_path: Path, work_dir: Path, show_progress: bool) -> dict[str, str | None]:
    """Store every turn through Mnemosyne in a child process; return turn key -> memory id."""
    from mnemo_ops.evaluation.engines.mnemosyne import run_worker

    data_dir = work_dir / "data"
    data_dir.mkdir(parents=True, mode=0o700)
    environment = mnemosyne_environment(data_dir, work_dir / "hermes")
    request = {
        "mode": "store",
        "db_path": str(data_dir / "mnemosyne.db"),
        "sessions": plan.sessions,
    }
    with ProgressReporter(show_progress).bar("storing turns", total=plan.turn_count) as bar:
        reply = run_worker(request, environment, progress=bar.advance)
    # link + unlink rather than a rename: never replace a file that appeared at db_path meanwhile.
    try:
        os.link(data_dir / "mnemosyne.db", db_path)
    except FileExistsError:
        raise UsageError(
            f"{db_path}: appeared while importing; the import was not moved into place"
        ) from None
    return reply["ids"]


def import_benchmark(
    kind: str,
    source: Path,
    db_path: Path,
    suite_path: Path,
    limit: int | None = None,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Import a LoCoMo or LongMemEval file into a new database `db_path` and a suite `suite_path`."""
    planner = {"locomo": plan_locomo, "longmemeval": plan_longmemeval}.get(kind)
    if planner is None:
        raise UsageError(f"unknown benchmark {kind!r} (locomo, longmemeval)")
    db_path, suite_path = db_path.expanduser().absolute(), suite_path.expanduser().absolute()
    if db_path.exists():
        raise UsageError(f"{db_path}: already exists; the importer creates a new database")
    if not db_path.parent.is_dir():
        raise UsageError(f"{db_path.parent}: folder does not exist")
    plan = planner(source.expanduser(), limit)
    if not plan.sessions:
        raise UsageError(f"{source}: no dialogue turns to import")
    for stale in db_path.parent.glob(f".tmp-import-{db_path.name}-*"):
        if stale.is_dir() and not stale.is_symlink():  # left by an import that was killed
            shutil.rmtree(stale, ignore_errors=True)
    work_dir = db_path.parent / f".tmp-import-{db_path.name}-{os.getpid()}"
    try:
        ids = _store(plan, db_path, work_dir, show_progress)
    finally:
        shutil.rmtree(
            work_dir, ignore_errors=True
        )  # our own scratch folder (its Mnemosyne config.yaml)
    cases = []
    for question in plan.questions:
        relevant = list(dict.fromkeys(ids[key] for key in question["keys"] if ids.get(key)))
        if not relevant:
            plan.skip("evidence not stored (unknown dia_id or filtered turn)")
            continue
        cases.append(
            Case(
                id=question["id"],
                query=question["query"],
                relevant=tuple(relevant),
                category=question["category"],
                answer=question["answer"],
            )
        )
    suite_path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(suite_path, cases)
    return {
        "benchmark": kind,
        "source": str(source),
        "db": str(db_path),
        "suite": str(suite_path),
        "sessions": len(plan.sessions),
        "turns": plan.turn_count,
        "turns_stored": sum(1 for value in ids.values() if value),
        "turns_filtered": sum(1 for value in ids.values() if not value),
        "cases": len(cases),
        "skipped": plan.skipped,
    }
