"""The adaptive triggers of ``run evening-batch --if-needed``: no trigger, no sleep and no trial; each
trigger fires on its own; the last sleep comes from the ledger, so a restart neither skips nor repeats
a night; the scheduled run passes the flag when configured."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from freezegun import freeze_time

from mnemo_ops.core import state
from mnemo_ops.guard import history
from mnemo_ops.jobs import run_job
from mnemo_ops.jobs.evening_batch.sleep.night import last_sleep
from tests.conftest import run_cli
from tests.jobs.evening_batch.sleep.conftest import settings_for
from tests.jobs.evening_batch.sleep.homes import build

QUIET = "sleep:\n  quiet_hours: '02:00-05:00'\n"


def elsewhere() -> str:
    """Quiet hours that do not hold the time the test runs at (and entropy that needs 1000 new)."""
    start = datetime.now() + timedelta(hours=3)
    end = start + timedelta(hours=1)
    return f"sleep:\n  quiet_hours: '{start:%H:%M}-{end:%H:%M}'\n  entropy_min_memories: 1000\n"


NO_GUARD = "guard:\n  enabled: false\n"


def _ledger(layout):
    return state.open_state_readonly(layout.state_dir / "state.db")


@pytest.mark.heavy
def test_if_needed_without_a_trigger_writes_nothing_and_makes_no_trial(sample, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(elsewhere())
    dry = run_cli(
        sample,
        "--config",
        str(config),
        "--json",
        "run",
        "evening-batch",
        "--if-needed",
        "--dry-run",
    )
    assert dry.returncode == 0, dry.stderr
    completed = run_cli(
        sample, "--config", str(config), "--json", "run", "evening-batch", "--if-needed"
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    decision = result["stats"]["sleep_triggers"]
    assert (
        result["status"] == "ok" and decision == json.loads(dry.stdout)["stats"]["sleep_triggers"]
    )
    assert decision["checked"] and not decision["sleep"] and decision["fired"] == []
    assert decision["hours_since_last_sleep"] is None  # no sleep recorded yet
    assert result["stats"]["guard"]["verdict"] == "not-needed"
    assert result["changes"] == {} and result["checkpoint"] is None
    assert "steps" not in result["stats"]
    assert any(
        w["code"] == "sleep-triggers" and "not sleeping" in w["message"] for w in result["warnings"]
    )
    ledger = _ledger(sample)
    assert history.recent(ledger, job="evening-batch") == []  # no trial was made
    assert last_sleep(ledger) is None  # a check that did not sleep is no sleep
    ledger.close()

    forced = run_cli(
        sample, "--config", str(config), "--json", "run", "evening-batch", "--if-needed", "--force"
    )
    forced_result = json.loads(forced.stdout)
    assert forced.returncode == 0 and forced_result["stats"]["sleep_triggers"]["fired"] == [
        "forced"
    ]
    assert forced_result["changes"]["items_consolidated"] > 0
    ledger = _ledger(sample)
    assert last_sleep(ledger) is not None
    ledger.close()

    plain = json.loads(
        run_cli(sample, "--config", str(config), "--json", "run", "evening-batch").stdout
    )
    assert plain["stats"]["sleep_triggers"] == {
        "checked": False,
        "sleep": True,
        "fired": ["unconditional"],
    }


def test_many_new_memories_of_even_importance_fire_the_entropy_trigger(tmp_path):
    memories = [
        {
            "key": f"m{number}",
            "content": f"memory number {number} about the garden",
            "importance": 0.5,
        }
        for number in range(25)
    ]
    layout, _ids = build(tmp_path / "home", {"memories": memories})
    settings = settings_for(layout, tmp_path, NO_GUARD + elsewhere().replace("1000", "20"))
    result = run_job(settings, "evening-batch", options={"if_needed": True}, show_progress=False)
    decision = result.stats["sleep_triggers"]
    assert decision["fired"] == ["entropy"] and decision["entropy"] > 0.99
    assert decision["new_memories"] == 25
    assert result.stats["steps"]  # it slept
    # The memories are through a sleep now: the next check sees none new.
    again = run_job(settings, "evening-batch", options={"if_needed": True}, show_progress=False)
    assert (
        again.stats["sleep_triggers"]["fired"] == []
        and again.stats["sleep_triggers"]["new_memories"] == 0
    )


@pytest.mark.heavy
def test_pending_contradictions_fire_the_density_trigger(tmp_path):
    from tests.jobs.evening_batch.sleep.test_reinforcement import CONTRADICTIONS, TRIPLES

    layout, _ids = build(tmp_path / "home", {"memories": CONTRADICTIONS, "triples": TRIPLES})
    settings = settings_for(
        layout,
        tmp_path,
        NO_GUARD + elsewhere(),
    )
    result = run_job(settings, "evening-batch", options={"if_needed": True}, show_progress=False)
    decision = result.stats["sleep_triggers"]
    # lives_in and speaks (no multi-valued predicates configured); the pinned car stays.
    assert decision["pending_contradictions"] == 2 and decision["fired"] == ["contradictions"]
    assert result.changes["memories_superseded"] == 2
    again = run_job(settings, "evening-batch", options={"if_needed": True}, show_progress=False)
    assert again.stats["sleep_triggers"]["pending_contradictions"] == 0  # settled by the sleep


@pytest.mark.heavy
def test_the_time_trigger_reads_the_last_sleep_from_the_ledger(sample, tmp_path):
    """Slept at 21:00; at 03:00 (six hours on) nothing fires, whatever restarts happened; at 03:00 the
    next night (30 hours on) the time trigger fires."""
    settings = settings_for(sample, tmp_path, NO_GUARD + QUIET + "  entropy_min_memories: 1000\n")
    evening = datetime.now().replace(hour=21, minute=0, second=0, microsecond=0) + timedelta(days=1)
    with freeze_time(evening, tick=True):
        slept = run_job(settings, "evening-batch", show_progress=False)
    assert slept.status == "ok", slept.error
    with freeze_time(evening + timedelta(hours=6), tick=True):
        early = run_job(settings, "evening-batch", options={"if_needed": True}, show_progress=False)
    assert (
        early.stats["sleep_triggers"]["quiet_hours_now"]
        and early.stats["sleep_triggers"]["fired"] == []
    )
    assert 5.9 < early.stats["sleep_triggers"]["hours_since_last_sleep"] < 6.2
    with freeze_time(evening + timedelta(hours=30), tick=True):
        due = run_job(settings, "evening-batch", options={"if_needed": True}, show_progress=False)
    assert due.stats["sleep_triggers"]["fired"] == ["time"], due.stats["sleep_triggers"]
    assert due.stats["steps"]


def test_the_scheduled_run_passes_if_needed_when_configured(sample, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("evening_batch:\n  scheduled_if_needed: true\n")
    crontab = run_cli(sample, "--config", str(config), "cron", "render").stdout
    line = next(line for line in crontab.splitlines() if "run evening-batch" in line)
    assert line.endswith("-q run evening-batch --if-needed")
    assert "--if-needed" not in crontab.replace(line, "")
    systemd = json.loads(
        run_cli(sample, "--config", str(config), "--json", "systemd", "render", "--user").stdout
    )
    assert "evening-batch --if-needed" in json.dumps(systemd)
    hermes = json.loads(
        run_cli(sample, "--config", str(config), "--json", "hermes", "render").stdout
    )
    assert "evening-batch --if-needed" in json.dumps(hermes)
    kubernetes = json.loads(
        run_cli(
            sample, "--config", str(config), "--json", "kubernetes", "render", "--claim", "agent"
        ).stdout
    )
    evening = next(
        item for item in kubernetes["items"] if "evening-batch" in item["metadata"]["name"]
    )
    container = evening["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["-q", "run", "evening-batch", "--if-needed"]
    plain = run_cli(sample, "cron", "render").stdout
    assert "--if-needed" not in plain
