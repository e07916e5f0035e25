"""`mnemo-ops demo` end to end: the sample home, every implemented job once, the report."""

import json

import pytest

from mnemo_ops.jobs import implemented_jobs
from tests.conftest import run_cli

# The demo runs every job on a fresh home: the e2e tier (the job tests cover each job in the fast one).
pytestmark = pytest.mark.e2e


def test_demo_runs_every_implemented_job_and_reports(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    result = run_cli(
        None, "--json", "demo", "--dir", str(tmp_path / "demo"), env={"HOME": str(home)}
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    ran = {run["job"] for run in data["runs"]}
    assert ran == set(implemented_jobs())
    assert all(run["status"] == "ok" for run in data["runs"]), [
        (r["job"], r["error"]) for r in data["runs"]
    ]
    assert data["report"] and "morning report" in data["report"]
    # Everything stayed inside the demo folder: nothing in the user's home.
    assert list(home.iterdir()) == []


def test_demo_refuses_a_folder_that_already_holds_one(tmp_path):
    target = tmp_path / "demo"
    (target / "hermes").mkdir(parents=True)
    result = run_cli(None, "demo", "--dir", str(target))
    assert result.returncode == 2 and "already holds a demo" in result.stderr


def test_demo_without_dir_leaves_no_temporary_home_behind(tmp_path):
    """Issue 28, item 7: the demo's temporary home was left behind."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    result = run_cli(
        None, "--json", "demo", env={"HOME": str(home), "TMPDIR": str(temporary)}, timeout=600
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kept"] is False and data["directory"].startswith(str(temporary))
    assert list(temporary.iterdir()) == [] and list(home.iterdir()) == []
    text = run_cli(None, "demo", env={"HOME": str(home), "TMPDIR": str(temporary)}, timeout=600)
    assert "mnemo-ops demo --dir DIR" in text.stdout and list(temporary.iterdir()) == []
