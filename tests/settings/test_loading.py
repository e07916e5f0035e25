"""Settings precedence (flags > env > config file > Mnemosyne defaults) and config validation."""

from pathlib import Path

import pytest

from mnemo_ops.foundation.errors import ConfigError, UsageError
from mnemo_ops.settings import default_state_dir, load_settings


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_mnemosyne_defaults_from_hermes_home(tmp_path):
    env = {"HOME": str(tmp_path / "home"), "HERMES_HOME": str(tmp_path / "hermes")}
    settings = load_settings(environ=env)
    assert settings.db_path == tmp_path / "hermes" / "mnemosyne" / "data" / "mnemosyne.db"
    assert settings.state_dir == tmp_path / "hermes" / "mnemosyne" / "mnemo-ops"
    assert settings.memory_blocks_dir == tmp_path / "hermes" / "memories"
    assert settings.owner == "default"
    assert settings.sources["db"] == "default"


def test_hermes_home_defaults_to_home_dot_hermes(tmp_path):
    settings = load_settings(environ={"HOME": str(tmp_path)})
    assert settings.db_path == tmp_path / ".hermes" / "mnemosyne" / "data" / "mnemosyne.db"


def test_mnemosyne_data_dir_wins_over_hermes_home(tmp_path):
    env = {
        "HOME": str(tmp_path),
        "HERMES_HOME": str(tmp_path / "h"),
        "MNEMOSYNE_DATA_DIR": str(tmp_path / "d"),
    }
    settings = load_settings(environ=env)
    assert settings.db_path == tmp_path / "d" / "mnemosyne.db"
    assert settings.state_dir == tmp_path / "mnemo-ops"


def test_precedence_flag_env_config_default(tmp_path):
    config = _write(
        tmp_path / "c.yaml", f"db: {tmp_path / 'from-config.db'}\nstate_dir: {tmp_path / 'cs'}\n"
    )
    env = {"HOME": str(tmp_path), "MNEMO_OPS_CONFIG": str(config)}
    assert load_settings(environ=env).db_path == tmp_path / "from-config.db"
    assert load_settings(environ=env).sources["db"] == "config"
    env["MNEMO_OPS_DB"] = str(tmp_path / "from-env.db")
    assert load_settings(environ=env).db_path == tmp_path / "from-env.db"
    assert load_settings(environ=env).state_dir == tmp_path / "cs"
    settings = load_settings(db=tmp_path / "from-flag.db", state_dir=tmp_path / "fs", environ=env)
    assert settings.db_path == tmp_path / "from-flag.db"
    assert settings.state_dir == tmp_path / "fs"
    assert settings.sources["db"] == "flag" and settings.sources["state_dir"] == "flag"


def test_config_flag_beats_env(tmp_path):
    a = _write(tmp_path / "a.yaml", "owner: alice\n")
    b = _write(tmp_path / "b.yaml", "owner: bob\n")
    settings = load_settings(config=a, environ={"HOME": str(tmp_path), "MNEMO_OPS_CONFIG": str(b)})
    assert settings.owner == "alice"


def test_default_config_file_is_used_when_present(tmp_path):
    config_dir = tmp_path / ".config" / "mnemo-ops"
    config_dir.mkdir(parents=True)
    _write(config_dir / "config.yaml", "backup:\n  keep: 3\n")
    settings = load_settings(environ={"HOME": str(tmp_path)})
    assert settings.backup.keep == 3
    assert settings.config_file == config_dir / "config.yaml"


def test_owner_from_environment(tmp_path):
    settings = load_settings(environ={"HOME": str(tmp_path), "MNEMOSYNE_DEFAULT_OWNER": "dana"})
    assert settings.owner == "dana"


def test_defaults_filled_in(tmp_path):
    settings = load_settings(environ={"HOME": str(tmp_path)})
    assert settings.backup.keep == 7
    assert settings.job("backup").enabled is True
    with pytest.raises(KeyError):
        settings.job("no-such-job")  # a typo in code fails loudly, never a silent default
    with pytest.raises(AttributeError):
        settings.backup.kep  # noqa: B018


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("bogus: 1\n", "unknown key 'bogus'"),
        ("backup:\n  kep: 3\n", "unknown key 'backup.kep'"),
        ("backup:\n  keep: three\n", "key 'backup.keep' must be an integer"),
        ("backup:\n  keep: true\n", "key 'backup.keep' must be an integer"),
        ("backup:\n  keep: 0\n", "key 'backup.keep' must be greater than 0"),
        (
            "jobs:\n  backup:\n    schedule: '61 * * * *'\n",
            "key 'jobs.backup.schedule' is not a valid cron",
        ),
        ("jobs:\n  no-such-job:\n    enabled: false\n", "unknown key 'jobs.no-such-job'"),
        ("backup: [1, 2]\n", "key 'backup' must be a mapping"),
        ("owner: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, text, fragment):
    config = _write(tmp_path / "bad.yaml", text)
    with pytest.raises(ConfigError) as raised:
        load_settings(config=config, environ={"HOME": str(tmp_path)})
    assert str(config) in raised.value.message
    assert fragment in raised.value.message


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("backup:\n  kep: 3\n", "unknown key 'backup.kep'; did you mean 'backup.keep'?"),
        (
            "memory_maintian:\n  k: 3\n",
            "unknown key 'memory_maintian'; did you mean 'memory_maintain'?",
        ),
        (
            "nightly_selfcare:\n  staging:\n    extra_rules:\n      - {root: /tmp, patern: '*'}\n",
            "unknown key 'nightly_selfcare.staging.extra_rules[0].patern'; did you mean "
            "'nightly_selfcare.staging.extra_rules[0].pattern'?",
        ),
        ("backup:\n  zzzzzz: 3\n", "unknown key 'backup.zzzzzz'"),  # nothing close: no guess
    ],
)
def test_a_mistyped_key_is_one_line_naming_file_key_and_the_closest_valid_key(tmp_path, text, line):
    config = _write(tmp_path / "typo.yaml", text)
    with pytest.raises(ConfigError) as raised:
        load_settings(config=config, environ={"HOME": str(tmp_path)})
    assert raised.value.message == f"{config}: {line}"


def test_a_mistyped_run_option_names_the_closest_option(tmp_path):
    settings = load_settings(environ={"HOME": str(tmp_path)})
    with pytest.raises(UsageError, match=r"backup has no option 'kepe' \(did you mean 'keep'\?\)"):
        settings.check_run_options("backup", {"kepe": "3"})


def test_missing_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(config=tmp_path / "nope.yaml", environ={"HOME": str(tmp_path)})


def test_yaml_is_loaded_safely(tmp_path):
    config = _write(tmp_path / "evil.yaml", "owner: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(config=config, environ={"HOME": str(tmp_path)})


def test_state_dir_for_db_at_root():
    assert default_state_dir(Path("/x.db")) == Path("/mnemo-ops")
    assert default_state_dir(Path("/srv/data/mnemosyne.db")) == Path("/srv/mnemo-ops")
