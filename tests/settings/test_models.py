"""The typed option models: ranges, enums and cross-field rules declared once, for the config file,
``--option`` and the JSON Schema alike."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from mnemo_ops.foundation.errors import ConfigError, UsageError
from mnemo_ops.settings import (
    JOB_NAMES,
    JOB_SECTIONS,
    Config,
    file_values,
    json_schema,
    load_settings,
    parse_config,
)
from mnemo_ops.settings.types import is_run_only
from tests.conftest import run_cli


def _settings(tmp_path: Path, text: str = ""):
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    return load_settings(config=config, environ={"HOME": str(tmp_path)})


def _refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as raised:
        _settings(tmp_path, text)
    assert "\n" not in raised.value.message  # one line
    return raised.value.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        # Ranges that lived only in help text before.
        (
            "scheduling:\n  systemd:\n    nice: -21\n",
            "'scheduling.systemd.nice' must be between -20 and 19",
        ),
        ("sleep:\n  rem_min_score: 6\n", "'sleep.rem_min_score' must be at most 5"),
        ("sleep:\n  confirmation_similarity: 101\n", "must be at most 100"),
        ("self_reflection:\n  similarity: 0\n", "must be greater than 0"),
        ("guard:\n  recall_tolerance: 1.5\n", "'guard.recall_tolerance' must be between 0 and 1"),
        ("transactions:\n  agent_share: -0.1\n", "must be between 0 and 1"),
        ("backup:\n  reuse_minutes: -1\n", "'backup.reuse_minutes' must be 0 or more"),
        # Enums.
        (
            "retrieval_eval:\n  profile: fancy\n",
            "must be one of auto, plain, hermes, hermes-approximate, got 'fancy'",
        ),
        ("evening_batch:\n  summary_tier: 4\n", "must be one of 1, 2, 3"),
        # Types: a string is not a number, a number is not a string, a list holds strings.
        ("sleep:\n  grace_days: soon\n", "'sleep.grace_days' must be a number, got 'soon'"),
        ("owner: 12\n", "key 'owner' must be a string, got 12"),
        ("memory_block_migrate:\n  keep_patterns: [1]\n", "must be a list of strings"),
        # Formats.
        ("sleep:\n  quiet_hours: '2-5'\n", "must be a local time range HH:MM-HH:MM, got '2-5'"),
        # Cross-field rules, declared on the section model.
        (
            "memory_block_migrate:\n  low_water: 0.9\n",
            "low_water (0.9) must be below high_water (0.8)",
        ),
        (
            "sleep:\n  nrem_min_prominence: 0.9\n",
            "nrem_min_prominence (0.9) must be below nrem_max_prominence (0.8)",
        ),
        (
            "memory_block_migrate:\n  keep_patterns: ['(unclosed']\n",
            "holds a pattern that is not a regular expression",
        ),
        # A per-run option has no place in the file.
        ("evening_batch:\n  rebuild: true\n", "is for one run only: pass --option rebuild=VALUE"),
        # The staging rules are a model too.
        (
            "nightly_selfcare:\n  staging:\n    extra_rules:\n      - {root: logs}\n",
            "'nightly_selfcare.staging.extra_rules[0].root' must be an absolute path",
        ),
        (
            "nightly_selfcare:\n  staging:\n    extra_rules:\n      - {root: /x, age: 3}\n",
            "unknown key 'nightly_selfcare.staging.extra_rules[0].age'",
        ),
    ],
)
def test_the_models_refuse_with_one_line_naming_the_file_and_key(tmp_path, text, fragment):
    message = _refusal(tmp_path, text)
    assert str(tmp_path / "config.yaml") in message
    assert fragment in message


def test_a_key_given_no_value_takes_the_default(tmp_path):
    settings = _settings(tmp_path, "backup:\n  keep:\nsleep:\n")
    assert settings.backup.keep == 7 and settings.sleep.nrem_max_cluster == 8


def test_settings_expose_typed_sections(tmp_path):
    settings = _settings(
        tmp_path,
        "sleep:\n  nrem_max_cluster: 5\n  quiet_hours: '23:00-04:00'\njobs:\n  backup:\n    enabled: false\n",
    )
    assert settings.sleep.nrem_max_cluster == 5
    assert settings.sleep.quiet_hours_minutes == (23 * 60, 4 * 60)
    assert settings.job("backup").enabled is False
    # An integer stays an integer where a number is allowed (config show prints what was written).
    assert settings.evening_batch.label_similarity == 85
    with pytest.raises(ValidationError):  # read-only: code cannot change an option behind the file
        settings.backup.keep = 3  # type: ignore[misc]


def test_nrem_cluster_bounds_never_fall_below_two(tmp_path):
    settings = _settings(tmp_path, "sleep:\n  nrem_min_cluster: 1\n  nrem_max_cluster: 1\n")
    assert settings.sleep.nrem_cluster_bounds == (2, 2)


def test_run_options_are_typed_checked_and_kept_apart(tmp_path):
    settings = _settings(tmp_path, "retrieval_eval:\n  k: 7\n")
    updated, section, given = settings.check_run_options(
        "retrieval-eval", {"k": "5", "ratchet": "yes"}
    )
    assert section.k == 5 and section.ratchet is True and updated.retrieval_eval.k == 5
    assert given.k == 5 and given.tolerance is None  # only what was given for this run
    assert settings.retrieval_eval.k == 7  # the settings it came from are unchanged
    # An older name still works on the command line.
    _, section, _ = settings.check_run_options("memory-maintain", {"max_rows": "40"})
    assert section.max_rows_per_run == 40


@pytest.mark.parametrize(
    ("job", "given", "fragment"),
    [
        (
            "backup",
            {"nonsense": "1"},
            "backup has no option 'nonsense'; its options are: compact_dead_share, copy_keep, copy_to, keep",
        ),
        (
            "backup",
            {"keep": "three"},
            "--option: key 'backup.keep' must be an integer, got 'three'",
        ),
        ("backup", {"keep": "0"}, "--option: key 'backup.keep' must be greater than 0, got 0"),
        # The cross-field rule sees the file's value of the other key.
        ("memory-block-migrate", {"low_water": "0.9"}, "low_water (0.9) must be below high_water"),
        ("memory-block-migrate", {"keep_patterns": "['(x']"}, "keep_patterns"),
        ("memory-maintain", {"link": "maybe"}, "'memory_maintain.link' must be true or false"),
    ],
)
def test_bad_run_options_are_usage_errors_naming_the_key(tmp_path, job, given, fragment):
    settings = _settings(tmp_path)
    with pytest.raises(UsageError) as raised:
        settings.check_run_options(job, given)
    assert fragment in raised.value.message and "\n" not in raised.value.message


def test_updated_settings_are_checked_like_a_file(tmp_path):
    settings = _settings(tmp_path)
    assert settings.updated(guard={"enabled": False}).guard.enabled is False
    with pytest.raises(ConfigError, match="'guard.probes' must be greater than 0"):
        settings.updated(guard={"probes": 0})


def test_every_job_has_one_options_section_and_one_name():
    assert tuple(JOB_SECTIONS) == JOB_NAMES
    fields = Config.model_fields
    for job in JOB_NAMES:
        assert job.replace("-", "_") in fields
        assert fields["jobs"].annotation.model_fields[job.replace("-", "_")].alias == job


def test_the_json_schema_checks_a_config_file_as_the_loader_does(tmp_path):
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = yaml.safe_load(
        "owner: dana\njobs:\n  memory-maintain:\n    schedule: '15 */4 * * *'\n"
        "backup:\n  keep: 5\nsleep:\n  quiet_hours: '01:00-04:00'\n"
        "nightly_selfcare:\n  staging:\n    extra_rules:\n      - {root: /var/log/x, older_than_days: 3}\n"
    )
    assert list(validator.iter_errors(good)) == []
    parse_config(good, "good")  # and the loader agrees
    for bad in (
        {"backup": {"keep": 0}},
        {"bogus": 1},
        {"jobs": {"no-such-job": {}}},
        {"retrieval_eval": {"profile": "fancy"}},
        {"evening_batch": {"rebuild": True}},  # per-run: not in the file's schema
        {"scheduling": {"systemd": {"nice": 30}}},
    ):
        assert list(validator.iter_errors(bad)), bad
        with pytest.raises(ConfigError):
            parse_config(bad, "bad")


def test_file_values_round_trip_through_the_loader():
    defaults = file_values(Config())
    assert "rebuild" not in defaults["evening_batch"]  # per-run options are not file values
    assert parse_config(defaults, "defaults") == Config()


def test_per_run_options_are_marked_on_their_fields():
    run_only = {
        job: sorted(name for name, field in model.model_fields.items() if is_run_only(field))
        for job, model in JOB_SECTIONS.items()
    }
    assert run_only["evening-batch"] == ["if_needed", "rebuild"]
    assert run_only["monthly-maintenance"] == ["vacuum"]
    assert run_only["retrieval-eval"] == ["allow_suite_change", "ratchet", "write_baseline"]


def test_config_commands(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("backup:\n  keep: 4\n", encoding="utf-8")
    environ = {"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / "hermes")}
    shown = run_cli(None, "--config", str(config), "--json", "config", "show", env=environ)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["options"]["backup"]["keep"] == 4
    assert data["paths"]["config_file"] == str(config)
    text = run_cli(None, "--config", str(config), "config", "show", env=environ)
    assert "keep: 4" in text.stdout
    schema = run_cli(None, "config", "schema", env=environ)
    assert json.loads(schema.stdout)["title"] == "mnemo-ops config.yaml"
    config.write_text("backup:\n  keep: lots\n", encoding="utf-8")
    refused = run_cli(None, "--config", str(config), "config", "show", env=environ)
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("key 'backup.keep' must be an integer, got 'lots'")
