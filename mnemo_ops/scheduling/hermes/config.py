"""What Hermes' own configuration says about its cron: the time zone and the script timeout.

Read from the environment first, then ``$HERMES_HOME/config.yaml`` (``yaml.safe_load``; an unreadable
file counts as empty), else Hermes' defaults.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from mnemo_ops.foundation.clock import local_now

DEFAULT_SCRIPT_TIMEOUT_S = 3600
"""Hermes' own script timeout when neither the environment nor its config sets one."""


def hermes_timezone(hermes_home: Path, environ: dict[str, str]):
    """The zone Hermes evaluates cron expressions in: HERMES_TIMEZONE, config.yaml ``timezone``, local."""
    name = environ.get("HERMES_TIMEZONE")
    if not name:
        config = _hermes_config(hermes_home)
        name = config.get("timezone") if isinstance(config.get("timezone"), str) else None
    if name:
        with contextlib.suppress(ZoneInfoNotFoundError, ValueError):
            return ZoneInfo(name)
    return local_now().astimezone().tzinfo


def _hermes_config(hermes_home: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load((hermes_home / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def script_timeout(hermes_home: Path, environ: dict[str, str]) -> int:
    """Seconds Hermes lets a script run: HERMES_CRON_SCRIPT_TIMEOUT, config ``cron.script_timeout_seconds``,
    else its default."""
    candidates = [environ.get("HERMES_CRON_SCRIPT_TIMEOUT")]
    cron = _hermes_config(hermes_home).get("cron")
    if isinstance(cron, dict):
        candidates.append(cron.get("script_timeout_seconds"))
    for candidate in candidates:
        with contextlib.suppress(TypeError, ValueError):
            seconds = int(float(candidate))
            if seconds > 0:
                return seconds
    return DEFAULT_SCRIPT_TIMEOUT_S
