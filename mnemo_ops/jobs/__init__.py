"""One module per job, each with ``run(ctx) -> JobResult``; a job without a module is not implemented."""

from __future__ import annotations

import importlib
from types import ModuleType

from mnemo_ops.core.errors import UsageError
from mnemo_ops.core.manifests import JOB_NAMES


def module_name(job: str) -> str:
    """The module that implements `job` (``memory-maintain`` -> ``mnemo_ops.jobs.memory_maintain``)."""
    return f"mnemo_ops.jobs.{job.replace('-', '_')}"


def is_implemented(job: str) -> bool:
    """True when the job's module exists."""
    return importlib.util.find_spec(module_name(job)) is not None


def implemented_jobs() -> list[str]:
    """The jobs that have a module, in schedule order."""
    return [job for job in JOB_NAMES if is_implemented(job)]


def load_job(job: str) -> ModuleType:
    """Import the job's module; UsageError (exit 2) when it is unknown or not written yet."""
    if job not in JOB_NAMES:
        raise UsageError(f"unknown job {job!r}; jobs are: {', '.join(JOB_NAMES)}")
    if not is_implemented(job):
        raise UsageError(f"job {job!r} is not implemented yet in this version of mnemo-ops")
    return importlib.import_module(module_name(job))
