"""The CLI through real subprocesses: exit codes, one-line errors, JSON, help texts, cron."""

import json
import re
import shlex
import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from mnemo_ops.jobs import implemented_jobs
from mnemo_ops.mnemosyne import versions
from mnemo_ops.scheduling import crontab
from mnemo_ops.scheduling.invocation import without_assignments
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
GROUPS = [
    "forgotten",
    "run",
    "jobs",
    "status",
    "doctor",
    "demo",
    "cron",
    "backup",
    "trigger",
    "eval",
    "why",
    "quarantine",
    "capture",
    "report",
    "topics",
    "hermes",
    "systemd",
    "kubernetes",
]


def test_help_lists_commands():
    result = run_cli(None, "--help")
    assert result.returncode == 0
    for command in GROUPS:
        assert re.search(rf"^\s+{command}\s", result.stdout, re.MULTILINE), command


@pytest.mark.parametrize(
    "command",
    [
        "run",
        "jobs",
        "status",
        "doctor",
        "demo",
        "cron render",
        "cron install",
        "hermes render",
        "hermes install",
        "hermes uninstall",
        "hermes status",
        "systemd render",
        "systemd install",
        "systemd uninstall",
        "kubernetes render",
        "forgotten",
        "forgotten list",
        "forgotten restore",
        "eval run",
        "eval compare",
        "eval explain",
        "why",
        "eval baseline",
        "cron",
        "hermes",
        "systemd",
        "kubernetes",
        "backup",
        "backup list",
        "report",
    ],
)
def test_every_command_help_has_an_example(command):
    result = run_cli(None, *command.split(), "--help", env={"COLUMNS": "50"})
    assert result.returncode == 0
    assert "mnemo-ops " in result.stdout and "Example" in result.stdout
    # An example is never wrapped, let alone inside a word ("mnemo-" / "ops").
    example = result.stdout[result.stdout.index("Example") :].split("\n\n")[0]
    command_line = next(line for line in example.splitlines() if "mnemo-ops " in line)
    assert all(word in command_line.split() for word in command.split()), command_line
    assert "mnemo-\n" not in result.stdout


def test_piped_tables_are_plain_full_rows(sample, cli):
    """Issue 28, item 7: `jobs` piped was cut at 80 columns (``nightly-self...``)."""
    completed = cli("jobs")
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert "…" not in completed.stdout and "..." not in completed.stdout
    assert not any(character in completed.stdout for character in "┏┃━│")
    row = next(line for line in lines if line.startswith("nightly-selfcare "))
    assert "0 13 * * *" in row and row == row.rstrip()
    assert all(line == line.rstrip() for line in lines)


def test_o_means_option_everywhere(sample, cli):
    """`-o` is --option in `run`; eval baseline's --out no longer takes it."""
    assert not re.search(r"(?<![\w-])-o\b", cli("eval", "baseline", "--help").stdout)
    refused = cli("eval", "baseline", "-o", "baseline.json")
    assert refused.returncode == 2 and "No such option: -o" in refused.stderr


def test_a_closed_pipe_is_not_a_failure(sample):
    """`hermes install --dry-run | head -1` exited 1 (click's broken-pipe exit)."""
    import subprocess

    command = f"{sys.executable} -m mnemo_ops hermes install --dry-run | head -c 20 >/dev/null"
    completed = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f'{command}; echo "rc=${{PIPESTATUS[0]}}"'],
        env=sample.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "rc=0" in completed.stdout, completed.stdout + completed.stderr
    assert "Traceback" not in completed.stderr and "Broken pipe" not in completed.stderr


def test_a_pipe_closed_before_the_first_line_is_not_a_failure(sample):
    """The same without the race: the reader is gone before the command writes anything (rich's
    broken-pipe handler exited 1 from whichever print met it; `| head -1` is either case)."""
    import os
    import subprocess

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "mnemo_ops", "hermes", "install", "--dry-run"],
            env=sample.environ(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr


def test_missing_database_exits_2_with_one_line(tmp_path):
    result = run_cli(None, "--db", str(tmp_path / "nonexistent.db"), "status")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "database not found" in result.stderr and "Traceback" not in result.stderr


def test_not_sqlite_exits_2(tmp_path):
    bogus = tmp_path / "notes.db"
    bogus.write_text("just some text, not a database\n")
    result = run_cli(None, "--db", str(bogus), "status")
    assert result.returncode == 2
    assert "not an SQLite database" in result.stderr and result.stderr.count("\n") == 1


def test_not_mnemosyne_exits_2(tmp_path):
    other = tmp_path / "other.db"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE notes (body TEXT)")
    connection.commit()
    connection.close()
    result = run_cli(None, "--json", "--db", str(other), "status")
    assert result.returncode == 2
    assert "not a Mnemosyne database" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2


def test_status_json_on_a_mnemosyne_database(sample, cli):
    result = cli("--json", "--db", str(sample.db_path), "status")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)  # exactly one JSON object
    assert data["db"] == str(sample.db_path)
    assert data["row_counts"]["working_memory"] == 35
    assert data["lock_holder"] is None
    assert data["journal_mode"] == "wal"


def test_status_finds_the_database_like_mnemosyne(sample, cli):
    # No --db: MNEMOSYNE_DATA_DIR of the sample environment points at it.
    result = cli("--json", "status")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["db"] == str(sample.db_path)


def test_bad_config_exits_2_naming_file_and_key(sample, cli, tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("jobs:\n  backup:\n    timeout: soon\n")
    result = cli("--config", str(config), "status")
    assert result.returncode == 2
    assert str(config) in result.stderr and "jobs.backup.timeout" in result.stderr


def test_unknown_job_exits_2(cli):
    result = cli("run", "no-such-job")
    assert result.returncode == 2
    assert "unknown job" in result.stderr


def test_jobs_json_lists_all_nine(cli):
    result = cli("--json", "jobs")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["jobs"]
    assert [row["job"] for row in rows] == [
        "backup",
        "nightly-selfcare",
        "memory-maintain",
        "evening-batch",
        "bridge-drain",
        "retrieval-eval",
        "monthly-maintenance",
        "self-reflection",
        "memory-block-migrate",
    ]
    assert all(row["next_run"] for row in rows)


def test_doctor_json(cli):
    result = cli("--json", "doctor")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    checks = {check["check"]: check for check in data["checks"]}
    assert checks["database"]["status"] == "ok"
    assert checks["mnemosyne-memory"]["detail"].startswith(versions.installed_version())
    assert checks["mnemosyne compatibility"]["status"] == "ok"


def test_doctor_reports_missing_database(tmp_path):
    result = run_cli(None, "--json", "--db", str(tmp_path / "none.db"), "doctor")
    assert result.returncode == 2
    checks = {check["check"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["database"]["status"] == "error"


def test_python_dash_m_works():
    result = run_cli(None, "--version")
    assert result.returncode == 0 and result.stdout.startswith("mnemo-ops ")


def test_cron_render_equals_crontab_example(cli):
    result = cli("cron", "render", "--portable")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (REPO / "crontab.example").read_text()


def test_cron_render_follows_config_overrides(cli, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        "jobs:\n  backup:\n    schedule: '5 4 * * *'\n  retrieval-eval:\n    enabled: false\n"
    )
    result = cli("--config", str(config), "cron", "render", "--portable")
    assert "5 4 * * * mnemo-ops -q run backup" in result.stdout
    assert "# (disabled in config) 45 3 * * * mnemo-ops -q run retrieval-eval" in result.stdout


@pytest.fixture
def fake_crontab(tmp_path):
    """A stand-in for the crontab program that keeps the table in a file (cron's spool needs a daemon)."""
    table = tmp_path / "crontab.txt"
    program = tmp_path / "fake-crontab"
    program.write_text(f"""#!{sys.executable}
import sys, pathlib
table = pathlib.Path({str(table)!r})
if sys.argv[1] == "-l":
    if not table.exists():
        sys.stderr.write("no crontab for user\\n"); sys.exit(1)
    sys.stdout.write(table.read_text())
elif sys.argv[1] == "-":
    table.write_text(sys.stdin.read())
""")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return table, {"MNEMO_OPS_CRONTAB": str(program)}


def test_cron_install_is_idempotent_and_keeps_other_lines(cli, fake_crontab):
    table, env = fake_crontab
    table.write_text("MAILTO=me@example.org\n0 5 * * * /usr/bin/true\n")
    dry = cli("cron", "install", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "+# BEGIN mnemo-ops" in dry.stdout
    assert (
        table.read_text() == "MAILTO=me@example.org\n0 5 * * * /usr/bin/true\n"
    )  # dry run wrote nothing
    first = cli("cron", "install", env=env)
    assert first.returncode == 0, first.stderr
    installed = table.read_text()
    assert installed.startswith("MAILTO=me@example.org\n0 5 * * * /usr/bin/true\n")
    assert installed.count("# BEGIN mnemo-ops") == 1 and "run memory-maintain" in installed
    assert "--db" in installed  # cron gets explicit paths
    second = cli("--json", "cron", "install", env=env)
    assert json.loads(second.stdout)["changed"] is False
    assert table.read_text() == installed
    removed = cli("cron", "uninstall", env=env)
    assert removed.returncode == 0
    assert table.read_text() == "MAILTO=me@example.org\n0 5 * * * /usr/bin/true\n"


def test_cron_render_prints_what_install_writes(sample, cli, fake_crontab):
    """Issue 28, item 6: `cron render > my-crontab` must find the program and the database."""
    table, env = fake_crontab
    rendered = cli("cron", "render", env=env)
    assert rendered.returncode == 0, rendered.stderr
    assert cli("cron", "install", env=env).returncode == 0
    assert table.read_text() == rendered.stdout
    entry = next(line for line in rendered.stdout.splitlines() if line.endswith("run backup"))
    assert f"--db {sample.db_path}" in entry and f"--state-dir {sample.state_dir}" in entry
    program = without_assignments(shlex.split(crontab.command_of_line(entry)))[0]
    assert Path(program).is_absolute(), entry


def test_cron_install_warns_when_hermes_cron_runs_the_same_jobs(sample, cli, fake_crontab):
    table, env = fake_crontab
    assert cli("hermes", "install", env=env).returncode == 0
    installed = cli("--json", "cron", "install", "--dry-run", env=env)
    assert installed.returncode == 0, installed.stderr
    warnings = json.loads(installed.stdout)["warnings"]
    assert len(warnings) == 1 and "also run from hermes" in warnings[0]
    assert "mnemo-ops hermes uninstall" in warnings[0] and "backup" in warnings[0]
    text = cli("cron", "install", env=env)
    assert "mnemo-ops: warning:" in text.stderr and "twice per slot" in text.stderr


def test_the_crontab_program_override_is_documented(cli):
    """Issue 28, item 6: MNEMO_OPS_CRONTAB was undocumented."""
    assert "MNEMO_OPS_CRONTAB" in cli("cron", "--help").stdout
    assert "MNEMO_OPS_CRONTAB" in cli("cron", "install", "--help").stdout
    page = (REPO / "docs" / "scheduling.md").read_text(encoding="utf-8")
    crontab_section = page.split("## The crontab", 1)[1].split("\n## ", 1)[0]
    assert "`MNEMO_OPS_CRONTAB`" in crontab_section and "`-l`" in crontab_section


def test_cron_install_into_empty_crontab(cli, fake_crontab):
    table, env = fake_crontab
    assert cli("cron", "install", env=env).returncode == 0
    assert table.read_text().startswith("# BEGIN mnemo-ops")
    assert cli("cron", "uninstall", env=env).returncode == 0
    assert table.read_text() == ""


HOLDER = """
import sys, time
from pathlib import Path
from mnemo_ops.core.lock import WriterLock
lock = WriterLock(Path(sys.argv[1]), "memory-maintain")
lock.acquire()
print("locked", flush=True)
time.sleep(120)
"""


def test_second_writer_exits_75_and_is_recorded_then_kill_9_frees_the_lock(
    sample, sample_settings, cli
):
    import signal
    import subprocess

    from mnemo_ops.core import state
    from mnemo_ops.core.lock import lock_path_for

    lock_path = lock_path_for(sample_settings.state_dir, sample_settings.db_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        skipped = cli("run", "backup")
        assert skipped.returncode == 75
        assert "memory-maintain" in skipped.stderr and f"pid {holder.pid}" in skipped.stderr
        dry = cli("run", "backup", "--dry-run")  # dry runs never take the lock
        assert dry.returncode == 0, dry.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    after = cli("--json", "run", "backup")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["status"] == "ok"
    ledger = state.open_state(sample_settings.state_db_path)
    statuses = [
        row[0] for row in ledger.execute("SELECT status FROM runs WHERE job = 'backup' ORDER BY id")
    ]
    assert statuses == ["skipped", "ok"]


@pytest.mark.heavy
@pytest.mark.parametrize("job", implemented_jobs())
def test_an_unknown_option_exits_2_naming_the_key_for_every_job(job, tmp_path):
    """One option path: every job checks --option against its schema section before it starts."""
    result = run_cli(None, "--db", str(tmp_path / "absent.db"), "run", job, "-o", "nonsense=1")
    assert result.returncode == 2
    assert "'nonsense'" in result.stderr and result.stderr.count("\n") == 1


def test_an_ill_typed_option_and_a_stray_flag_exit_2(sample, cli):
    typed = cli("run", "backup", "-o", "keep=many")
    assert typed.returncode == 2 and "backup.keep" in typed.stderr
    flag = cli("run", "backup", "--rebuild")
    assert flag.returncode == 2 and "'rebuild'" in flag.stderr


def test_a_config_file_cannot_set_a_per_run_option(sample, cli, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("evening_batch:\n  rebuild: true\n")
    result = cli("--config", str(config), "run", "evening-batch", "--dry-run")
    assert result.returncode == 2 and "evening_batch.rebuild" in result.stderr
