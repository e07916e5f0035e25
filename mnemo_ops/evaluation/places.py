"""The one place of the eval suite and its baseline, shared by hand runs and scheduled runs.

``retrieval_eval.suite`` and ``retrieval_eval.baseline`` (the config file, or ``--option`` /
``--suite`` / ``--baseline`` for one run), else ``<state_dir>/eval/suite.jsonl`` and
``<state_dir>/eval/baseline.json``. ``mnemo-ops eval init`` and ``eval baseline`` write there,
``eval run`` and the scheduled ``run retrieval-eval`` read there.

A suite may have a sidecar, ``<suite>.meta.json``, saying where it came from; a starter suite
written by ``eval init`` is marked ``held_out``: it measures recall and nothing is tuned on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SIDECAR_SUFFIX = ".meta.json"
"""The suite's sidecar: ``suite.jsonl`` -> ``suite.jsonl.meta.json``."""


def default_suite_path(settings) -> Path:
    """``<state_dir>/eval/suite.jsonl``."""
    return settings.state_dir / "eval" / "suite.jsonl"


def default_baseline_path(settings) -> Path:
    """``<state_dir>/eval/baseline.json``."""
    return settings.state_dir / "eval" / "baseline.json"


def _chosen(value: str | None, default: Path) -> Path:
    return Path(str(value)).expanduser().absolute() if value else default


def suite_path(settings) -> Path:
    """The suite: ``retrieval_eval.suite`` (made absolute), else the default place."""
    return _chosen(settings.retrieval_eval.suite, default_suite_path(settings))


def baseline_path(settings) -> Path:
    """The baseline: ``retrieval_eval.baseline`` (made absolute), else the default place."""
    return _chosen(settings.retrieval_eval.baseline, default_baseline_path(settings))


def sidecar_path(suite: Path) -> Path:
    """Where the suite's sidecar is (``<suite>.meta.json``)."""
    return suite.with_name(suite.name + SIDECAR_SUFFIX)


def held_out(suite: Path) -> dict[str, Any] | None:
    """The sidecar of `suite` when it marks the suite held out (a starter suite), else None.

    A sidecar that cannot be read or parsed marks nothing: it is a note, not configuration."""
    try:
        data = json.loads(sidecar_path(suite).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("held_out") is True else None
