"""A deterministic llm plugin for the tests: models whose answers follow from their prompts.

Loaded like any llm plugin: in the test process by registering this module with llm's plugin manager
(`tests.models.plugin.registered_test_models`), in a CLI subprocess through the ``llm`` entry point of a
small distribution written for the test (`tests.models.plugin.model_plugin_environment`). Every call is
appended to the JSON-lines file ``$MNEMO_TEST_MODEL_LOG`` (model, system, prompt), so a test can show
what reached the model and what never did.

Models:
- ``mnemo-test``: answers. A reflection prompt (it asks for ``"lessons"``) gets one lesson per evidence
  line that says "prefer", "error", "version" or "then" (kinds preference, failure, environment,
  procedure), each lesson text starting with ``[test model]`` and citing that line's reference. A
  prompt matching a key of the JSON file ``$MNEMO_TEST_MODEL_ANSWERS`` ({substring: answer}) gets that
  answer (for other tasks). Anything else gets ``{"refs": [...]}``.
- ``mnemo-test-malformed``: never JSON.
- ``mnemo-test-flaky``: not JSON, except when the prompt is the layer's retry (it says the previous
  reply "could not be used"), then as ``mnemo-test``.
- ``mnemo-test-fail``: raises.
- ``mnemo-test-slow``: sleeps ``$MNEMO_TEST_MODEL_SLEEP`` seconds (default 30) first.
"""

from __future__ import annotations

import json
import os
import re
import time

import llm

MODEL_IDS = (
    "mnemo-test",
    "mnemo-test-malformed",
    "mnemo-test-flaky",
    "mnemo-test-fail",
    "mnemo-test-slow",
)
_EVIDENCE_LINE = re.compile(r"^\[([^\]]+)\] (.*)$", re.MULTILINE)


def _log(model_id: str, system: str, prompt: str) -> None:
    path = os.environ.get("MNEMO_TEST_MODEL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"model": model_id, "system": system, "prompt": prompt}) + "\n")


def _slot(words: str) -> str:
    tokens = re.findall(r"[a-z0-9]+", words.lower())
    return "-".join(tokens[:3]) or "general"


def reflection_answer(prompt: str) -> dict:
    """The lessons `mnemo-test` finds in a reflection prompt (deterministic)."""
    lessons: dict[tuple[str, str], dict] = {}
    for ref, text in _EVIDENCE_LINE.findall(prompt):
        lowered = text.lower()
        if "prefer" in lowered:
            kind, tail = "preference", lowered.split("prefer", 1)[1]
        elif "error" in lowered:
            kind, tail = "failure", lowered.split("error", 1)[1]
        elif "version" in lowered:
            kind, tail = "environment", lowered.split("version", 1)[1]
        elif " then " in lowered:
            kind, tail = "procedure", lowered
        else:
            continue
        slot = _slot(tail.lstrip("s "))
        entry = lessons.setdefault(
            (kind, slot),
            {
                "kind": kind,
                "slot": slot,
                "lesson": f"[test model] {kind} about {slot.replace('-', ' ')}",
                "evidence": [],
            },
        )
        entry["evidence"].append(ref)
    return {
        "went_well": ["the test model read the sessions"],
        "went_badly": [],
        "lessons": list(lessons.values()),
    }


class ScriptedModel(llm.Model):
    """One of the deterministic test models (see the module docstring)."""

    can_stream = False

    class Options(llm.Options):
        temperature: float | None = None

    def __init__(self, model_id: str):
        self.model_id = model_id

    def execute(self, prompt, stream, response, conversation):
        """The reply, as text (one chunk)."""
        text, system = prompt.prompt or "", prompt.system or ""
        _log(self.model_id, system, text)
        if self.model_id == "mnemo-test-fail":
            raise RuntimeError("the test model's backend is down")
        if self.model_id == "mnemo-test-malformed":
            yield "I thought about it, and the lessons are: be nicer."
            return
        if self.model_id == "mnemo-test-flaky" and "could not be used" not in text:
            yield '{"lessons": [ this is not json'
            return
        if self.model_id == "mnemo-test-slow":
            time.sleep(float(os.environ.get("MNEMO_TEST_MODEL_SLEEP", "30")))
        yield json.dumps(self.answer(system, text))

    def answer(self, system: str, text: str) -> dict:
        """The JSON answer of ``mnemo-test`` for a prompt."""
        answers_file = os.environ.get("MNEMO_TEST_MODEL_ANSWERS")
        if answers_file and os.path.exists(answers_file):
            with open(answers_file, encoding="utf-8") as handle:
                for needle, answer in json.load(handle).items():
                    if needle in system or needle in text:
                        return answer
        if '"lessons"' in text:
            return reflection_answer(text)
        return {"refs": [ref for ref, _ in _EVIDENCE_LINE.findall(text)]}


@llm.hookimpl
def register_models(register):
    """llm's plugin hook: the test models."""
    for model_id in MODEL_IDS:
        register(ScriptedModel(model_id))
