"""Schedules must be cron expressions crontab runs (issue 40, item 8): croniter also reads `L`,
`W`, `#`, `?`, `H` and a seconds field, which Vixie cron and cronie refuse or read otherwise."""

import pytest

from mnemo_ops.foundation.errors import ConfigError
from mnemo_ops.settings import load_settings
from mnemo_ops.settings.types import vixie_cron_problem
from tests.conftest import run_cli

REFUSED = {
    "0 2 L * *": "day of month 'L'",
    "0 2 * * 5L": "day of week '5L'",
    "0 2 15W * *": "day of month '15W'",
    "0 2 * * 5#2": "day of week '5#2'",
    "0 2 ? * *": "day of month '?'",
    "H 2 * * *": "minute 'H'",
    "0 0 2 * * *": "6 fields instead of 5",
    "0 0 2 * * * 2030": "7 fields instead of 5",
    "5/10 * * * *": "needs a range or '*'",
    "0 25 * * *": "hour '25' is outside 0-23",
    "0 5-1 * * *": "runs backwards",
    "*/0 * * * *": "must be above 0",
    "0 0 1 foo *": "names no month",
    "@reboot": "@reboot is not a schedule",
}

ACCEPTED = [
    "*/15 * * * *",
    "0 9-17 * * 1-5",
    "0,30 8,20 * * *",
    "30 3 1 * *",
    "0 2 * * mon",
    "0 2 * * MON-FRI",
    "0 0 1 jan,jul *",
    "0 0 1-15/2 * *",
    "0 23 * * 7",
    "@daily",
    "@hourly",
]


@pytest.mark.parametrize(("expression", "reason"), sorted(REFUSED.items()))
def test_extensions_crontab_does_not_run_are_refused(tmp_path, expression, reason):
    config = tmp_path / "config.yaml"
    config.write_text(f"jobs:\n  backup:\n    schedule: '{expression}'\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(config=config, environ={"HOME": str(tmp_path)})
    message = raised.value.message
    assert str(config) in message and "key 'jobs.backup.schedule'" in message
    assert reason in message and "\n" not in message


@pytest.mark.parametrize("expression", ACCEPTED)
def test_plain_cron_is_accepted(tmp_path, expression):
    assert vixie_cron_problem(expression) is None
    config = tmp_path / "config.yaml"
    config.write_text(f"jobs:\n  backup:\n    schedule: '{expression}'\n", encoding="utf-8")
    settings = load_settings(config=config, environ={"HOME": str(tmp_path)})
    assert settings.job("backup").schedule == expression


def test_the_command_line_refuses_l_in_one_line_with_exit_2(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("jobs:\n  backup:\n    schedule: '0 2 L * *'\n", encoding="utf-8")
    result = run_cli(None, "--config", str(config), "cron", "render")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"mnemo-ops: error: {config}: key 'jobs.backup.schedule'")
    assert "day of month 'L'" in result.stderr and result.stdout == ""


def test_every_shipped_manifest_schedule_is_plain_cron():
    from mnemo_ops.core.manifests import load_manifests

    for name, manifest in load_manifests().items():
        assert vixie_cron_problem(manifest.schedule) is None, name
