"""Quarantine: staging by rule into quarantine/<date>/ with a manifest, list and restore, symlinks and roots."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import UTC, datetime, timedelta

import pytest

from mnemo_ops.foundation.errors import ConfigError, MnemoOpsError, UsageError
from mnemo_ops.jobs.nightly_selfcare import quarantine
from tests.jobs.nightly_selfcare.helpers import age_file, settings_for, write_config

NOW = datetime.now(UTC)


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def plant(path, text: str, days_old: float):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.chmod(path, 0o640)
    age_file(path, NOW - timedelta(days=days_old))
    return path


@pytest.fixture
def planted(sample):
    """Old and young files under each default root."""
    settings = settings_for(sample)
    files = {
        "old_queue": plant(settings.queue_dir / "cur" / "item-1.json", '{"content": "old"}', 31),
        "young_queue": plant(
            settings.queue_dir / "cur" / "item-2.json", '{"content": "young"}', 29
        ),
        "old_report": plant(settings.reports_dir / "2026-07-01.md", "# old report", 91),
        "young_report": plant(settings.reports_dir / "2026-10-01.md", "# recent report", 60),
        "topics": plant(settings.reports_dir / "topics.md", "# topics, never staged", 200),
        "old_log": plant(
            sample.hermes_home / "logs" / "gateway" / "2026-09.log", "log line\n" * 100, 45
        ),
        "young_log": plant(sample.hermes_home / "logs" / "agent.log", "fresh\n", 1),
    }
    return settings, files


def test_default_rules_select_only_expired_files(planted):
    settings, files = planted
    candidates, notes = quarantine.find_candidates(
        settings, quarantine.staging_rules(settings), NOW
    )
    assert sorted(str(c.path) for c in candidates) == sorted(
        str(files[key]) for key in ("old_queue", "old_report", "old_log")
    )
    assert {c.rule for c in candidates} == {"queue-processed", "reports", "hermes-logs"}
    assert notes == []


def test_stage_list_restore_round_trip(planted):
    settings, files = planted
    originals = {key: (path.read_bytes(), os.stat(path).st_mtime) for key, path in files.items()}
    candidates, _ = quarantine.find_candidates(settings, quarantine.staging_rules(settings), NOW)
    staged, problems = quarantine.stage(settings, candidates, NOW)
    assert problems == [] and len(staged) == 3
    for key in ("old_queue", "old_report", "old_log"):
        assert not files[key].exists()
    for key in ("young_queue", "young_report", "topics", "young_log"):
        assert files[key].exists()
    day = settings.quarantine_dir / NOW.strftime("%Y-%m-%d")
    assert mode(settings.quarantine_dir) == 0o700 and mode(day) == 0o700
    manifest = json.loads((day / "manifest.json").read_text())
    assert mode(day / "manifest.json") == 0o600
    by_path = {entry["original_path"]: entry for entry in manifest["entries"]}
    entry = by_path[str(files["old_log"])]
    content, mtime = originals["old_log"]
    assert entry["sha256"] == hashlib.sha256(content).hexdigest()
    assert entry["size"] == len(content) and entry["mtime"] == mtime and entry["mode"] == "0640"
    assert entry["status"] == "staged" and entry["rule"] == "hermes-logs"
    stored = day / entry["stored_path"]
    assert stored.read_bytes() == content and mode(stored) == 0o600 and mode(stored.parent) == 0o700
    listed = quarantine.list_entries(settings)
    assert sorted(item["id"] for item in listed if item["status"] == "staged") == sorted(
        e["id"] for e in staged
    )

    # The gateway/ folder may be gone by the time the user restores: it is recreated.
    files["old_log"].parent.rmdir()
    restored = quarantine.restore(settings, entry["id"])
    assert restored["status"] == "restored"
    assert files["old_log"].read_bytes() == content
    assert os.stat(files["old_log"]).st_mtime == mtime and mode(files["old_log"]) == 0o640
    assert not stored.exists()
    states = {item["id"]: item["status"] for item in quarantine.list_entries(settings)}
    assert states[entry["id"]] == "restored"
    with pytest.raises(MnemoOpsError, match="restored"):
        quarantine.restore(settings, entry["id"])


def test_restore_refuses_to_overwrite_and_detects_tampering(planted):
    settings, files = planted
    candidates, _ = quarantine.find_candidates(settings, quarantine.staging_rules(settings), NOW)
    staged, _ = quarantine.stage(settings, candidates, NOW)
    by_path = {entry["original_path"]: entry for entry in staged}
    queue_entry = by_path[str(files["old_queue"])]
    files["old_queue"].write_text("a new file took the name", encoding="utf-8")
    with pytest.raises(MnemoOpsError, match="exists again"):
        quarantine.restore(settings, queue_entry["id"])
    assert files["old_queue"].read_text() == "a new file took the name"
    report_entry = by_path[str(files["old_report"])]
    stored = settings.quarantine_dir / NOW.strftime("%Y-%m-%d") / report_entry["stored_path"]
    stored.write_text("changed in quarantine", encoding="utf-8")
    with pytest.raises(MnemoOpsError, match="sha256"):
        quarantine.restore(settings, report_entry["id"])
    assert not files["old_report"].exists()
    with pytest.raises(UsageError):
        quarantine.restore(settings, "20990101-deadbeef")
    with pytest.raises(UsageError):
        quarantine.restore(settings, "../../etc/passwd")


def test_restore_refuses_when_a_symlink_now_stands_in_the_way(planted, tmp_path):
    settings, files = planted
    candidates, _ = quarantine.find_candidates(settings, quarantine.staging_rules(settings), NOW)
    staged, _ = quarantine.stage(settings, candidates, NOW)
    entry = next(e for e in staged if e["rule"] == "hermes-logs")
    gateway = files["old_log"].parent
    gateway.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    gateway.symlink_to(elsewhere)
    with pytest.raises(MnemoOpsError, match="resolves"):
        quarantine.restore(settings, entry["id"])
    assert list(elsewhere.iterdir()) == []


def test_symlinks_are_never_followed_and_nothing_outside_the_roots_moves(sample, tmp_path):
    settings = settings_for(sample)
    outside = tmp_path / "outside"
    secret_old = plant(outside / "important.log", "not ours", 400)
    plant(outside / "deep" / "old.log", "not ours either", 400)
    logs = sample.hermes_home / "logs"
    logs.mkdir(parents=True)
    (logs / "link-to-file.log").symlink_to(secret_old)
    (logs / "link-to-dir").symlink_to(outside / "deep")
    age_file(logs / "link-to-file.log", NOW - timedelta(days=400))
    # A root that is itself a symlink is refused as a whole.
    cur = settings.queue_dir / "cur"
    cur.rmdir()
    cur.symlink_to(outside)
    before = sorted(str(path) for path in outside.rglob("*"))
    candidates, notes = quarantine.find_candidates(
        settings, quarantine.staging_rules(settings), NOW
    )
    assert candidates == []
    assert any("root" in note and "symlink" in note for note in notes)
    assert any("link-to-file.log is a symlink" in note for note in notes)
    quarantine.stage(settings, candidates, NOW)
    assert sorted(str(path) for path in outside.rglob("*")) == before
    assert (logs / "link-to-file.log").is_symlink() and secret_old.read_text() == "not ours"


def test_extra_rules_are_validated_and_never_reach_our_own_state(sample, tmp_path):
    settings = settings_for(
        sample,
        write_config(
            tmp_path,
            {
                "staging": {
                    "extra_rules": [
                        {
                            "name": "state-dir",
                            "root": str(sample.state_dir),
                            "pattern": "*",
                            "older_than_days": 1,
                        }
                    ]
                }
            },
        ),
    )
    from mnemo_ops.core import state

    state.open_state(settings.state_db_path).close()
    for path in [settings.state_db_path, *(settings.queue_dir / "new").iterdir()]:
        age_file(path, NOW - timedelta(days=10))
    plant(settings.backups_dir / "daily-x" / "manifest.json", "{}", 10)
    plant(settings.quarantine_dir / "2026-01-01" / "x.json", "{}", 10)
    candidates, _ = quarantine.find_candidates(settings, quarantine.staging_rules(settings), NOW)
    paths = {str(c.path) for c in candidates}
    assert str(settings.state_db_path) not in paths
    assert not any("/backups/" in path or "/quarantine/" in path for path in paths)
    assert any("/queue/new/" in path for path in paths)  # the user asked for these: allowed
    # A bad rule is refused when the config file is read, before any job runs.
    with pytest.raises(ConfigError, match=r"extra_rules\[0\]\.root' must be an absolute path"):
        settings_for(
            sample,
            write_config(tmp_path, {"staging": {"extra_rules": [{"root": "relative/logs"}]}}),
        )
    with pytest.raises(ConfigError, match=r"unknown key '.*extra_rules\[0\]\.dayz'"):
        settings_for(
            sample,
            write_config(tmp_path, {"staging": {"extra_rules": [{"root": "/x", "dayz": 3}]}}),
        )


def test_quarantine_commands_end_to_end(sample, cli):
    settings = settings_for(sample)
    old = plant(settings.queue_dir / "cur" / "done.json", '{"content": "x"}', 40)
    candidates, _ = quarantine.find_candidates(settings, quarantine.staging_rules(settings), NOW)
    quarantine.stage(settings, candidates, NOW)
    listed = cli("--json", "quarantine", "list")
    assert listed.returncode == 0, listed.stderr
    entries = json.loads(listed.stdout)["entries"]
    assert [entry["original_path"] for entry in entries] == [str(old)]
    text = cli("quarantine", "list")
    assert entries[0]["id"] in text.stdout
    dry = cli("--json", "quarantine", "restore", entries[0]["id"], "--dry-run")
    assert dry.returncode == 0 and json.loads(dry.stdout)["restored"] is False and not old.exists()
    done = cli("quarantine", "restore", entries[0]["id"])
    assert done.returncode == 0, done.stderr
    assert old.read_text() == '{"content": "x"}'
    again = cli("quarantine", "restore", entries[0]["id"])
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    unknown = cli("quarantine", "restore", "nope")
    assert unknown.returncode == 2 and "no quarantine entry" in unknown.stderr
    assert cli("quarantine", "list").stdout.startswith("quarantine is empty")
    assert "restored" in cli("--json", "quarantine", "list", "--all").stdout
    assert "Example" in cli("quarantine", "restore", "--help").stdout
