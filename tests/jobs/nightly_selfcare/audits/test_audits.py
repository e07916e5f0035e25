"""The nightly-selfcare audits, each on a real sample home (real files, real SQLite, real modes)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from mnemo_ops.foundation.clock import utc_now
from mnemo_ops.jobs.nightly_selfcare.audits import (
    auth_files,
    backups,
    database_health,
    jobs,
    memory_blocks,
    skills,
)
from tests.jobs.nightly_selfcare.helpers import (
    age_file,
    install_in_hermes,
    record_run,
    settings_for,
    write_checkpoint,
    write_config,
)

NOW = datetime(2026, 12, 3, 13, 0, tzinfo=UTC)


def codes(outcome) -> dict[str, str]:
    """code -> severity of the outcome's findings (the last one wins for repeated codes)."""
    return {warning.code: warning.severity for warning in outcome.warnings}


def write_block(sample, name: str, entries: list[str]) -> None:
    (sample.memory_blocks_dir / name).write_text("\n§\n".join(entries), encoding="utf-8")


def test_memory_blocks_measured_like_hermes_with_80_and_100_percent_thresholds(sample):
    settings = settings_for(sample)
    # MEMORY.md: 2,200 limit. 1,800 chars = 82% -> warning. USER.md: 1,375 limit. 1,400 chars -> error.
    write_block(sample, "MEMORY.md", ["a" * 897, "b" * 900])  # 897 + 3 (delimiter) + 900 = 1,800
    write_block(sample, "USER.md", ["c" * 700, "", "d" * 697])  # one empty entry, 1,400 chars
    outcome = memory_blocks.audit(settings, utc_now())
    assert outcome.stats["MEMORY.md"]["chars"] == 1800
    assert outcome.stats["USER.md"]["chars"] == 1400 and outcome.stats["USER.md"]["entries"] == 2
    found = {(w.code, w.severity, w.fix) for w in outcome.warnings}
    assert ("memory-block-near-limit", "warning", "mnemo-ops run memory-block-migrate") in found
    assert ("memory-block-over-limit", "error", "mnemo-ops run memory-block-migrate") in found
    assert "memory-block-empty-entry" in codes(outcome)
    over = next(w for w in outcome.warnings if w.code == "memory-block-over-limit")
    assert "USER.md" in over.message


def test_memory_blocks_sample_is_healthy_and_age_is_flagged(sample):
    settings = settings_for(sample)
    assert [w.code for w in memory_blocks.audit(settings, utc_now()).warnings] == []
    age_file(sample.memory_blocks_dir / "USER.md", utc_now() - timedelta(days=45))
    outcome = memory_blocks.audit(settings, utc_now())
    assert codes(outcome) == {"memory-block-stale": "info"}
    (sample.memory_blocks_dir / "MEMORY.md").unlink()
    assert codes(memory_blocks.audit(settings, utc_now()))["memory-block-missing"] == "info"


def test_limits_come_from_the_config(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path, {"memory_char_limit": 300}))
    outcome = memory_blocks.audit(settings, utc_now())  # the sample MEMORY.md has 312 characters
    assert codes(outcome) == {"memory-block-over-limit": "error"}


def test_skills_inventory_flags_missing_invalid_frontmatter_and_duplicates(sample):
    settings = settings_for(sample)
    root = sample.hermes_home / "skills"
    files = {
        "notes/SKILL.md": "---\nname: notes\ndescription: Take notes.\n---\nBody\n",
        "research/arxiv/SKILL.md": "---\nname: arxiv\ndescription: Search papers.\n---\n",
        "other/arxiv-copy/SKILL.md": "---\nname: arxiv\ndescription: A copy.\n---\n",
        "plain/SKILL.md": "# No frontmatter here\n",
        "broken/SKILL.md": "---\nname: [unclosed\n---\n",
        "nameless/SKILL.md": "---\ndescription: no name\n---\n",
    }
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    outside = sample.directory / "elsewhere"
    (outside / "linked").mkdir(parents=True)
    (outside / "linked" / "SKILL.md").write_text("no frontmatter", encoding="utf-8")
    (root / "linked").symlink_to(outside / "linked")  # never followed
    outcome = skills.audit(settings, utc_now())
    assert outcome.stats == {"count": 6, "valid": 3, "names": 2}
    by_code = {}
    for warning in outcome.warnings:
        by_code.setdefault(warning.code, []).append(warning.message)
    assert (
        len(by_code["skill-frontmatter-missing"]) == 1
        and "plain" in by_code["skill-frontmatter-missing"][0]
    )
    assert len(by_code["skill-frontmatter-invalid"]) == 2
    assert any("lacks name" in message for message in by_code["skill-frontmatter-invalid"])
    assert by_code["skill-duplicate-name"] == [
        "skill name 'arxiv' is used by 2 skills: other/arxiv-copy, research/arxiv"
    ]


def test_skills_folder_missing_is_info(sample):
    outcome = skills.audit(settings_for(sample), utc_now())
    assert codes(outcome) == {"skill-folder-missing": "info"}


SECRET_TOKEN = "sk-live-AUDIT-SECRET-0123456789"


def test_auth_files_mode_parse_and_expiry_without_values(sample):
    settings = settings_for(sample)
    home = sample.hermes_home
    auth = {
        "version": 1,
        "active_provider": "nous",
        "providers": {
            "nous": {
                "access_token": SECRET_TOKEN,
                "refresh_token": SECRET_TOKEN + "-r",
                "expires_at": (NOW - timedelta(hours=1)).isoformat(),
                "agent_key": SECRET_TOKEN + "-k",
                "agent_key_expires_at": (NOW + timedelta(days=2)).isoformat(),
            },
            "legacy": {
                "api_key": SECRET_TOKEN + "-l",
                "expires_at": int((NOW - timedelta(days=1)).timestamp()),
            },
            "team": {"token": SECRET_TOKEN + "-t", "expiry": (NOW + timedelta(days=3)).isoformat()},
        },
    }
    (home / "auth.json").write_text(json.dumps(auth), encoding="utf-8")
    os.chmod(home / "auth.json", 0o644)
    (home / ".env").write_text(
        f"# keys\nOPENROUTER_API_KEY={SECRET_TOKEN}\nexport QUOTED='{SECRET_TOKEN}'\n"
        f"this line leaks {SECRET_TOKEN} without an equals sign\n"
        f"PORTAL_TOKEN_EXPIRES_AT={(NOW + timedelta(days=30)).isoformat()}\n",
        encoding="utf-8",
    )
    os.chmod(home / ".env", 0o600)
    with freeze_time(NOW):
        outcome = auth_files.audit(settings, utc_now())
    found = {(w.code, w.severity) for w in outcome.warnings}
    assert ("auth-file-permissions", "error") in found  # auth.json 0644
    assert ("auth-token-refresh-due", "info") in found  # nous access token: refreshable
    assert ("auth-expired", "error") in found  # legacy: no refresh token
    assert ("auth-expiring-soon", "warning") in found  # team: in 3 days
    assert ("auth-file-unparseable", "warning") in found  # .env line 4
    assert not any(
        w.code == "auth-expiring-soon" and "agent_key" in w.message for w in outcome.warnings
    )
    permissions = next(w for w in outcome.warnings if w.code == "auth-file-permissions")
    assert permissions.fix == f"chmod 600 {home / 'auth.json'}"
    unparseable = next(w for w in outcome.warnings if w.code == "auth-file-unparseable")
    assert "line 4" in unparseable.message
    assert outcome.stats[".env"]["keys"] == 3
    everything = json.dumps([w.to_dict() for w in outcome.warnings]) + json.dumps(outcome.stats)
    assert "SECRET" not in everything


def test_auth_json_that_does_not_parse_is_an_error_without_its_text(sample):
    settings = settings_for(sample)
    path = sample.hermes_home / "auth.json"
    path.write_text(
        '{"providers": {"x": {"access_token": "' + SECRET_TOKEN + '" "oops"}}}', encoding="utf-8"
    )
    os.chmod(path, 0o600)
    outcome = auth_files.audit(settings, utc_now())
    warning = next(w for w in outcome.warnings if w.code == "auth-file-unparseable")
    assert warning.severity == "error" and "line 1" in warning.message
    assert SECRET_TOKEN not in warning.message


def test_auth_symlink_is_not_followed(sample):
    settings = settings_for(sample)
    target = sample.directory / "real-auth.json"
    target.write_text("{}", encoding="utf-8")
    (sample.hermes_home / "auth.json").symlink_to(target)
    assert codes(auth_files.audit(settings, utc_now()))["auth-file-symlink"] == "warning"


def test_backup_freshness_from_manifests(sample, tmp_path):
    settings = settings_for(sample)
    with freeze_time(NOW):
        assert codes(backups.audit(settings, utc_now())) == {"backup-missing": "error"}
        write_checkpoint(settings, NOW - timedelta(hours=30))
        assert codes(backups.audit(settings, utc_now())) == {"backup-stale": "warning"}
        write_checkpoint(settings, NOW - timedelta(hours=5), verified=False)
        outcome = backups.audit(settings, utc_now())
        assert codes(outcome) == {"backup-stale": "warning", "backup-unverified": "warning"}
        write_checkpoint(settings, NOW - timedelta(hours=2))
        write_checkpoint(settings, NOW - timedelta(hours=1), failed=True)
        (settings.backups_dir / ".tmp-daily-in-progress").mkdir()  # work in progress: ignored
        outcome = backups.audit(settings, utc_now())
        assert codes(outcome) == {"backup-unverified": "warning", "backup-failed": "warning"}
        assert outcome.stats["newest_age_hours"] == 2.0 and outcome.stats["checkpoints"] == 3
        write_checkpoint(
            settings, NOW - timedelta(minutes=30)
        )  # a later success supersedes the failure
        outcome = backups.audit(settings, utc_now())
        assert codes(outcome) == {"backup-unverified": "warning"} and outcome.stats["failed"] == 1
    with freeze_time(NOW + timedelta(days=3)):
        assert codes(backups.audit(settings, utc_now()))["backup-stale"] == "error"


def test_jobs_overdue_with_grace_and_failing(sample):
    settings = settings_for(sample)
    install_in_hermes(settings, NOW - timedelta(days=2))
    # nightly-selfcare is implemented in this branch: its 13:00 slot.
    record_run(settings, "nightly-selfcare", "ok", NOW - timedelta(days=1))
    # (Other implemented jobs never ran here, so they are overdue too: only nightly-selfcare is checked.)
    with freeze_time(NOW + timedelta(minutes=30)):  # within the 60-minute grace of today's slot
        outcome = jobs.audit(settings, utc_now())
        assert "nightly-selfcare" not in outcome.stats["overdue"]
        assert not any(
            "nightly-selfcare" in w.message for w in outcome.warnings if w.code == "job-overdue"
        )
    with freeze_time(NOW + timedelta(minutes=90)):
        outcome = jobs.audit(settings, utc_now())
        assert "nightly-selfcare" in outcome.stats["overdue"]
        overdue = next(
            w
            for w in outcome.warnings
            if w.code == "job-overdue" and "nightly-selfcare" in w.message
        )
        assert overdue.severity == "warning" and overdue.fix == "mnemo-ops run nightly-selfcare"
    record_run(settings, "bridge-drain", "failed", NOW - timedelta(hours=2), error="boom")
    record_run(settings, "bridge-drain", "failed", NOW - timedelta(hours=1), error="boom")
    with freeze_time(NOW):
        failing = [w for w in jobs.audit(settings, utc_now()).warnings if w.code == "job-failing"]
    assert (
        len(failing) == 1
        and failing[0].severity == "error"
        and "last 2 run(s)" in failing[0].message
    )
    assert failing[0].fix == "mnemo-ops -v run bridge-drain"
    for minutes in (30, 20, 10):
        record_run(settings, "backup", "skipped", NOW - timedelta(minutes=minutes))
    with freeze_time(NOW):
        assert codes(jobs.audit(settings, utc_now()))["job-skipped-repeatedly"] == "warning"


def test_a_fresh_install_is_not_late_and_says_once_that_nothing_is_scheduled(sample):
    """Issue 28, item 3: after the first backup, jobs never installed are not overdue."""
    settings = settings_for(sample)
    record_run(settings, "backup", "ok", NOW - timedelta(hours=1))
    with freeze_time(NOW):
        outcome = jobs.audit(settings, utc_now())
    assert outcome.stats["overdue"] == []
    assert [w.code for w in outcome.warnings] == ["job-not-installed"]
    (line,) = outcome.warnings
    assert line.severity == "info" and "no job is installed in a scheduler" in line.message
    assert (
        "cron install" in line.fix
        and "hermes install" in line.fix
        and "systemd install" in line.fix
    )


def test_a_job_is_overdue_only_for_slots_after_it_was_installed(sample):
    settings = settings_for(sample)
    installed = NOW + timedelta(minutes=5)  # after today's 13:00 slot of nightly-selfcare
    install_in_hermes(settings, installed)
    with freeze_time(NOW + timedelta(hours=4)):
        outcome = jobs.audit(settings, utc_now())
    # Daily jobs whose slot was before the install have missed nothing yet; hourly bridge-drain
    # (at :15) has missed 14:15, 15:15 and 16:15 since.
    assert "nightly-selfcare" not in outcome.stats["overdue"]
    assert "bridge-drain" in outcome.stats["overdue"]
    assert "job-not-installed" not in codes(outcome)
    with freeze_time(NOW + timedelta(days=1, hours=2)):  # tomorrow's 13:00 slot has passed too
        assert "nightly-selfcare" in jobs.audit(settings, utc_now()).stats["overdue"]


def test_database_health_quick_check_wal_and_disk(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path))
    outcome = database_health.audit(settings, utc_now())
    assert outcome.warnings == [] and outcome.stats["quick_check"] == "ok"
    huge = settings_for(
        sample, write_config(tmp_path, {"free_disk_warn_mb": 10**9, "free_disk_error_mb": 10**8})
    )
    assert codes(database_health.audit(huge, utc_now())) == {"disk-space-low": "error"}
    (sample.db_path.parent / "mnemosyne.db-wal").write_bytes(b"\0" * (2 * 1024 * 1024))
    small_wal = settings_for(sample, write_config(tmp_path, {"wal_warn_mb": 1}))
    assert codes(database_health.audit(small_wal, utc_now()))["db-wal-large"] == "warning"


def test_database_health_reports_a_damaged_database(sample, tmp_path):
    settings = settings_for(sample, write_config(tmp_path))
    (sample.db_path.parent / "mnemosyne.db-wal").unlink(missing_ok=True)
    data = bytearray(sample.db_path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    # Scribble over the middle pages (not the header, not page 1): quick_check must notice.
    for page in range(2, len(data) // page_size - 1, 2):
        data[page * page_size + 8 : page * page_size + 64] = b"\xff" * 56
    sample.db_path.write_bytes(bytes(data))
    outcome = database_health.audit(settings, utc_now())
    assert set(codes(outcome)) & {"db-quick-check-failed", "db-unreadable"}
    assert all(w.severity == "critical" for w in outcome.warnings if w.code.startswith("db-"))


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2026-12-01T00:00:00Z", datetime(2026, 12, 1, tzinfo=UTC)),
        (1796083200, datetime(2026, 12, 1, tzinfo=UTC)),
        (1796083200000, datetime(2026, 12, 1, tzinfo=UTC)),
        ("1796083200", datetime(2026, 12, 1, tzinfo=UTC)),
        ("not a date", None),
        (True, None),
    ],
)
def test_expiry_values(value, expected):
    assert auth_files.parse_moment(value) == expected


def test_a_crashing_auth_audit_never_quotes_its_exception(sample, monkeypatch):
    from mnemo_ops.jobs.nightly_selfcare.audits import run_audit

    def explode(text):
        raise ValueError(f"cannot parse {SECRET_TOKEN}")

    monkeypatch.setattr(auth_files, "parse_env", explode)  # a parser bug, not a mock of a real part
    (sample.hermes_home / ".env").write_text(f"KEY={SECRET_TOKEN}\n", encoding="utf-8")
    os.chmod(sample.hermes_home / ".env", 0o600)
    outcome = run_audit("auth_files", settings_for(sample), utc_now())
    assert [w.code for w in outcome.warnings] == ["audit-crashed"]
    assert (
        "ValueError" in outcome.warnings[0].message
        and SECRET_TOKEN not in outcome.warnings[0].message
    )


# Secret-like values, wrapped in markers that no finding text contains (a bare value could happen to
# spell a finding code such as "auth-expired", which says nothing about leaking).
_values = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_",
    min_size=12,
    max_size=40,
).map(lambda value: f"sk~{value}~Q9")
_keys = st.from_regex(r"[A-Z][A-Z0-9_]{2,20}", fullmatch=True)


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pairs=st.lists(st.tuples(_keys, _values), min_size=1, max_size=8),
    junk=st.lists(_values, max_size=3),
    nested=st.dictionaries(_keys, _values, max_size=5),
)
def test_no_value_from_auth_files_ever_reaches_a_finding(sample, pairs, junk, nested):
    """Whatever the files hold, findings and stats carry no value from them."""
    home = sample.hermes_home
    lines = [f"{key}={value}" for key, value in pairs] + [f"{text} {text}" for text in junk]
    (home / ".env").write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.chmod(home / ".env", 0o644)
    document = {"providers": {"p": {**nested, "expires_at": "2000-01-01T00:00:00Z"}}}
    (home / "auth.json").write_text(json.dumps(document), encoding="utf-8")
    outcome = auth_files.audit(settings_for(sample), utc_now())
    shown = json.dumps([w.to_dict() for w in outcome.warnings]) + json.dumps(outcome.stats)
    for value in [value for _, value in pairs] + junk + list(nested.values()):
        assert value not in shown
    assert "auth-file-permissions" in shown and (
        "auth-expired" in shown or "auth-token-refresh-due" in shown
    )
