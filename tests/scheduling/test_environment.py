"""Every scheduler entry carries the environment the install saw (issue 40, item 1).

cron starts a job with a near-empty environment: without HERMES_HOME every job used ~/.hermes.
The crontab line is run here as cron runs it, under ``env -i sh -c`` (a real child, nothing
mocked), on a home outside ~/.hermes whose paths need quoting; the systemd units go through
``systemd-analyze verify``, the Hermes script's exports through bash, the CronJobs through YAML.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest
import yaml

from mnemo_ops.scheduling import crontab
from mnemo_ops.scheduling.invocation import without_assignments
from tests.conftest import copy_sample, run_cli

AWKWARD = 'it\'s 100% "odd" $HOME'
"""A folder name that needs quoting in every format: a quote, a '%', double quotes and a '$'."""
HOME_NAMES = ("HERMES_HOME", "MNEMOSYNE_DATA_DIR", "MNEMO_OPS_CONFIG")


@pytest.fixture
def custom_home(sample_template, tmp_path):
    """The sample home under an awkward path, its data dir moved outside the Hermes home, a config
    file of its own, and the environment that names all three (as the user's shell would)."""
    layout = copy_sample(sample_template, tmp_path / AWKWARD / "agent")
    data_dir = tmp_path / f"data {AWKWARD}"
    shutil.move(layout.data_dir, data_dir)
    config = data_dir / "config.yaml"  # Mnemosyne's own, naming its data dir
    if config.exists():
        config.write_text(config.read_text().replace(str(layout.data_dir), str(data_dir)))
    settings_file = tmp_path / f"config {AWKWARD}.yaml"
    settings_file.write_text("backup:\n  keep: 3\n", encoding="utf-8")
    env = layout.environ()
    env.update(
        {
            "HERMES_HOME": str(layout.hermes_home),
            "MNEMOSYNE_DATA_DIR": str(data_dir),
            "MNEMO_OPS_CONFIG": str(settings_file),
        }
    )
    return layout, data_dir, settings_file, env


def _entry(text: str, job: str) -> str:
    return next(line for line in text.splitlines() if line.endswith(f"-q run {job}"))


def _config_show_under_env_i(command: str) -> dict:
    """`command` (a crontab line's command part) with its `-q run JOB` swapped for `--json config
    show`, run as cron runs it: /bin/sh with an empty environment."""
    probe = command.rsplit(" -q run ", 1)[0] + " --json config show"
    completed = subprocess.run(
        ["env", "-i", "sh", "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)["paths"]


def test_the_crontab_line_runs_the_installed_home_under_env_i(custom_home):
    layout, data_dir, settings_file, env = custom_home
    rendered = run_cli(layout, "cron", "render", env=env)
    assert rendered.returncode == 0, rendered.stderr
    line = _entry(rendered.stdout, "backup")
    assert "100\\%" in line and "100% " not in line  # cron would cut the command at a bare '%'
    command = crontab.command_of_line(line)
    paths = _config_show_under_env_i(command)
    assert paths["hermes_home"] == str(layout.hermes_home)
    assert paths["memory_blocks_dir"] == str(layout.hermes_home / "memories")
    assert paths["db"] == str(data_dir / "mnemosyne.db")
    assert paths["config_file"] == str(settings_file)

    # The harm it prevents: the same line without the variables uses ~/.hermes under cron (the
    # database and the config file still come from its --db and --config).
    words = shlex.split(command)
    bare = [word for word in words if not word.startswith(tuple(f"{n}=" for n in HOME_NAMES))]
    paths = _config_show_under_env_i(shlex.join(bare))
    assert paths["hermes_home"] != str(layout.hermes_home)
    assert paths["memory_blocks_dir"] != str(layout.hermes_home / "memories")

    # And the line itself, unchanged, runs the job on that home.
    completed = subprocess.run(
        ["env", "-i", "sh", "-c", command], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr
    listed = run_cli(layout, "--json", "backup", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["checkpoints"]) == 1


def test_the_portable_crontab_bakes_in_no_path(custom_home):
    layout, _, _, env = custom_home
    rendered = run_cli(layout, "cron", "render", "--portable", env=env)
    entries = [line for line in rendered.stdout.splitlines() if line and not line.startswith("#")]
    assert entries and all(
        line.split()[5:] == ["mnemo-ops", "-q", "run", line.split()[-1]] for line in entries
    )
    assert str(layout.hermes_home) not in rendered.stdout
    assert "HERMES_HOME=" in rendered.stdout.split("\n\n")[0]  # the comment says what to set


def _systemd_value(raw: str) -> str:
    """An Environment= value as systemd unquotes it (systemd.syntax(7), specifiers: %% is %)."""
    assert raw.startswith('"') and raw.endswith('"'), raw
    inner, output, index = raw[1:-1], [], 0
    while index < len(inner):
        character = inner[index]
        if character == "\\":
            output.append(inner[index + 1])
            index += 2
        elif character == "%":
            assert inner[index + 1] == "%", raw
            output.append("%")
            index += 2
        else:
            output.append(character)
            index += 1
    return "".join(output)


def test_systemd_units_carry_the_environment_escaped(custom_home, tmp_path):
    layout, data_dir, settings_file, env = custom_home
    rendered = run_cli(layout, "--json", "systemd", "render", "--user", env=env)
    assert rendered.returncode == 0, rendered.stderr
    units = json.loads(rendered.stdout)["units"]
    service = units["mnemo-ops-backup.service"]
    values = dict(
        _systemd_value(line.removeprefix("Environment=")).split("=", 1)
        for line in service.splitlines()
        if line.startswith("Environment=")
    )
    assert values["HERMES_HOME"] == str(layout.hermes_home)
    assert values["MNEMOSYNE_DATA_DIR"] == str(data_dir)
    assert values["MNEMO_OPS_CONFIG"] == str(settings_file)
    assert values["PATH"].endswith(":/usr/local/bin:/usr/bin:/bin")
    template = units["mnemo-ops-backup@.service"]
    assert str(layout.hermes_home) not in template.split("ExecStart=")[0]
    assert "Environment=HERMES_HOME=%f" in template
    if shutil.which("systemd-analyze"):
        folder = tmp_path / "units"
        folder.mkdir()
        (folder / "mnemo-ops-backup.service").write_text(service)
        verified = subprocess.run(
            ["systemd-analyze", "verify", str(folder / "mnemo-ops-backup.service")],
            capture_output=True,
            text=True,
        )
        # A bad quote or a bare '%' is reported on stderr ("Invalid syntax", "specifiers").
        assert verified.returncode == 0 and verified.stderr == "", verified.stderr


def test_the_hermes_script_exports_the_environment(custom_home):
    layout, data_dir, settings_file, env = custom_home
    rendered = run_cli(layout, "--json", "hermes", "render", env=env)
    assert rendered.returncode == 0, rendered.stderr
    script = json.loads(rendered.stdout)["scripts"][
        str(layout.hermes_home / "scripts" / "mnemo-ops" / "backup.sh")
    ]
    exports = "\n".join(line for line in script.splitlines() if line.startswith("export "))
    show = 'for name in HERMES_HOME MNEMOSYNE_DATA_DIR MNEMO_OPS_CONFIG; do printf "%s\\0" "${!name}"; done'
    shown = subprocess.run(
        ["env", "-i", "bash", "-c", f"{exports}\n{show}"], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    values = shown.stdout.split("\0")[:3]
    assert values == [str(layout.hermes_home), str(data_dir), str(settings_file)]


def test_the_cronjobs_find_the_home_paths_under_the_mount(custom_home, tmp_path):
    layout, _, settings_file, env = custom_home
    inside = layout.hermes_home / "data: #1"
    env = {**env, "MNEMOSYNE_DATA_DIR": str(inside)}
    rendered = run_cli(layout, "kubernetes", "render", "--claim", "dana", env=env)
    assert rendered.returncode == 0, rendered.stderr
    container = list(yaml.safe_load_all(rendered.stdout))[0]["spec"]["jobTemplate"]["spec"][
        "template"
    ]["spec"]["containers"][0]
    pod_env = {item["name"]: item["value"] for item in container["env"]}
    assert pod_env["HERMES_HOME"] == "/hermes"
    assert pod_env["MNEMOSYNE_DATA_DIR"] == "/hermes/data: #1"
    assert "PATH" not in pod_env and "MNEMO_OPS_CONFIG" not in pod_env
    # The config file is outside the home, so not on the volume: said once, on stderr.
    assert rendered.stderr.count("mnemo-ops: warning:") == 1
    assert "MNEMO_OPS_CONFIG" in rendered.stderr and str(settings_file) in rendered.stderr


def test_a_path_with_a_line_break_is_refused(custom_home):
    layout, _, _, env = custom_home
    env = {**env, "HERMES_HOME": str(layout.hermes_home) + "\nX=1"}
    for command in (("cron", "render"), ("systemd", "render", "--user")):
        result = run_cli(layout, *command, env=env)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and "HERMES_HOME" in result.stderr


def test_a_backslash_before_a_percent_is_refused_in_the_crontab_only(custom_home):
    layout, _, _, env = custom_home
    env = {**env, "HERMES_HOME": str(layout.hermes_home.parent / "a\\%b")}
    result = run_cli(layout, "cron", "render", env=env)
    assert result.returncode == 2 and "backslash right before a '%'" in result.stderr
    assert run_cli(layout, "systemd", "render", "--user", env=env).returncode == 0


def test_installed_lines_are_read_back_past_their_variables(custom_home):
    layout, data_dir, _, env = custom_home
    rendered = run_cli(layout, "cron", "render", env=env)
    arguments = without_assignments(
        shlex.split(crontab.command_of_line(_entry(rendered.stdout, "backup")))
    )
    assert arguments[arguments.index("--db") + 1] == str(data_dir / "mnemosyne.db")


@pytest.fixture
def fake_crontab(tmp_path):
    """A stand-in for the crontab program keeping the table in a file (cron's spool needs a daemon)."""
    import stat
    import sys

    table = tmp_path / "crontab.txt"
    program = tmp_path / "fake-crontab"
    program.write_text(
        f"#!{sys.executable}\nimport sys, pathlib\ntable = pathlib.Path({str(table)!r})\n"
        "if sys.argv[1] == '-l':\n"
        "    if not table.exists():\n"
        "        sys.stderr.write('no crontab for user\\n'); sys.exit(1)\n"
        "    sys.stdout.write(table.read_text())\n"
        "else:\n    table.write_text(sys.stdin.read())\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return table, {"MNEMO_OPS_CRONTAB": str(program)}


def test_install_warns_when_the_environment_names_another_home(sample, tmp_path, fake_crontab):
    """Issue 40, item 1: the config's hermes_home wins, but the shell installing the schedule uses
    another home; and the database then still comes from the environment, not from hermes_home."""
    table, crontab_env = fake_crontab
    config = tmp_path / "config.yaml"
    config.write_text(f"hermes_home: {sample.hermes_home}\n", encoding="utf-8")
    other = tmp_path / "other-hermes"
    env = {**crontab_env, "MNEMO_OPS_CONFIG": str(config), "HERMES_HOME": str(other)}
    env_without_data_dir = {**sample.environ(), **env}
    env_without_data_dir.pop("MNEMOSYNE_DATA_DIR")
    result = run_cli(None, "--json", "cron", "install", "--dry-run", env=env_without_data_dir)
    assert result.returncode == 0, result.stderr
    warnings = json.loads(result.stdout)["warnings"]
    assert len(warnings) == 2, warnings
    assert f"HERMES_HOME is {other} here" in warnings[0]
    assert f"names hermes_home {sample.hermes_home}" in warnings[0]
    assert "set db in the config file too" in warnings[1]
    text = run_cli(None, "cron", "install", "--dry-run", env=env_without_data_dir)
    lines = [line for line in text.stderr.splitlines() if line.startswith("mnemo-ops: warning:")]
    assert len(lines) == 2 and "HERMES_HOME is" in lines[0]
    for command in (("systemd", "install", "--user", "--no-systemctl", "--dry-run"),):
        other_install = run_cli(None, "--json", *command, env=env_without_data_dir)
        assert json.loads(other_install.stdout)["warnings"][:2] == warnings
    assert not table.exists()  # dry runs wrote nothing

    # Environment and config agreeing: no warning.
    config.write_text(
        f"hermes_home: {sample.hermes_home}\ndb: {sample.db_path}\n", encoding="utf-8"
    )
    agreeing = {**sample.environ(), **crontab_env, "MNEMO_OPS_CONFIG": str(config)}
    result = run_cli(None, "--json", "cron", "install", "--dry-run", env=agreeing)
    assert json.loads(result.stdout)["warnings"] == []


def test_hermes_install_says_the_same(sample, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"hermes_home: {sample.hermes_home}\ndb: {sample.db_path}\n")
    env = {
        **sample.environ(),
        "MNEMO_OPS_CONFIG": str(config),
        "MNEMOSYNE_DATA_DIR": str(tmp_path / "elsewhere"),
    }
    result = run_cli(None, "--json", "hermes", "install", "--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    warnings = json.loads(result.stdout)["warnings"]
    assert any(f"MNEMOSYNE_DATA_DIR is {tmp_path / 'elsewhere'} here" in w for w in warnings)
