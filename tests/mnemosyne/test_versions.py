"""Mnemosyne versions: which line is installed, which line wrote a database (real databases written by
each line), and the refusals: a newer database is never opened by an older Mnemosyne, an older
database is never upgraded beside the live agent."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from mnemo_ops import database
from mnemo_ops.mnemosyne import versions
from tests.conftest import copy_sample, run_cli
from tests.purity import assert_unchanged, sample_snapshot

NEWEST = versions.LINES[-1]
SUITE = str(Path(__file__).resolve().parents[2] / "fixtures" / "eval" / "sample.jsonl")


def _written_by(db_path):
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return versions.database_line(connection)
    finally:
        connection.close()


def test_the_installed_line_is_a_tested_one():
    version = versions.installed_version()
    assert versions.installed_line() == versions.line_name(version)
    assert versions.known_line(version) is not None
    assert versions.line_key("4.0.0b6") == (4, 0) and versions.line_name("3.15.1") == "3.15"
    assert versions.known_line("4.0.0b5").tested == "4.0.0b6"
    assert versions.known_line("5.1.0") is None and versions.known_line("not-a-version") is None


def test_each_line_is_recognised_in_a_database_it_wrote(
    sample, other_sample_template, other_mnemosyne
):
    here = _written_by(sample.db_path)
    there = _written_by(other_sample_template.db_path)
    assert here.line.name == versions.installed_line()
    assert there.line.name == other_mnemosyne.line
    newer = here if here.line.key > there.line.key else there
    assert "table media_assets" in newer.evidence and "table media_moments" in newer.evidence
    older = there if newer is here else here
    assert older.evidence == () and older.describe() == "Mnemosyne 3.15 or older"


def _lines(sample, other_sample_template, other_mnemosyne, tmp_path):
    """(database written by 4.0, how to run mnemo-ops with 3.15, database written by 3.15, how to run
    mnemo-ops with 4.0), whichever line is installed here."""

    def here(layout, *args):
        return run_cli(layout, *args)

    def there(layout, *args):
        return other_mnemosyne.mnemo_ops(*args, env=layout.environ())

    other = copy_sample(other_sample_template, tmp_path / "other")
    if versions.installed_line() == "3.15":
        return other, here, sample, there
    return sample, there, other, here


def _one_line(completed) -> str:
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, completed.stderr
    return lines[0]


@pytest.mark.parametrize(
    "command",
    [
        ("doctor",),
        ("run", "evening-batch"),
        ("run", "evening-batch", "--dry-run"),
        ("run", "bridge-drain"),
        ("run", "monthly-maintenance"),
        ("eval", "run", "--suite", SUITE),
    ],
)
@pytest.mark.heavy
def test_a_database_written_by_4_0_is_refused_by_mnemo_ops_with_3_15(
    sample, other_sample_template, other_mnemosyne, tmp_path, command
):
    newer, with_older, _, _ = _lines(sample, other_sample_template, other_mnemosyne, tmp_path)
    before = sample_snapshot(newer)

    completed = with_older(newer, *command)

    assert completed.returncode == 2, (completed.stdout, completed.stderr)
    message = _one_line(completed)
    assert "database written by Mnemosyne 4.0 (table media_assets" in message
    assert "mnemosyne-memory 3.15.1 is older and must not open it" in message
    assert message.endswith(
        f"install 4.0 where mnemo-ops runs: pip install 'mnemosyne-memory=={NEWEST.tested}'"
    )
    assert "Traceback" not in completed.stderr
    # Refused before anything ran: not a byte of the database changed, nothing was created beside it
    # (no config.yaml, no init lock). A real run's refusal is recorded in the ledger like any failed
    # run; a dry run leaves the state dir alone too.
    after = sample_snapshot(newer)
    if command[0] != "doctor" and "--dry-run" not in command:
        before.pop("state_dir"), after.pop("state_dir")
    assert_unchanged(before, after)


def test_the_refusal_is_a_failed_run_in_json_with_exit_2(
    sample, other_sample_template, other_mnemosyne, tmp_path
):
    newer, with_older, _, _ = _lines(sample, other_sample_template, other_mnemosyne, tmp_path)
    completed = with_older(newer, "--json", "run", "evening-batch", "--dry-run")
    result = json.loads(completed.stdout)
    assert completed.returncode == 2
    assert result["status"] == "failed" and "pip install 'mnemosyne-memory==" in result["error"]
    assert result["stats"]["mnemosyne_version"] == "3.15.1"
    assert result["stats"]["database_written_by"].startswith("Mnemosyne 4.0")


@pytest.mark.heavy
def test_an_older_database_is_not_upgraded_beside_the_agent(
    sample, other_sample_template, other_mnemosyne, tmp_path
):
    _, _, older, with_newer = _lines(sample, other_sample_template, other_mnemosyne, tmp_path)
    connection = sqlite3.connect(older.db_path)
    schema_before = connection.execute("PRAGMA schema_version").fetchone()[0]
    connection.close()

    drained = with_newer(older, "run", "bridge-drain")

    assert drained.returncode == 2, drained.stdout
    message = _one_line(drained)
    assert "database written by Mnemosyne 3.15 or older" in message
    assert "would upgrade its schema beside the live agent" in message
    assert "pip install 'mnemosyne-memory==3.15.1'" in message
    # self-reflection stores its lessons through Mnemosyne: refused the same way.
    reflected = with_newer(older, "run", "self-reflection")
    assert reflected.returncode == 2, reflected.stdout
    assert "would upgrade its schema beside the live agent" in _one_line(reflected)
    connection = sqlite3.connect(older.db_path)
    assert connection.execute("PRAGMA schema_version").fetchone()[0] == schema_before
    assert connection.execute(
        "SELECT count(*) FROM sqlite_master WHERE name = 'media_assets'"
    ).fetchone() == (0,)
    connection.close()
    # Doctor says so as a warning (only jobs writing through Mnemosyne refuse); the eval, which
    # works on a snapshot, runs: that is the upgrade gate.
    doctor = with_newer(older, "--json", "doctor")
    checks = {check["check"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 0
    assert checks["mnemosyne compatibility"]["status"] == "warning"
    evaluated = with_newer(older, "--json", "eval", "run", "--dry-run", "--suite", SUITE)
    assert evaluated.returncode == 0, evaluated.stderr
    assert (
        json.loads(evaluated.stdout)["stats"]["engine"]["version"]
        == f"mnemosyne-memory {NEWEST.tested}"
    )


def test_the_same_line_opens_its_own_database(sample, cli):
    doctor = json.loads(cli("--json", "doctor").stdout)
    checks = {check["check"]: check for check in doctor["checks"]}
    assert checks["mnemosyne compatibility"]["status"] == "ok"
    assert (
        f"mnemosyne-memory {versions.installed_version()} opens it safely"
        in (checks["mnemosyne compatibility"]["detail"])
    )
    result = json.loads(cli("--json", "run", "bridge-drain", "--dry-run").stdout)
    assert result["status"] == "dry-run"
    assert result["stats"]["database_written_by"].startswith(
        f"Mnemosyne {versions.installed_line()}"
    )


def _line(name: str, evidence=()) -> versions.DatabaseLine:
    line = versions.known_line(name)
    missing = {
        known.name: () if known.key <= line.key else tuple(m.describe() for m in known.markers)
        for known in versions.LINES
    }
    return versions.DatabaseLine(line=line, evidence=tuple(evidence), missing=missing)


def test_the_rules_for_lines_mnemo_ops_does_not_know():
    # Pure decisions on explicit version strings (the real databases are above).
    newer_db = _line("4.0", ["table media_assets"])
    older_db = _line("3.15")
    assert versions.judge(newer_db, None, versions.OPENS_SNAPSHOT).problem.startswith(
        "mnemosyne-memory is not installed"
    )
    untested = versions.judge(newer_db, "4.1.0", versions.OPENS_DATABASE)
    assert untested.problem is None and "not tested with" in untested.warning
    assert versions.judge(newer_db, "3.14.0", versions.USES_CODE).problem
    # An older database is upgraded only by jobs that open the live one through Mnemosyne.
    assert versions.judge(older_db, "4.0.0b6", versions.OPENS_DATABASE).problem
    for usage in (versions.OPENS_SNAPSHOT, versions.USES_CODE):
        assert versions.judge(older_db, "4.0.0b6", usage).problem is None


def test_a_user_version_marker_alone_is_evidence():
    # 4.0 sets PRAGMA user_version bit 0x20000000 when it creates its vec0 tables; this Python's
    # sqlite3 cannot load sqlite-vec, so no real database here has them. An apsw-made file with only
    # that bit checks the reading of it, nothing else.
    import apsw

    connection = apsw.Connection(":memory:")
    connection.execute("PRAGMA user_version = 536870912")
    found = versions.database_line(connection)
    assert found.line.name == "4.0" and found.evidence == ("user_version bit 0x20000000",)


def test_the_upgrade_gate_refuses_a_candidate_older_than_the_database(
    sample, other_sample_template, other_mnemosyne, tmp_path
):
    newer, _, _, _ = _lines(sample, other_sample_template, other_mnemosyne, tmp_path)
    older_python = sys.executable if versions.installed_line() == "3.15" else other_mnemosyne.python

    completed = run_cli(
        newer, "eval", "run", "--dry-run", "--suite", SUITE, "--python", str(older_python)
    )

    assert completed.returncode == 2, completed.stdout
    message = _one_line(completed)
    assert f"the mnemosyne-memory 3.15.1 of {older_python} is older and must not open it" in message
    assert message.endswith(
        f"install 4.0 for {older_python}: pip install 'mnemosyne-memory==4.0.0b6'"
    )
