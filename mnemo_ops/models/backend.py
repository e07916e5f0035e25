"""The one place that talks to the llm library: find the model, send one prompt, wait at most so long.

The library is imported only here and only when a model is configured and a real run asks: dry runs
and the fallbacks never import it (importing it may create its user folder). Its plugins are loaded
the way the library loads them (installed distributions with an ``llm`` entry point, or the ones
``LLM_LOAD_PLUGINS`` names), so any model ``llm models`` lists can be used.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class ModelUnavailable(Exception):
    """The llm library is missing, or it knows no model of that id, or the options are wrong."""


class CallFailed(Exception):
    """One call failed (raised, timed out or returned no text); the message is one line."""


class LlmBackend:
    """A resolved llm model: ``complete(system, prompt, timeout) -> text``."""

    def __init__(self, model_id: str, options: dict[str, Any]):
        try:
            import llm
        except ImportError:
            raise ModelUnavailable(
                "the llm library is not installed (pip install 'mnemo-ops[llm]')"
            ) from None
        try:
            self.model = llm.get_model(model_id)
        except llm.UnknownModelError:
            raise ModelUnavailable(
                f"llm knows no model {model_id!r} (see `llm models`; is its plugin installed?)"
            ) from None
        try:
            # Checked now, so a typo in the config fails once with the option's name, not per call.
            self.model.Options(**options)
        except Exception as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
            raise ModelUnavailable(f"models.options do not suit {model_id!r}: {first}") from None
        self.model_id = model_id
        self.options = dict(options)

    def complete(self, system: str, prompt: str, timeout_seconds: float) -> tuple[str, float]:
        """The model's reply to one prompt and the seconds it took; CallFailed otherwise.

        The call runs in a daemon thread so that a model that never answers is abandoned after
        `timeout_seconds` (the thread is left to finish on its own; its reply is ignored).
        """
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                response = self.model.prompt(prompt, system=system, **self.options)
                outcome["text"] = response.text()
            except BaseException as error:  # reported to the caller as one line
                outcome["error"] = error

        started = time.monotonic()
        worker = threading.Thread(target=call, name="mnemo-ops-model-call", daemon=True)
        worker.start()
        worker.join(timeout_seconds)
        elapsed = time.monotonic() - started
        if worker.is_alive():
            raise CallFailed(f"no answer within {timeout_seconds:g} s")
        if "error" in outcome:
            error = outcome["error"]
            detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise CallFailed(f"{type(error).__name__}{': ' + detail[:200] if detail else ''}")
        text = outcome.get("text")
        if not isinstance(text, str):
            raise CallFailed("the model returned no text")
        return text, elapsed
