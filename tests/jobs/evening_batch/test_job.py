"""evening-batch on the real sample: Mnemosyne's sleep under our lock, the maps, freshness, collected errors."""

from __future__ import annotations

import json

import apsw
import pytest

from mnemo_ops import database
from mnemo_ops.core import state
from mnemo_ops.core.lock import WriterLock, lock_path_for
from mnemo_ops.database import transactions
from mnemo_ops.foundation import exit_codes
from mnemo_ops.jobs import run_job
from mnemo_ops.jobs.evening_batch import job as evening_batch
from mnemo_ops.jobs.evening_batch.consolidation.episodic import sleep_cutoff
from mnemo_ops.jobs.evening_batch.topics import store
from tests.conftest import run_cli
from tests.purity import assert_unchanged, sample_snapshot

JOB = "evening-batch"


def _working_rows(db_path):
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return {
            row["id"]: row
            for row in database.fetch_dicts(
                connection,
                "SELECT id, content, source, timestamp, consolidated_at, valid_until "
                "FROM working_memory",
            )
        }
    finally:
        connection.close()


def _episodic_rows(db_path):
    """Mnemosyne's summaries (the sleep stages' NREM summaries have tests of their own)."""
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return database.fetch_dicts(
            connection,
            "SELECT id, summary_of, source FROM episodic_memory "
            "WHERE coalesce(source, '') != 'sleep-nrem'",
        )
    finally:
        connection.close()


def test_consolidates_rows_older_than_the_cutoff_once_and_keeps_every_working_row(
    sample, sample_settings
):
    before = _working_rows(sample.db_path)
    cutoff = sleep_cutoff()
    old = {memory_id for memory_id, row in before.items() if row["timestamp"] < cutoff}
    fresh = set(before) - old
    assert old and fresh  # the sample has rows aged 8-41 days and rows written today

    result = run_job(sample_settings, JOB, show_progress=False)

    assert result.status == "ok", result.error
    assert result.changes["items_consolidated"] == len(old)
    episodes = _episodic_rows(sample.db_path)
    assert result.changes["summaries_created"] == len(episodes) > 0
    summarized = {
        memory_id for episode in episodes for memory_id in episode["summary_of"].split(",")
    }
    assert summarized == old
    after = _working_rows(sample.db_path)
    assert set(before) <= set(after)  # nothing deleted (Mnemosyne's sleep is additive since E3)
    graduated = set(after) - set(before)  # the owner's statements made global rows, nothing else
    assert result.changes["statements_graduated"] == len(graduated)
    assert all(after[memory_id]["source"] == "fact" for memory_id in graduated)
    assert all(after[memory_id]["content"] == before[memory_id]["content"] for memory_id in before)
    assert all(after[memory_id]["consolidated_at"] for memory_id in old)
    assert not any(after[memory_id]["consolidated_at"] for memory_id in fresh)
    assert (
        result.stats["consolidation"]["model"] == "aaak"
    )  # no model configured offline: Mnemosyne's AAAK
    # The pre-write checkpoint was taken (and verified) before the first write.
    assert result.checkpoint and result.checkpoint.startswith("pre-evening-batch-")
    assert (sample_settings.backups_dir / result.checkpoint / "manifest.json").exists()

    second = run_job(sample_settings, JOB, show_progress=False)
    assert second.status == "ok", second.error
    assert second.changes["items_consolidated"] == 0
    assert second.changes["summaries_created"] == 0
    assert len(_episodic_rows(sample.db_path)) == len(episodes)
    assert all(count == 0 for count in second.changes.values()), second.changes
    # The second run still sees the rows graduation wrote after the first run's observation (its
    # bookkeeping in state.db takes a checkpoint); a third has nothing at all to write.
    third = run_job(sample_settings, JOB, show_progress=False)
    assert all(count == 0 for count in third.changes.values()), third.changes
    assert third.checkpoint is None  # nothing to write, so no checkpoint
    assert set(_working_rows(sample.db_path)) == set(after)


def test_skips_with_75_while_another_writer_holds_the_lock(sample, sample_settings):
    lock = WriterLock(
        lock_path_for(sample_settings.state_dir, sample_settings.db_path), "other-job"
    )
    lock.acquire()
    try:
        result = run_job(sample_settings, JOB, show_progress=False)
    finally:
        lock.release()
    assert result.status == "skipped" and result.exit_code == exit_codes.TEMPFAIL
    assert not _episodic_rows(sample.db_path)


@pytest.mark.heavy
def test_dry_run_reports_the_real_counts_and_leaves_no_file_behind(sample, cli, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    before = sample_snapshot(sample)

    completed = cli("--json", "run", JOB, "--dry-run", env={"TMPDIR": str(scratch)})

    assert completed.returncode == 0, completed.stderr
    dry = json.loads(completed.stdout)
    assert dry["status"] == "dry-run"
    assert_unchanged(before, sample_snapshot(sample))
    assert list(scratch.iterdir()) == []  # the snapshot Mnemosyne's dry run worked on is gone
    assert dry["changes"]["items_consolidated"] > 0

    real = json.loads(cli("--json", "run", JOB).stdout)
    for name in ("items_consolidated", "summaries_created"):
        assert real["changes"][name] == dry["changes"][name]


def test_topic_map_is_stable_on_the_fixture(sample, sample_settings):
    first = run_job(sample_settings, JOB, show_progress=False)
    assert first.status == "ok", first.error
    db = state.open_state(sample_settings.state_db_path)
    stored = store.load_map(db, with_members=True)
    topics = {topic["label"]: topic for topic in store.load_topics(db)}
    db.conn.close()
    assert topics, "the fixture has shared themes (tomatoes, Lisbon, the photo disk)"
    contents = {f"w:{row['id']}": row["content"] for row in _working_rows(sample.db_path).values()}
    tomato = stored.topics["tomato"]
    assert "tomatoes" in tomato.aliases  # near-identical labels merged
    working_members = [key for key in tomato.members if key.startswith("w:")]
    assert len(working_members) >= 4
    assert all("tomato" in contents[key].lower() for key in working_members)

    again = run_job(sample_settings, JOB, show_progress=False)
    assert (
        again.changes["memories_mapped"] == 0 and again.stats["topic_map"]["mode"] == "incremental"
    )

    rebuilt = run_job(sample_settings, JOB, options={"rebuild": True}, show_progress=False)
    assert rebuilt.stats["topic_map"]["mode"] == "full"
    assert rebuilt.changes["topics_created"] == rebuilt.changes["topics_removed"] == 0
    assert rebuilt.changes["topics_updated"] == 0
    db = state.open_state(sample_settings.state_db_path)
    assert store.load_map(db, with_members=True).assignments == stored.assignments
    db.conn.close()
    report = (sample_settings.reports_dir / "topics.md").read_text(encoding="utf-8")
    assert "## tomato (also: tomatoes)" in report


def _add_working_rows(db_path, contents, session="bakery"):
    connection = apsw.Connection(str(db_path))
    with transactions.immediate_transaction(connection):
        for number, content in enumerate(contents):
            connection.execute(
                "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance) "
                "VALUES (?, ?, 'conversation', datetime('now', 'localtime'), ?, 0.5)",
                (f"{session}{number:08x}"[:16].ljust(16, "0"), content, session),
            )
    connection.close()


SOURDOUGH = [
    "Dana started a sourdough starter with rye flour",
    "The sourdough loaf needs a longer proof in winter",
    "Feeding the sourdough starter twice a day keeps it lively",
    "Dana shared her sourdough discard pancake recipe",
    "A cold kitchen slowed the sourdough fermentation",
    "Dana bakes the sourdough at 250 degrees in a dutch oven",
]


def test_incremental_update_assigns_only_changed_memories(sample, sample_settings):
    run_job(sample_settings, JOB, show_progress=False)
    _add_working_rows(sample.db_path, SOURDOUGH[:3])

    result = run_job(sample_settings, JOB, show_progress=False)

    assert result.stats["topic_map"]["mode"] == "incremental"
    assert result.changes["memories_mapped"] == 3
    assert result.changes["topics_created"] == 1
    db = state.open_state(sample_settings.state_db_path)
    topic_map = store.load_map(db, with_members=True)
    db.conn.close()
    assert topic_map.topics["sourdough"].size == 3
    assert {key for key, label in topic_map.assignments.items() if label == "sourdough"} == {
        key for key in topic_map.assignments if key.startswith("w:bakery")
    }


def test_stale_map_is_reported_when_more_than_the_threshold_changed(sample, sample_settings, cli):
    run_job(sample_settings, JOB, show_progress=False)
    fresh = json.loads(cli("--json", "topics").stdout)
    assert not [w for w in fresh["warnings"] if w["code"].endswith("-stale")]

    _add_working_rows(
        sample.db_path, SOURDOUGH
    )  # 6 of ~52 live memories (NREM's summaries included): over 10%

    stale = json.loads(cli("--json", "topics").stdout)
    codes = {warning["code"] for warning in stale["warnings"]}
    assert {"topic-map-stale", "seed-map-stale"} <= codes
    assert stale["freshness"]["changed_memories"] == len(SOURDOUGH)
    rerun = run_job(sample_settings, JOB, show_progress=False)
    assert rerun.stats["topic_map"]["mode"] == "full"  # too much changed for an incremental pass
    assert not [w for w in rerun.warnings if w.code.endswith("-stale")]


def _canonical_store(sample, monkeypatch):
    monkeypatch.setenv(
        "MNEMOSYNE_DATA_DIR", str(sample.data_dir)
    )  # Mnemosyne's default path: the sample's own
    from mnemosyne.core.canonical import CanonicalStore

    return CanonicalStore(db_path=sample.db_path)


def test_memory_block_entry_of_a_superseded_canonical_fact_is_reported(
    sample, sample_settings, cli, monkeypatch
):
    canonical = _canonical_store(sample, monkeypatch)
    canonical.remember(
        "default", "preference", "morning_drink", "Dana drinks regular coffee every morning"
    )
    canonical.remember(
        "default",
        "preference",
        "morning_drink",
        "Dana switched her morning coffee to decaf on doctor's advice",
    )
    canonical.remember("default", "travel", "next_trip", "Planning a trip to Porto in spring")
    canonical.remember(
        "default", "travel", "next_trip", "Planning a trip to Lisbon in March with her sister"
    )
    canonical.conn.close()

    result = run_job(sample_settings, JOB, show_progress=False)

    stale = [
        warning for warning in result.warnings if warning.code == "memory-block-superseded-fact"
    ]
    assert len(stale) == 1, [w.message for w in result.warnings]
    message = stale[0].message
    assert "USER.md" in message and "Drinks regular coffee in the morning" in message
    assert "decaf on doctor's advice" in message  # names the newer fact
    listed = json.loads(cli("--json", "topics").stdout)
    assert [w for w in listed["warnings"] if w["code"] == "memory-block-superseded-fact"]


def test_canonical_backed_memory_is_seeded_first(sample, sample_settings, monkeypatch):
    weakest = "Dana asked how to save tomato seeds by fermenting them in a jar"  # importance 0.45
    canonical = _canonical_store(sample, monkeypatch)
    canonical.remember("default", "garden", "seed_saving", weakest)
    canonical.conn.close()

    run_job(sample_settings, JOB, show_progress=False)

    db = state.open_state(sample_settings.state_db_path)
    seeds = store.load_seeds(db)["tomato"]
    db.conn.close()
    assert seeds[0]["canonical"] and seeds[0]["preview"] == weakest
    assert [seed["importance"] for seed in seeds[1:]] == sorted(
        (seed["importance"] for seed in seeds[1:]), reverse=True
    )


def test_a_failing_step_is_collected_and_later_steps_still_run(sample):
    # Mnemosyne's age cut-off comes from its environment; a broken value makes consolidation fail.
    # (It breaks Mnemosyne's recall too: the guard measures nothing before or after, so it cannot
    # tell the change makes recall worse, and lets the run go on.)
    completed = run_cli(sample, "--json", "run", JOB, env={"MNEMOSYNE_WM_TTL_HOURS": "a week"})

    assert completed.returncode == exit_codes.FAILED
    result = json.loads(completed.stdout)
    steps = {step["name"]: step for step in result["stats"]["steps"]}
    assert steps["consolidation"]["status"] == "failed"
    assert "MNEMOSYNE_WM_TTL_HOURS" in steps["consolidation"]["error"]
    assert [steps[name]["status"] for name in ("topic-map", "seed-map", "freshness")] == [
        "ok",
        "ok",
        "ok",
    ]
    # Graduation (off by default) writes nothing, so the broken value does not reach it.
    assert steps["graduation"]["status"] == "ok"
    assert result["status"] == "failed" and result["error"].startswith(
        f"1 of {len(evening_batch.STEPS)} steps failed: consolidation:"
    )
    assert (sample.state_dir / "reports" / "topics.md").is_file()
    assert not _episodic_rows(sample.db_path)


@pytest.mark.parametrize(
    "option", ["min_topic_size: 0", "stale_fraction: 1.5", "consolidation_model: gpt-imaginary"]
)
def test_bad_config_values_exit_2_naming_the_key(sample, tmp_path, option):
    config = tmp_path / "config.yaml"
    config.write_text(f"evening_batch:\n  {option}\n", encoding="utf-8")
    completed = run_cli(sample, "--config", str(config), "--json", "run", JOB, "--dry-run")
    assert completed.returncode == exit_codes.USAGE
    output = json.loads(completed.stdout)
    assert f"evening_batch.{option.split(':')[0]}" in (output.get("error") or "")


@pytest.mark.heavy
def test_dry_run_of_an_incremental_update_is_pure_and_counts_what_the_real_run_does(
    sample, sample_settings, cli
):
    run_job(sample_settings, JOB, show_progress=False)
    _add_working_rows(sample.db_path, SOURDOUGH[:3])
    before = sample_snapshot(sample)

    dry = json.loads(cli("--json", "run", JOB, "--dry-run").stdout)

    assert_unchanged(before, sample_snapshot(sample))
    assert dry["stats"]["topic_map"]["mode"] == "incremental"
    real = run_job(sample_settings, JOB, show_progress=False)
    for name in ("topics_created", "topics_updated", "memories_mapped", "seed_topics_updated"):
        assert dry["changes"][name] == real.changes[name], name
    assert real.changes["topics_created"] == 1


def test_claims_left_by_a_killed_sleep_are_reclaimed_and_consolidated(sample, sample_settings):
    # A sleep killed between its claim and its summary leaves rows marked consolidated with no episode.
    orphan = min(_working_rows(sample.db_path).values(), key=lambda row: row["timestamp"])
    connection = apsw.Connection(str(sample.db_path))
    with transactions.immediate_transaction(connection):
        connection.execute(
            "UPDATE working_memory SET consolidated_at = datetime('now', 'localtime', '-2 hours'), "
            "consolidation_claimed_at = datetime('now', 'localtime', '-2 hours') WHERE id = ?",
            (orphan["id"],),
        )
    connection.close()

    result = run_job(sample_settings, JOB, show_progress=False)

    assert result.status == "ok", result.error
    assert result.changes["claims_reclaimed"] == 1
    summarized = {
        memory_id
        for episode in _episodic_rows(sample.db_path)
        for memory_id in episode["summary_of"].split(",")
    }
    assert orphan["id"] in summarized


def _remember_with_regex_kg(sample, session: str, content: str) -> None:
    """Store `content` through Mnemosyne's own remember, with its regex knowledge-graph writer on.

    3.15 always runs that writer (the sample's "decided ..." turns fill memoria_kg); 4.0 runs it
    only with MNEMOSYNE_REGEX_KG=1, which 3.15 ignores.
    """
    import subprocess
    import sys

    environ = sample.environ()
    environ["MNEMOSYNE_REGEX_KG"] = "1"
    script = (
        "import sys\n"
        "from mnemosyne.core.memory import Mnemosyne\n"
        "Mnemosyne(session_id=sys.argv[2], db_path=sys.argv[1]).remember(sys.argv[3], "
        "source='conversation', importance=0.5)\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(sample.db_path), session, content],
        env=environ,
        check=True,
        capture_output=True,
        timeout=120,
    )


def test_mnemosyne_memoria_dedup_does_not_delete_rows(sample, sample_settings):
    # Mnemosyne's sleep_all_sessions (3.15 and 4.0) would DELETE exact duplicate memoria_kg rows; we
    # never delete. The row to duplicate is written by Mnemosyne itself.
    _remember_with_regex_kg(
        sample, "reading-club", "We decided to read a novel about generation ships in January"
    )
    connection = apsw.Connection(str(sample.db_path))
    with transactions.immediate_transaction(connection):
        connection.execute(
            "INSERT INTO memoria_kg (session_id, subject, predicate, object, message_idx, "
            "confidence, source_memory_id) "
            "SELECT 'other-session', subject, predicate, object, message_idx, confidence, source_memory_id "
            "FROM memoria_kg LIMIT 1"
        )
    before = connection.execute("SELECT count(*) FROM memoria_kg").fetchone()[0]
    connection.close()
    assert before >= 2

    result = run_job(sample_settings, JOB, show_progress=False)

    assert result.status == "ok" and result.changes["items_consolidated"] > 0
    connection = apsw.Connection(str(sample.db_path))
    assert connection.execute("SELECT count(*) FROM memoria_kg").fetchone()[0] == before
    connection.close()


def _doctor_findings(sample):
    import subprocess
    import sys
    from pathlib import Path

    doctor = Path(sys.executable).with_name("mnemosyne")
    completed = subprocess.run(
        [str(doctor), "doctor", "--db", str(sample.db_path), "--format", "json"],
        env=sample.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)["findings"]


def _recall(sample, query):
    import subprocess
    import sys

    script = (
        "import json, sys; from mnemosyne.core.memory import Mnemosyne; "
        "m = Mnemosyne(session_id='hermes_today-2026-11-30', db_path=sys.argv[1]); "
        "print(json.dumps([r.get('content', '') for r in m.recall(sys.argv[2], top_k=5)]))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, str(sample.db_path), query],
        env=sample.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.splitlines()[-1])


@pytest.mark.heavy
def test_mnemosyne_doctor_finds_nothing_new_and_recall_works_afterwards(sample, sample_settings):
    findings = _doctor_findings(sample)
    recalled = _recall(sample, "tomato seeds")
    assert recalled

    assert run_job(sample_settings, JOB, show_progress=False).status == "ok"

    assert len(_doctor_findings(sample)) <= len(findings)
    assert set(recalled) <= set(_recall(sample, "tomato seeds"))


def test_consolidation_leaves_the_schema_version_alone(sample, sample_settings):
    """Mnemosyne re-creates its wm_au trigger per instance; on a current schema we must not let it,
    because a schema change can wedge the live agent's connection (see mnemo_ops.mnemosyne.api)."""
    import apsw

    def schema_version() -> int:
        connection = apsw.Connection(str(sample.db_path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return connection.execute("PRAGMA schema_version").fetchone()[0]
        finally:
            connection.close()

    before = schema_version()
    result = run_job(sample_settings, JOB, show_progress=False)
    assert result.status == "ok", result.error
    assert result.changes["items_consolidated"] > 0
    assert schema_version() == before


def _eligible_sessions(db_path) -> dict[str, int]:
    """Sessions with rows the sleep takes now, and how many."""
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return dict(
            connection.execute(
                "SELECT session_id, count(*) FROM working_memory WHERE timestamp < ? "
                "AND consolidated_at IS NULL AND (pinned IS NULL OR pinned = 0) GROUP BY session_id",
                (sleep_cutoff(),),
            ).fetchall()
        )
    finally:
        connection.close()


@pytest.mark.heavy
def test_the_session_quota_sleeps_the_oldest_sessions_and_leaves_the_rest_for_the_next_night(
    sample, sample_settings
):
    waiting = _eligible_sessions(sample.db_path)
    assert len(waiting) >= 2, waiting  # the sample has old rows in several sessions

    first = run_job(
        sample_settings, JOB, options={"max_sessions_per_night": 1}, show_progress=False
    )

    assert first.status == "ok", first.error
    left = _eligible_sessions(sample.db_path)
    slept = set(waiting) - set(left)
    assert len(slept) == 1 and set(left) < set(waiting)  # one session, all of its rows
    assert first.changes["items_consolidated"] == waiting[slept.pop()]
    assert first.stats["consolidation"]["sessions_deferred"] == len(waiting) - 1
    assert "consolidation-sessions-deferred" in {warning.code for warning in first.warnings}

    # Each night takes the oldest of what is left; without the quota the rest is done at once.
    rest = run_job(sample_settings, JOB, show_progress=False)
    assert rest.status == "ok", rest.error
    assert rest.changes["items_consolidated"] == sum(left.values())
    assert rest.stats["consolidation"]["sessions_deferred"] == 0
    assert _eligible_sessions(sample.db_path) == {}


@pytest.mark.heavy
def test_a_session_left_with_rows_is_skipped_until_its_rows_change(sample, sample_settings):
    from mnemo_ops.jobs.evening_batch.consolidation.steps import LEFT_OVER

    waiting = _eligible_sessions(sample.db_path)
    stuck, count = sorted(waiting.items())[0]
    # As a night whose sleep left that session's rows untaken records it.
    ledger = state.open_state(sample_settings.state_db_path)
    LEFT_OVER.ensure(ledger)
    ledger[LEFT_OVER.name].insert({"session_id": stuck, "eligible": count, "slept_at": "x"})
    ledger.close()

    first = run_job(sample_settings, JOB, show_progress=False)

    assert first.status == "ok", first.error
    assert first.stats["consolidation"]["sessions_unchanged"] == 1
    assert _eligible_sessions(sample.db_path) == {stuck: count}  # the others slept, not it

    # A new row old enough to take changes the session's count: it sleeps again.
    connection = apsw.Connection(str(sample.db_path))
    with transactions.immediate_transaction(connection):
        connection.execute(
            "INSERT INTO working_memory (id, content, source, timestamp, session_id, importance) "
            "VALUES ('leftover-new-row', 'Dana repotted the fig tree into a larger pot', "
            "'conversation', '2020-01-01T10:00:00', ?, 0.5)",
            (stuck,),
        )
    connection.close()
    second = run_job(sample_settings, JOB, show_progress=False)
    assert second.status == "ok", second.error
    assert second.stats["consolidation"]["sessions_unchanged"] == 0
    assert second.changes["items_consolidated"] == count + 1
    assert _eligible_sessions(sample.db_path) == {}
    ledger = state.open_state(sample_settings.state_db_path)
    assert list(ledger[LEFT_OVER.name].rows) == []  # finished sessions are forgotten
    ledger.close()
