"""``mnemo-ops forgotten list|restore`` and the self-model counters of ``status``, as a user runs them."""

from __future__ import annotations

import json

import pytest

from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.foundation import exit_codes


def test_list_on_a_home_that_never_slept(cli):
    text = cli("forgotten", "list")
    assert text.returncode == 0 and "nothing archived" in text.stdout
    data = json.loads(cli("--json", "forgotten", "list", "--all").stdout)
    assert data["forgotten"] == []


def test_restore_needs_exactly_one_selector_and_a_known_id(cli):
    for arguments in ((), ("abc", "--all"), ("--night", "2026-01-01", "--all")):
        completed = cli("forgotten", "restore", *arguments)
        assert completed.returncode == exit_codes.USAGE
        assert completed.stderr.count("\n") == 1 and "name the memories" in completed.stderr
    unknown = cli("--json", "forgotten", "restore", "0123456789abcdef")
    assert unknown.returncode == exit_codes.USAGE
    assert json.loads(unknown.stdout)["exit_code"] == exit_codes.USAGE
    assert "no archived memory with id 0123456789abcdef" in unknown.stderr


def test_restore_waits_for_no_one_while_another_writer_holds_the_lock(sample, sample_settings, cli):
    lock = WriterLock(
        lock_path_for(sample_settings.state_dir, sample_settings.db_path), "evening-batch"
    )
    lock.acquire()
    try:
        completed = cli("forgotten", "restore", "--all")
    finally:
        lock.release()
    assert completed.returncode == exit_codes.TEMPFAIL
    assert "evening-batch" in completed.stderr
    # A dry run takes no lock.
    lock.acquire()
    try:
        assert cli("forgotten", "restore", "--all", "--dry-run").returncode == 0
    finally:
        lock.release()


@pytest.mark.heavy
def test_status_shows_the_self_model_counters(cli):
    assert cli("run", "evening-batch").returncode == 0
    data = json.loads(cli("--json", "status").stdout)["self_model"]
    assert data["sleeps"] == 1 and data["runs"]["evening-batch"] == {"ok": 1, "total": 1}
    assert {"memories_archived", "memories_restored", "confirmations", "edges_strengthened"} <= set(
        data
    )
    assert data["last_sleep"]
    text = cli("status").stdout
    assert "sleeps 1" in text and "archived" in text and "edges strengthened" in text
