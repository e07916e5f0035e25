"""``mnemo-ops kubernetes render``: CronJob manifests for an agent whose Hermes home is on a volume."""

from __future__ import annotations

import typer

from mnemo_ops.cli.common import command_group, emit, handle_errors, invocation_state
from mnemo_ops.core.manifests import effective_manifests
from mnemo_ops.scheduling import kubernetes
from mnemo_ops.scheduling.invocation import scheduled_environment, scheduled_flags
from mnemo_ops.settings import JOB_NAMES


@handle_errors
def render_command(
    claim: str = typer.Option(
        None,
        "--claim",
        help="The PersistentVolumeClaim holding the Hermes home.",
        metavar="NAME",
    ),
    agent: str = typer.Option(
        None, "--agent", help="Names the CronJobs (default: the claim).", metavar="NAME"
    ),
    image: str = typer.Option(
        None, "--image", help="Image with mnemo-ops on its PATH.", metavar="IMAGE"
    ),
    namespace: str = typer.Option(None, "--namespace", help="Namespace.", metavar="NAME"),
) -> None:
    """Print one CronJob per job for the agent whose Hermes home is on the claim."""
    settings = invocation_state().settings

    configured = settings.scheduling.kubernetes

    def option(given, default):
        return given if given is not None else default

    claim_name = option(claim, configured.claim)
    # The pod's program is the image's, found on its PATH: only the paths of the home are carried.
    environment, warnings = kubernetes.pod_environment(
        scheduled_environment(settings, ["mnemo-ops"]), configured.mount_path
    )
    options = kubernetes.KubernetesOptions(
        claim=claim_name or "",
        agent=agent or claim_name or "",
        image=option(image, configured.image),
        namespace=option(namespace, configured.namespace),
        mount_path=settings.scheduling.kubernetes.mount_path,
        time_zone=settings.scheduling.kubernetes.time_zone,
        starting_deadline_s=settings.scheduling.kubernetes.starting_deadline_seconds,
        successful_history=configured.successful_jobs_history_limit,
        failed_history=settings.scheduling.kubernetes.failed_jobs_history_limit,
        disabled=frozenset(name for name in JOB_NAMES if not settings.job(name).enabled),
        job_flags=scheduled_flags(settings),
        environment=environment,
    )
    documents = kubernetes.render(effective_manifests(settings), options)
    for warning in warnings:
        # On stderr in both forms: stdout is what kubectl apply reads.
        invocation_state().err_console.print(
            f"mnemo-ops: warning: {warning}", markup=False, soft_wrap=True
        )
    emit(
        {"kind": "List", "apiVersion": "v1", "items": documents},
        lambda console: console.file.write(kubernetes.to_yaml(documents)),
    )


def register(app: typer.Typer) -> None:
    """Add the ``kubernetes`` command group."""
    kubernetes_app = command_group(
        app,
        "kubernetes",
        "The jobs as Kubernetes CronJobs, one set per agent volume.\n\n"
        "Example: mnemo-ops kubernetes render --claim dana-hermes | kubectl apply -f -",
    )

    kubernetes_app.command(
        "render",
        help="Print one CronJob per job (YAML for kubectl apply -f -; --json for one object) for "
        "the agent whose Hermes home is on the PersistentVolumeClaim --claim. Writes nothing.\n\n"
        "Exit codes: 0 ok, 2 usage or config error (no claim, a name too long).\n\n"
        "Example: mnemo-ops kubernetes render --claim dana-hermes --image "
        "registry.example/mnemo-ops:0.1 | kubectl apply -f -",
    )(render_command)
