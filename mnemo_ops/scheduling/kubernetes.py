"""The jobs as Kubernetes CronJobs, for an agent whose Hermes home lives on a PersistentVolumeClaim.

One CronJob per job and agent volume: the pod mounts the claim at ``mount_path`` (HERMES_HOME), so
mnemo-ops finds the database and its state dir there as it does on a laptop, and the writer lock
(a flock in that state dir) still serialises the jobs of one database. ``concurrencyPolicy:
Forbid`` keeps a slow run from overlapping its own next slot; ``backoffLimit: 0`` leaves a failed
run to the next slot (a retry at once would only meet the lock). Exit 75 (another writer held the
lock) is a success: a Job has no SuccessExitStatus, so the container runs mnemo-ops through a fixed
``sh -c`` line that maps 75 to 0 and takes every argument as ``"$@"``, never as shell text.

The environment the install saw goes into the pod as far as it means something there
(`pod_environment`): a data dir or config file inside the Hermes home is found at the same place
under the mount; PATH stays the image's, and paths outside the home cannot be carried (a warning).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from mnemo_ops.core.manifests import JobManifest
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.scheduling.invocation import job_arguments
from mnemo_ops.settings import ENV_CONFIG

ENTRYPOINT = 'mnemo-ops "$@"; status=$?; if [ "$status" -eq 75 ]; then exit 0; fi; exit "$status"'
"""Maps exit 75 (skipped: lock held) to success; the arguments arrive as ``$@``."""
DEADLINE_MARGIN_S = 300
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_CRONJOB_NAME = 52
"""A CronJob's name is at most 52 characters (its Jobs append 11)."""


@dataclasses.dataclass(frozen=True)
class KubernetesOptions:
    """What the CronJobs are rendered with."""

    claim: str
    agent: str
    image: str
    namespace: str
    mount_path: str
    time_zone: str | None
    starting_deadline_s: int
    successful_history: int
    failed_history: int
    disabled: frozenset[str]
    job_flags: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Variables for the container besides HERMES_HOME and HOME (`pod_environment`)."""


POD_PATHS = {"MNEMOSYNE_DATA_DIR": "the Mnemosyne data dir", ENV_CONFIG: "the config file"}
"""The installed variables that name a path a pod can find on its volume."""


def pod_environment(
    installed: Mapping[str, str], mount_path: str
) -> tuple[dict[str, str], list[str]]:
    """The variables of `installed` (`invocation.scheduled_environment`) as a pod sees them, and a
    warning for each one that cannot be carried.

    HERMES_HOME is the mount itself, so a path inside the installed home becomes the same path under
    `mount_path`. A path outside it is not on the volume: left out, with a warning naming it. PATH
    and PYTHONPATH name this machine's folders: the image's own are kept.
    """
    home = PurePosixPath(installed.get("HERMES_HOME", "/"))
    variables: dict[str, str] = {}
    warnings: list[str] = []
    for name, what in POD_PATHS.items():
        value = installed.get(name)
        if not value:
            continue
        path = PurePosixPath(value)
        if path == home or home in path.parents:
            variables[name] = str(PurePosixPath(mount_path) / path.relative_to(home))
        else:
            warnings.append(
                f"{what} {value} ({name}) is outside the Hermes home {home}, so not on the volume: "
                f"the CronJobs leave {name} unset; put it on the volume (or mount it) and add {name} "
                "to the rendered env"
            )
    return variables, warnings


def _check(options: KubernetesOptions) -> None:
    if not options.claim:
        raise UsageError(
            "no PersistentVolumeClaim: pass --claim NAME (or set scheduling.kubernetes.claim)"
        )
    if not _LABEL.match(options.agent):
        raise UsageError(
            f"agent name {options.agent!r} is not a DNS label (lower-case letters, digits, '-'); "
            "pass --agent NAME"
        )
    if not options.mount_path.startswith("/"):
        raise UsageError(
            f"scheduling.kubernetes.mount_path must be absolute: {options.mount_path!r}"
        )
    if options.time_zone:
        try:
            ZoneInfo(options.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise UsageError(f"unknown time zone {options.time_zone!r}") from None


def cronjob_name(agent: str, job: str) -> str:
    """``mnemo-ops-<agent>-<job>``; UsageError (exit 2) past Kubernetes' 52 characters."""
    name = f"mnemo-ops-{agent}-{job}"
    if len(name) > MAX_CRONJOB_NAME:
        raise UsageError(
            f"CronJob name {name!r} is longer than {MAX_CRONJOB_NAME} characters; "
            "pass a shorter --agent NAME"
        )
    return name


def cronjob(job: str, manifest: JobManifest, options: KubernetesOptions) -> dict[str, Any]:
    """The CronJob of `job` for one agent volume, as a plain dict (what ``kubectl apply`` reads)."""
    labels = {
        "app.kubernetes.io/name": "mnemo-ops",
        "app.kubernetes.io/instance": options.agent,
        "app.kubernetes.io/component": job,
        "app.kubernetes.io/managed-by": "mnemo-ops",
    }
    container = {
        "name": "mnemo-ops",
        "image": options.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", ENTRYPOINT, "mnemo-ops"],
        "args": job_arguments(job, options.job_flags),
        "env": [
            {"name": "HERMES_HOME", "value": options.mount_path},
            {"name": "HOME", "value": "/tmp"},
            *({"name": name, "value": value} for name, value in options.environment.items()),
        ],
        "volumeMounts": [
            {"name": "hermes-home", "mountPath": options.mount_path},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    spec: dict[str, Any] = {
        "schedule": manifest.schedule,
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": options.starting_deadline_s,
        "successfulJobsHistoryLimit": options.successful_history,
        "failedJobsHistoryLimit": options.failed_history,
        "suspend": job in options.disabled,
        "jobTemplate": {
            "metadata": {"labels": dict(labels)},  # copies: no YAML anchors in the output
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": manifest.timeout + DEADLINE_MARGIN_S,
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [container],
                        "volumes": [
                            {
                                "name": "hermes-home",
                                "persistentVolumeClaim": {"claimName": options.claim},
                            },
                            {"name": "tmp", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
    }
    if options.time_zone:
        spec["timeZone"] = options.time_zone
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": cronjob_name(options.agent, job),
            "namespace": options.namespace,
            "labels": labels,
        },
        "spec": spec,
    }


def render(manifests: dict[str, JobManifest], options: KubernetesOptions) -> list[dict[str, Any]]:
    """One CronJob per implemented job (a job disabled in the config is rendered suspended)."""
    _check(options)
    return [
        cronjob(job, manifest, options)
        for job, manifest in manifests.items()
        if manifest.implemented
    ]


def to_yaml(documents: list[dict[str, Any]]) -> str:
    """The CronJobs as one multi-document YAML stream (``kubectl apply -f -``)."""
    return yaml.safe_dump_all(documents, sort_keys=False, explicit_start=True)
