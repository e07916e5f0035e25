"""Our entries of Hermes' ``cron/jobs.json``: a new one with every field Hermes' own create_job writes,
and an existing one with only the fields we own set (Hermes' own state, ids and history are kept)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from croniter import croniter

from mnemo_ops.core.manifests import JobManifest
from mnemo_ops.scheduling.hermes.paths import script_reference

NAME_PREFIX = "mnemo-ops "
CONFIG_PAUSE_REASON = "disabled in the mnemo-ops config (jobs.<job>.enabled: false)"
HERMES_DEFAULT_DELIVER = "local"
"""Hermes' own default target for a job created without an origin."""


def new_entry(
    job: str, manifest: JobManifest, deliver: str | None, now: datetime
) -> dict[str, Any]:
    """A fresh jobs.json entry for `job`, with every field Hermes' own create_job writes."""
    stamp = now.isoformat()
    return {
        "id": uuid.uuid4().hex[:12],
        "name": f"{NAME_PREFIX}{job}",
        "prompt": "",
        "skills": [],
        "skill": None,
        "model": None,
        "provider": None,
        "base_url": None,
        "script": script_reference(job),
        "no_agent": True,
        "schedule": {"kind": "cron", "expr": manifest.schedule, "display": manifest.schedule},
        "schedule_display": manifest.schedule,
        "repeat": {"times": None, "completed": 0},
        "enabled": True,
        "state": "scheduled",
        "paused_at": None,
        "paused_reason": None,
        "created_at": stamp,
        "next_run_at": croniter(manifest.schedule, now).get_next(datetime).isoformat(),
        "last_run_at": None,
        "last_status": None,
        "last_error": None,
        "deliver": deliver or HERMES_DEFAULT_DELIVER,
        "origin": None,
    }


def updated_entry(
    existing: dict[str, Any] | None,
    job: str,
    manifest: JobManifest,
    deliver: str | None,
    enabled: bool,
    now: datetime,
) -> dict[str, Any]:
    """`existing` (or a new entry) with the fields we own set; Hermes' own fields are kept.

    `deliver` None keeps the entry's own target (a new entry gets Hermes' default).

    A job disabled in our config is paused with our reason; a pause the user gave in Hermes is left
    alone, and only our own pause is lifted when the config enables the job again.
    """
    entry = dict(existing) if existing is not None else new_entry(job, manifest, deliver, now)
    old_expression = (entry.get("schedule") or {}).get("expr") if existing else None
    entry.update(
        name=f"{NAME_PREFIX}{job}",
        prompt=entry.get("prompt") or "",
        script=script_reference(job),
        no_agent=True,
        schedule={"kind": "cron", "expr": manifest.schedule, "display": manifest.schedule},
        schedule_display=manifest.schedule,
        deliver=deliver or entry.get("deliver") or HERMES_DEFAULT_DELIVER,
    )
    next_run = croniter(manifest.schedule, now).get_next(datetime).isoformat()
    if not enabled:
        if entry.get("enabled", True):
            entry.update(
                enabled=False,
                state="paused",
                paused_at=now.isoformat(),
                paused_reason=CONFIG_PAUSE_REASON,
                next_run_at=None,
            )
        return entry
    if not entry.get("enabled", True) and entry.get("paused_reason") == CONFIG_PAUSE_REASON:
        entry.update(
            enabled=True,
            state="scheduled",
            paused_at=None,
            paused_reason=None,
            next_run_at=next_run,
        )
    elif entry.get("enabled", True) and (
        old_expression != manifest.schedule or not entry.get("next_run_at")
    ):
        entry["next_run_at"] = next_run
    return entry
