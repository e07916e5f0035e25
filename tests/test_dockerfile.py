"""The Dockerfile of the Kubernetes image, read for its essentials (issue 28, item 5): no Docker
engine runs the tests, so the file itself is checked: the slim base, the install the README gives
(a wheel built from the checkout, installed with pip), a non-root user, the Hermes home as a volume,
and no secret in it or in its build context."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECRET_NAMES = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE|CREDENTIAL)", re.I)


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")
    ))  # fmt: skip
    found = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            found.append((keyword.upper(), arguments.strip()))
    return found


def test_it_builds_the_wheel_and_installs_it_with_pip_on_python_3_11_slim():
    steps = instructions()
    bases = [arguments.split()[0] for keyword, arguments in steps if keyword == "FROM"]
    assert bases and all(base == "python:3.11-slim" for base in bases)
    runs = " && ".join(arguments for keyword, arguments in steps if keyword == "RUN")
    # The README's install: python -m build, then pip install of the wheel it made.
    assert "python -m build --wheel" in runs
    assert re.search(r"pip install [^&]*mnemo_ops-\*\.whl", runs)
    assert "mnemo-ops --version" in runs  # the installed program answers before the image is done
    copies = [arguments for keyword, arguments in steps if keyword == "COPY"]
    assert any(arguments.startswith("--from=wheel") for arguments in copies)


def test_it_runs_as_a_non_root_user_with_the_hermes_home_as_a_volume():
    steps = instructions()
    users = [arguments for keyword, arguments in steps if keyword == "USER"]
    assert users, "no USER: the image would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0") and user.isdigit(), users[
        -1
    ]  # numeric: runAsNonRoot can check it
    assert steps[-1][0] in ("CMD", "ENTRYPOINT") and steps.index(("USER", users[-1])) > max(
        index for index, (keyword, _) in enumerate(steps) if keyword == "RUN"
    )
    environment = " ".join(arguments for keyword, arguments in steps if keyword == "ENV")
    assert "HERMES_HOME=/hermes" in environment
    volumes = [arguments for keyword, arguments in steps if keyword == "VOLUME"]
    assert volumes and "/hermes" in volumes[-1]
    entrypoint = next(arguments for keyword, arguments in steps if keyword == "ENTRYPOINT")
    assert entrypoint == '["mnemo-ops"]'


def test_no_secret_goes_into_the_image_or_its_build_context():
    for keyword, arguments in instructions():
        if keyword in ("ENV", "ARG"):
            for assignment in shlex.split(arguments):
                assert not SECRET_NAMES.search(assignment.split("=")[0]), assignment
        if keyword in ("COPY", "ADD"):
            assert ".env" not in arguments and "auth.json" not in arguments, arguments
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    for pattern in (".git", ".venv", ".env", "**/auth.json", "**/*.db"):
        assert pattern in ignored, pattern


def test_the_kubernetes_default_image_is_the_one_the_docs_say_to_build():
    from mnemo_ops.settings.sections import KubernetesSchedulingOptions

    default = KubernetesSchedulingOptions().image
    assert default == "mnemo-ops:latest"
    page = (ROOT / "docs" / "scheduling.md").read_text(encoding="utf-8")
    assert f"docker build -t {default} ." in page
    assert "not built here" in page
