"""Kubernetes CronJobs: loaded into the official client's models, so a wrong field fails."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mnemo_ops.core.manifests import load_manifests
from tests.conftest import run_cli

CHECKER = Path(__file__).with_name("kubernetes_models.py")
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("kubernetes") is None, reason="the kubernetes client is not installed"
)


def round_trips(documents: list[dict]) -> list[dict]:
    """Each document through the client's V1CronJob model and back, in a child process: a field
    the model does not know is lost, one it requires and misses raises (``{"error": ...}``)."""
    completed = subprocess.run(
        [sys.executable, str(CHECKER)],
        input=json.dumps(documents),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout)["results"]


def render(tmp_path, *args, config: str | None = None) -> dict:
    """``mnemo-ops --json kubernetes render ARGS`` in a bare home."""
    extra = []
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(config)
        extra = ["--config", str(path)]
    result = run_cli(
        None, "--json", *extra, "kubernetes", "render", *args, env={"HOME": str(tmp_path)}
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_cronjob_is_a_valid_v1_cronjob(tmp_path):
    data = render(tmp_path, "--claim", "dana-hermes", "--image", "registry.example/mnemo-ops:0.1")
    manifests = load_manifests()
    implemented = [name for name, manifest in manifests.items() if manifest.implemented]
    assert [
        item["metadata"]["labels"]["app.kubernetes.io/component"] for item in data["items"]
    ] == implemented
    for item, result in zip(data["items"], round_trips(data["items"])):
        assert result == {"document": item}
        job = item["metadata"]["labels"]["app.kubernetes.io/component"]
        spec = item["spec"]
        assert spec["schedule"] == manifests[job].schedule
        assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] == 600
        assert spec["successfulJobsHistoryLimit"] == 3 and spec["suspend"] is False
        pod = spec["jobTemplate"]["spec"]["template"]["spec"]
        assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "dana-hermes"}
        container = pod["containers"][0]
        assert container["image"] == "registry.example/mnemo-ops:0.1"
        assert container["args"] == ["-q", "run", job]
        assert {"name": "HERMES_HOME", "value": "/hermes"} in container["env"]
        assert item["metadata"]["name"] == f"mnemo-ops-dana-hermes-{job}"


def test_the_model_check_catches_a_wrong_field(tmp_path):
    item = render(tmp_path, "--claim", "c")["items"][0]
    wrong = json.loads(json.dumps(item))
    wrong["spec"]["concurrency_policy"] = wrong["spec"].pop("concurrencyPolicy")
    missing = json.loads(json.dumps(item))
    del missing["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["name"]
    wrong_result, missing_result = round_trips([wrong, missing])
    assert wrong_result["document"] != wrong  # the misspelt field does not survive the model
    assert "error" in missing_result


def test_exit_75_is_a_success_without_shell_text_from_the_arguments(tmp_path):
    container = render(tmp_path, "--claim", "c")["items"][0]["spec"]["jobTemplate"]["spec"][
        "template"
    ]["spec"]["containers"][0]
    fake = tmp_path / "bin"
    fake.mkdir()
    program = fake / "mnemo-ops"
    program.write_text('#!/bin/sh\necho "args: $*"\nexit "$MNEMO_EXIT"\n')
    program.chmod(0o755)
    command = [*container["command"], "-q", "run", "backup; echo injected"]
    for status, expected in ((0, 0), (75, 0), (1, 1), (2, 2)):
        completed = subprocess.run(
            command,
            env={"PATH": f"{fake}:/usr/bin:/bin", "MNEMO_EXIT": str(status)},
            capture_output=True,
            text=True,
        )
        assert completed.returncode == expected
        assert completed.stdout == "args: -q run backup; echo injected\n"


def test_yaml_output_config_and_refusals(tmp_path):
    config = (
        "jobs:\n  bridge-drain:\n    enabled: false\n    schedule: '5 * * * *'\n"
        "scheduling:\n  kubernetes:\n    claim: agent-7\n    namespace: agents\n"
        "    time_zone: Europe/Berlin\n"
    )
    data = render(tmp_path, config=config)
    drain = next(i for i in data["items"] if i["metadata"]["name"].endswith("bridge-drain"))
    assert drain["spec"]["suspend"] is True and drain["spec"]["schedule"] == "5 * * * *"
    assert (
        drain["spec"]["timeZone"] == "Europe/Berlin" and drain["metadata"]["namespace"] == "agents"
    )
    assert round_trips([drain]) == [{"document": drain}]
    text = run_cli(None, "kubernetes", "render", "--claim", "c", env={"HOME": str(tmp_path)}).stdout
    assert list(yaml.safe_load_all(text)) == render(tmp_path, "--claim", "c")["items"]
    assert "&id" not in text
    for args in ((), ("--claim", "Bad_Name"), ("--claim", "c", "--agent", "x" * 40)):
        result = run_cli(None, "kubernetes", "render", *args, env={"HOME": str(tmp_path)})
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
