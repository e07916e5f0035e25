"""The other Mnemosyne line, for tests that need two (the upgrade gate, the version check).

A venv with mnemo-ops' dependencies and the other line's tested mnemosyne-memory, but not mnemo-ops
itself: ``eval run --python`` must work in such an environment, and mnemo-ops runs there from this
checkout's source (``PYTHONPATH``) when a test needs that line's own mnemo-ops (a sample written by
it, its native eval ranks, its refusal). Built once per version, Python and dependency set, and kept
between runs in ``$MNEMO_OPS_TEST_CACHE``, else ``$XDG_CACHE_HOME/mnemo-ops-tests``, else
``~/.cache/mnemo-ops-tests`` (of the environment the test run started in, before the session points
HOME at a temp dir). The build takes about 30 s; a run that finds it reuses it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mnemo_ops.mnemosyne import versions

ORIGINAL_ENVIRONMENT = dict(os.environ)  # imported by conftest before the session's isolation
REPO = Path(__file__).resolve().parents[1]
UNREACHABLE = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "No matching distribution found for mnemosyne-memory",
)
"""pip's words when the registry cannot be reached (the only reason these tests may skip)."""


@dataclasses.dataclass(frozen=True)
class OtherMnemosyne:
    """The other line's interpreter and version."""

    python: Path
    version: str

    @property
    def line(self) -> str:
        """``3.15`` or ``4.0``."""
        return versions.line_name(self.version)

    def environ(self, base: dict[str, str]) -> dict[str, str]:
        """`base` with this checkout's mnemo-ops on the path (for running mnemo-ops under this line)."""
        environ = dict(base)
        environ["PYTHONPATH"] = str(REPO)
        return environ

    def mnemo_ops(self, *args: str, env: dict[str, str], timeout: float = 300):
        """Run this checkout's mnemo-ops under the other line: ``python -m mnemo_ops ARGS``."""
        return subprocess.run(
            [str(self.python), "-m", "mnemo_ops", *args],
            env=self.environ(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def other_line() -> versions.MnemosyneLine:
    """The known line that is not installed here (4.0 beside 3.15, 3.15 beside 4.0)."""
    installed = versions.installed_line()
    others = [line for line in versions.LINES if line.name != installed]
    return others[-1] if versions.known_line(installed) is None else others[0]


def cache_root() -> Path:
    """Where the venvs are kept between runs."""
    if ORIGINAL_ENVIRONMENT.get("MNEMO_OPS_TEST_CACHE"):
        return Path(ORIGINAL_ENVIRONMENT["MNEMO_OPS_TEST_CACHE"])
    base = ORIGINAL_ENVIRONMENT.get("XDG_CACHE_HOME")
    if not base:
        base = str(Path(ORIGINAL_ENVIRONMENT.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "mnemo-ops-tests"


def dependencies(version: str) -> list[str]:
    """mnemo-ops' own dependencies from pyproject.toml, with mnemosyne-memory pinned to `version`."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    kept = [
        requirement
        for requirement in project["dependencies"]
        if not requirement.replace("_", "-").startswith(versions.DISTRIBUTION)
    ]
    return [*kept, f"{versions.DISTRIBUTION}=={version}"]


def _build(target: Path, requirements: list[str]) -> None:
    """Create the venv in a temporary folder beside `target`, then rename it into place."""
    building = target.with_name(f".{target.name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    environ = dict(ORIGINAL_ENVIRONMENT)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        environ.pop(name, None)
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run(
        [base_python, "-m", "venv", str(building)], check=True, capture_output=True, env=environ
    )
    completed = subprocess.run(
        [str(building / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
        capture_output=True,
        text=True,
        env=environ,
        timeout=900,
    )
    if completed.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        output = completed.stdout + completed.stderr
        if any(sign in output for sign in UNREACHABLE):
            pytest.skip(f"the package registry is unreachable (pip: {output.strip()[-300:]})")
        raise RuntimeError(f"building {target.name} failed:\n{output[-3000:]}")
    # A venv's interpreter finds its packages through pyvenv.cfg beside it, so renaming it is safe.
    os.replace(building, target)


def other_mnemosyne() -> OtherMnemosyne:
    """The other line's venv, built on first use (under a lock, so parallel workers build it once)."""
    line = other_line()
    requirements = dependencies(line.tested)
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:10]
    name = f"mnemosyne-memory-{line.tested}-py{sys.version_info[0]}.{sys.version_info[1]}-{digest}"
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / name
    with open(root / ".lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        python = target / "bin" / "python"
        if not python.exists():
            _build(target, requirements)
    found = versions.interpreter_version(python)
    assert found == line.tested, f"{target} holds mnemosyne-memory {found}, not {line.tested}"
    return OtherMnemosyne(python=python, version=found)
