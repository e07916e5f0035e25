"""`ModelLayer`: one job run's access to the model (see the package docstring for its guarantees)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from mnemo_ops.models import usage
from mnemo_ops.models.answers import MalformedAnswer, parse_json
from mnemo_ops.models.backend import CallFailed, LlmBackend, ModelUnavailable
from mnemo_ops.models.config import EXTRACTIVE
from mnemo_ops.models.evidence import Evidence
from mnemo_ops.models.redaction import Redactor, redactor_for
from mnemo_ops.settings import Settings
from mnemo_ops.settings.sections import ModelOptions

EVIDENCE_HEADER = (
    "Evidence (one item per line, each starting with its reference in brackets; cite references "
    "exactly as written):"
)
RETRY_NOTE = (
    "Your previous reply could not be used ({reason}). Reply again with only the JSON object "
    "described above, and nothing else."
)

_MEMO: dict[str, dict[str, Any]] = {}
"""Validated answers of this process by key: the recall guard runs a job on its trial copy and then
live in the same process, and both must see the same answer for the price of one call."""


@dataclasses.dataclass(frozen=True)
class Request:
    """One question to the model.

    `validate(parsed_json, sent_refs)` returns the task's value or raises `MalformedAnswer`;
    `sent_refs` are the references of the evidence that was really sent (an answer citing others is
    the task's to reject or repair).
    """

    task: str
    system: str
    instructions: str
    evidence: Sequence[Evidence]
    validate: Callable[[Any, frozenset[str]], Any]


@dataclasses.dataclass
class Answer:
    """What came back. `ok` with a value, or skipped with a `reason`:

    ``no-model`` (none configured), ``model-unavailable``, ``dry-run`` (a dry run never calls),
    ``nothing-to-send`` (all evidence withheld), ``budget``, ``malformed`` (twice), ``failed``.
    `withheld` are the references that were not sent (private, or past ``max_prompt_chars``): the
    task's fallback handles them.
    """

    status: str
    value: Any = None
    reason: str | None = None
    detail: str | None = None
    sent: tuple[str, ...] = ()
    withheld: tuple[str, ...] = ()
    method: str = EXTRACTIVE
    cached: bool = False

    @property
    def ok(self) -> bool:
        """True when the model answered (now or earlier) and the task accepted the answer."""
        return self.status == "answered"


@dataclasses.dataclass
class _Stats:
    prompts: int = 0
    calls: int = 0
    seconds: float = 0.0
    answered: int = 0
    reused: int = 0
    retries: int = 0
    malformed: int = 0
    failed: int = 0
    skipped_budget: int = 0
    withheld_private: int = 0
    withheld_too_long: int = 0
    redactions: int = 0


class ModelLayer:
    """The model as one job run sees it: configuration, budget, privacy, redaction, answers."""

    def __init__(
        self,
        config: ModelOptions,
        redactor: Redactor,
        state_db,
        job: str,
        dry_run: bool,
        use_model: bool = True,
        state_key: str = "",
        warn: Callable[[str, str], None] | None = None,
    ):
        self.config = config
        self.redactor = redactor
        self.state_db = state_db
        self.job = job
        self.dry_run = dry_run
        self.use_model = bool(use_model and config.model)
        self.state_key = state_key
        self.warn = warn
        self.night = usage.night_of()
        self._backend: LlmBackend | None = None
        self._unavailable: str | None = None
        self._stats = _Stats()
        self._tasks: dict[str, dict[str, int]] = {}
        if self.use_model and not dry_run and state_db is not None:
            usage.create_tables(state_db)

    @classmethod
    def open(
        cls,
        settings: Settings,
        state_db,
        job: str,
        dry_run: bool,
        use_model: bool = True,
        warn: Callable[[str, str], None] | None = None,
    ) -> ModelLayer:
        """The layer for one run of `job`: the ``models`` settings, the secrets of Hermes' auth
        files, and state.db (read-only or None in a dry run) for the budget and kept answers.

        `warn(code, message)` is told once when the configured model cannot be used.
        """
        return cls(
            settings.models,
            redactor_for(settings.hermes_home),
            state_db,
            job,
            dry_run,
            use_model=use_model,
            state_key=str(settings.state_db_path),
            warn=warn,
        )

    # ------------------------------------------------------------------------------ what it is

    @property
    def method(self) -> str:
        """What stored rows say made them: the model id, or ``extractive``."""
        return self.config.model if self.use_model and not self._unavailable else EXTRACTIVE

    @property
    def withholds_private(self) -> bool:
        """True when private evidence is kept from this model."""
        return self.config.remote and not self.config.send_private_to_remote

    def stats(self) -> dict[str, Any]:
        """What the layer did (for ``stats.model``): counts only, never a prompt or a secret."""
        figures = dataclasses.asdict(self._stats)
        figures["seconds"] = round(figures["seconds"], 2)
        calls, seconds = usage.used_tonight(self.state_db, self.night) if self.use_model else (0, 0)
        return {
            "method": self.method,
            "model": self.config.model,
            "remote": self.config.remote,
            "private_withheld_from_model": self.withholds_private,
            "unavailable": self._unavailable,
            "night": self.night,
            "budget": {
                "calls_per_night": self.config.calls_per_night,
                "seconds_per_night": self.config.seconds_per_night,
                "calls_used_tonight": calls,
                "seconds_used_tonight": round(seconds, 1),
            },
            **figures,
            "tasks": {task: dict(outcomes) for task, outcomes in sorted(self._tasks.items())},
        }

    # ------------------------------------------------------------------------------- prompting

    def prepare(self, request: Request) -> tuple[str, list[str], list[str]]:
        """(prompt text, sent refs, withheld refs): private evidence left out when it must be,
        every text redacted, evidence past ``max_prompt_chars`` withheld."""
        instructions = self._redact(request.instructions)
        lines, sent, withheld = [], [], []
        size = len(instructions) + len(EVIDENCE_HEADER) + 2
        for item in request.evidence:
            if item.private and self.withholds_private:
                withheld.append(item.ref)
                self._stats.withheld_private += 1
                continue
            line = f"[{item.ref}] " + " ".join(self._redact(item.text).split())
            if size + len(line) + 1 > self.config.max_prompt_chars:
                withheld.append(item.ref)
                self._stats.withheld_too_long += 1
                continue
            size += len(line) + 1
            lines.append(line)
            sent.append(item.ref)
        prompt = f"{instructions}\n\n{EVIDENCE_HEADER}\n" + "\n".join(lines)
        return prompt, sent, withheld

    def _redact(self, text: str) -> str:
        redacted = self.redactor.redact(text or "")
        self._stats.redactions += redacted.count
        return redacted.text

    def _key(self, system: str, prompt: str) -> str:
        material = json.dumps(
            [self.config.model, self.config.options, system, prompt], sort_keys=True, default=str
        )
        return hashlib.sha256(material.encode("utf-8")).hexdigest()

    def ask(self, request: Request) -> Answer:
        """Ask the model `request`; never raises for a model problem (see `Answer.reason`).

        The outcome is counted per task (``stats()["tasks"]``: ``{"summary": {"answered": 3,
        "failed": 1}, "judgement": {...}}``), so a job that asks for several kinds of answer in one
        run (the sleep stages: summaries and judgements) reports each.
        """
        answer = self._ask(request)
        outcomes = self._tasks.setdefault(request.task, {})
        outcome = "answered" if answer.ok else str(answer.reason)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        return answer

    def _ask(self, request: Request) -> Answer:
        if not self.use_model:
            return Answer("skipped", reason="no-model")
        self._stats.prompts += 1
        system = self._redact(request.system)
        prompt, sent, withheld = self.prepare(request)
        base = {"sent": tuple(sent), "withheld": tuple(withheld)}
        if not sent:
            return Answer("skipped", reason="nothing-to-send", **base)
        if self.dry_run:
            return Answer("skipped", reason="dry-run", **base)
        key = self._key(system, prompt)
        kept = self._reuse(key, request, frozenset(sent))
        if kept is not None:
            self._stats.reused += 1
            self._stats.answered += 1
            return Answer("answered", value=kept, method=self.config.model, cached=True, **base)
        backend = self._resolve()
        if backend is None:
            return Answer("skipped", reason="model-unavailable", detail=self._unavailable, **base)
        reason = detail = None
        attempt_prompt = prompt
        for attempt in (1, 2):
            limit = self._budget_left()
            if limit is None:
                self._stats.skipped_budget += 1
                return Answer("skipped", reason="budget", **base)
            try:
                reply, seconds = backend.complete(system, attempt_prompt, limit)
            except CallFailed as error:
                self._count_call(self.config.timeout_seconds if "within" in str(error) else 0.0)
                self._stats.failed += 1
                return Answer("skipped", reason="failed", detail=self._redact(str(error)), **base)
            self._count_call(seconds)
            try:
                parsed = parse_json(reply)
                value = request.validate(parsed, frozenset(sent))
            except MalformedAnswer as error:
                reason, detail = "malformed", self._redact(str(error))
                if attempt == 1:
                    self._stats.retries += 1
                    attempt_prompt = prompt + "\n\n" + RETRY_NOTE.format(reason=detail)
                continue
            self._keep(key, request.task, parsed, seconds)
            self._stats.answered += 1
            return Answer("answered", value=value, method=self.config.model, **base)
        self._stats.malformed += 1
        return Answer("skipped", reason=reason, detail=detail, **base)

    # ------------------------------------------------------------------------------- internals

    def _resolve(self) -> LlmBackend | None:
        if self._backend is None and self._unavailable is None:
            try:
                self._backend = LlmBackend(self.config.model, self.config.options)
            except ModelUnavailable as error:
                self._unavailable = str(error)
                if self.warn is not None:
                    self.warn("model-unavailable", f"{self._unavailable}; using the fallback")
        return self._backend

    def _budget_left(self) -> float | None:
        """Seconds the next call may take, or None when tonight's budget is spent."""
        calls, seconds = usage.used_tonight(self.state_db, self.night)
        if calls >= self.config.calls_per_night:
            return None
        left = self.config.seconds_per_night - seconds
        if left <= 0:
            return None
        return max(1.0, min(float(self.config.timeout_seconds), left))

    def _count_call(self, seconds: float) -> None:
        self._stats.calls += 1
        self._stats.seconds += seconds
        if self.state_db is not None:
            usage.record_call(self.state_db, self.night, self.config.model, self.job, seconds)

    def _keep(self, key: str, task: str, parsed: Any, seconds: float) -> None:
        """Remember an answer that validated (its parsed JSON) in the process and in state.db."""
        _MEMO[key] = {"answer": parsed, "seconds": seconds, "charged": {self.state_key}}
        if self.state_db is not None:
            usage.store_answer(self.state_db, key, self.config.model, task, parsed)

    def _reuse(self, key: str, request: Request, sent: frozenset[str]) -> Any | None:
        """The task's value of an answer given before for exactly this prompt (this process's, else
        state.db's), validated again; None when there is none.

        An answer the process got for another state.db (the recall guard's trial copy) is charged to
        this one's budget once, since the live run is what that call was made for.
        """
        entry = _MEMO.get(key)
        if entry is not None:
            if self.state_key not in entry["charged"]:
                entry["charged"].add(self.state_key)
                if self.state_db is not None:
                    usage.record_call(
                        self.state_db, self.night, self.config.model, self.job, entry["seconds"]
                    )
                    usage.store_answer(
                        self.state_db, key, self.config.model, request.task, entry["answer"]
                    )
            raw = entry["answer"]
        else:
            raw = usage.stored_answer(self.state_db, key)
            if raw is None:
                return None
        try:
            return request.validate(raw, sent)
        except MalformedAnswer:
            return None


def forget_process_answers() -> None:
    """Forget the answers this process kept (the ones in state.db stay): for tests, and for a
    long-lived caller that runs unrelated jobs in one process."""
    _MEMO.clear()
