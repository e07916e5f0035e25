"""monthly-maintenance on the real sample database: clean, damaged by hand, and beyond repair.

The job runs as a real ``mnemo-ops`` subprocess, as it does from cron. The test process inspects the
file with Python's sqlite3 (Mnemosyne's own SQLite) only between runs and always closes those
connections: two different SQLite libraries in one process share POSIX locks, and closing one
connection drops the other's locks (SQLite's "multiple copies of SQLite" warning).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import apsw
import pytest

from mnemo_ops.jobs.monthly_maintenance import repairs
from tests.checkpoints.helpers import write_checkpoint
from tests.purity import assert_unchanged, sample_snapshot

JOB = "monthly-maintenance"
# The recall guard's own notice when tests/jobs/conftest.py switches it off is not a finding.
UNRELATED = {"checkpoint-unavailable", "recall-guard-off"}
GHOST_ID = "0123456789abcdef"


def codes(result: dict) -> set[str]:
    """Finding codes of a JSON result, without the pre-write checkpoint's own notices."""
    return {
        warning["code"]
        for warning in result["warnings"]
        if warning["code"] not in UNRELATED and not warning["code"].startswith("checkpoint")
    }


def run(cli, *flags: str, env: dict[str, str] | None = None) -> dict:
    """``mnemo-ops --json run monthly-maintenance FLAGS`` in a subprocess; the parsed result."""
    completed = cli("--json", "run", JOB, *flags, env=env)
    assert completed.returncode in (0, 1), completed.stderr
    result = json.loads(completed.stdout)
    result["exit_code"] = completed.returncode
    return result


def connect(db: Path) -> closing:
    """A Python sqlite3 connection that is closed on leaving the block (``with sqlite3.connect`` is not)."""
    return closing(sqlite3.connect(db))


def working_ids(db: Path) -> list[str]:
    with connect(db) as connection:
        return [row[0] for row in connection.execute("SELECT id FROM working_memory ORDER BY id")]


def execute(db: Path, *statements: tuple) -> None:
    """Damage by hand: plain SQL through Python's sqlite3 (what Mnemosyne itself uses)."""
    connection = sqlite3.connect(db)
    for statement in statements:
        connection.execute(*statement)
    connection.commit()
    connection.close()


def row_counts(db: Path) -> dict[str, int]:
    with connect(db) as connection:
        return {
            table: connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in (
                "working_memory",
                "episodic_memory",
                "canonical_facts",
                "triples",
                "graph_edges",
                "facts",
                "gists",
            )
        }


def doctor(sample, db: Path) -> dict:
    """``mnemosyne doctor --db X --format json`` in a real subprocess."""
    executable = Path(sys.executable).parent / "mnemosyne"
    completed = subprocess.run(
        [str(executable), "doctor", "--db", str(db), "--format", "json"],
        env=sample.environ(),
        cwd=sample.directory,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def fts_consistent(db: Path, table: str) -> bool:
    connection = apsw.Connection(str(db))
    try:
        connection.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        return True
    except apsw.CorruptError:
        return False
    finally:
        connection.close()


def damage_repairable(db: Path) -> dict:
    """Every kind of repairable damage, made by hand; returns the ids involved."""
    ids = working_ids(db)
    missing, outdated, closed_source = ids[0], ids[1], ids[2]
    execute(
        db,
        # fts_working: one row's entry lost, one ghost entry, one entry with old text.
        ("DELETE FROM fts_working WHERE id = ?", (missing,)),
        (
            "INSERT INTO fts_working(id, content) VALUES (?, 'ghost entry for a row that never existed')",
            (GHOST_ID,),
        ),
        ("UPDATE fts_working SET content = 'text from before an edit' WHERE id = ?", (outdated,)),
        # fts_episodes (external content): an episode whose index entry is gone.
        (
            "INSERT INTO episodic_memory(id, content, summary_of) VALUES ('ep-test-1', 'Dana grows tomatoes', '')",
        ),
        (
            "INSERT INTO episodic_memory(id, content, summary_of) VALUES ('ep-test-2', 'Frost came late', '')",
        ),
        (
            "INSERT INTO fts_episodes(fts_episodes, rowid, content) SELECT 'delete', rowid, content "
            "FROM episodic_memory WHERE id = 'ep-test-1'",
        ),
        # triples: three open rows for one (subject, predicate), one unrelated open row.
        (
            "INSERT INTO triples(subject, predicate, object, valid_from) VALUES ('user', "
            "'lives_in', 'Lyon', '2024-01-01')",
        ),
        (
            "INSERT INTO triples(subject, predicate, object, valid_from) VALUES ('user', "
            "'lives_in', 'Paris', '2025-06-01')",
        ),
        (
            "INSERT INTO triples(subject, predicate, object, valid_from) VALUES ('user', "
            "'lives_in', 'Nantes', '2026-02-01')",
        ),
        (
            "INSERT INTO triples(subject, predicate, object, valid_from) VALUES ('user', "
            "'works_at', 'Acme', '2025-01-01')",
        ),
        # canonical: the unique index gone and two current rows in one slot.
        ("DROP INDEX idx_canonical_current",),
        (
            "INSERT INTO canonical_facts(owner_id, category, name, body, source, version, valid_from) "
            "VALUES ('default', 'identity', 'name', 'Dana', 'user', 1, '2026-01-01T10:00:00')",
        ),
        (
            "INSERT INTO canonical_facts(owner_id, category, name, body, source, version, valid_from) "
            "VALUES ('default', 'identity', 'name', 'Dana R.', 'user', 2, '2026-05-01T10:00:00')",
        ),
        # an auto lineage whose source row was closed.
        (
            "UPDATE working_memory SET valid_until = '2026-06-01T09:00:00' WHERE id = ?",
            (closed_source,),
        ),
        (
            "INSERT INTO canonical_facts(owner_id, category, name, body, source, version, valid_from) "
            "VALUES ('default', 'preference', 'garden', 'raised beds', ?, 1, '2026-03-01T08:00:00')",
            (f"auto:{closed_source}",),
        ),
    )
    return {"missing": missing, "outdated": outdated, "closed_source": closed_source}


def test_clean_sample_has_no_findings_and_nothing_to_change(cli):
    dry = run(cli, "--dry-run")
    assert dry["status"] == "dry-run" and codes(dry) == set() and dry["changes"] == {}
    real = run(cli)
    assert real["status"] == "ok", real["error"]
    assert codes(real) == set() and real["changes"] == {}
    assert real["stats"]["integrity_check"] == "ok"
    # The sample has no sqlite_stat1: creating it would change the schema beside the agent.
    assert real["stats"]["maintenance"]["optimize"] == repairs.SKIPPED_WITHOUT_STATISTICS
    assert set(real["stats"]["maintenance"]["fts_merge_steps"]) >= {"fts_working", "fts_episodes"}


REPAIRS = {
    "fts_indexes_rebuilt": 1,
    "fts_entries_added": 1,
    "fts_entries_removed": 1,
    "fts_entries_reindexed": 1,
    "canonical_duplicates_closed": 1,
    "triples_closed": 2,
    "auto_lineages_closed": 1,
}
REPAIR_FINDINGS = {
    "fts-working-missing",
    "fts-working-stale",
    "fts-working-outdated",
    "fts-episodes-inconsistent",
    "triple-overlapping-open",
    "canonical-duplicate-current",
    "auto-lineage-source-closed",
}


@pytest.mark.heavy
@pytest.mark.guard
def test_repairable_damage_is_found_repaired_and_doctor_is_clean(sample, cli):
    db = sample.db_path
    ids = damage_repairable(db)
    before = row_counts(db)
    assert not fts_consistent(db, "fts_episodes")

    dry = run(cli, "--dry-run")
    assert dry["changes"] == REPAIRS
    assert codes(dry) == REPAIR_FINDINGS

    real = run(cli)
    assert real["status"] == "ok", real["error"]
    assert real["stats"]["guard"]["verdict"] == "ok"  # the repairs keep recall: accepted
    assert real["changes"] == REPAIRS  # the dry run announced exactly what the real run did
    assert codes(real) == REPAIR_FINDINGS
    assert row_counts(db) == before  # nothing deleted, nothing added to the memory tables

    with connect(db) as connection:
        fts = dict(connection.execute("SELECT id, content FROM fts_working"))
        rows = dict(connection.execute("SELECT id, content FROM working_memory"))
        assert fts == rows and connection.execute("SELECT count(*) FROM fts_working").fetchone()[
            0
        ] == len(rows)
        triples = connection.execute(
            "SELECT object, valid_until FROM triples WHERE predicate = 'lives_in' ORDER BY valid_from"
        ).fetchall()
        assert triples == [("Lyon", "2025-06-01"), ("Paris", "2026-02-01"), ("Nantes", None)]
        assert connection.execute(
            "SELECT valid_until FROM triples WHERE predicate = 'works_at'"
        ).fetchone() == (None,)
        slot = connection.execute(
            "SELECT body, valid_until FROM canonical_facts WHERE category = 'identity' "
            "ORDER BY version"
        ).fetchall()
        assert slot == [("Dana", "2026-05-01T10:00:00"), ("Dana R.", None)]
        lineage = connection.execute(
            "SELECT valid_until FROM canonical_facts WHERE source = ?",
            (f"auto:{ids['closed_source']}",),
        ).fetchone()
        assert lineage == ("2026-06-01T09:00:00",)  # closed when its source row closed
    assert fts_consistent(db, "fts_episodes") and fts_consistent(db, "fts_working")

    second = run(cli)
    assert second["status"] == "ok" and second["changes"] == {} and codes(second) == set()

    report = doctor(sample, db)
    assert report["findings"] == []
    assert report["sqlite_health"]["quick_check"]["status"] == "ok"
    assert report["reference_contracts"]["canonical_facts"]["duplicate_current_slots"] == 0


def test_mnemosyne_opens_and_recalls_after_repair(sample, cli):
    """Mnemosyne re-creates its unique canonical index on start-up; that only works once duplicates are closed."""
    damage_repairable(sample.db_path)
    assert run(cli)["status"] == "ok"
    script = (
        "import sys, json\n"
        "from mnemosyne.core.memory import Mnemosyne\n"
        "memory = Mnemosyne(session_id='check', db_path=sys.argv[1])\n"
        "print(json.dumps(len(memory.recall('tomatoes', top_k=5))))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, str(sample.db_path)],
        env=sample.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert json.loads(completed.stdout.strip().splitlines()[-1]) > 0


def damage_for_review(db: Path) -> None:
    """Damage that is reported and never repaired (nothing may be removed or guessed)."""
    ids = working_ids(db)
    with sqlite3.connect(db) as connection:
        gist = connection.execute(
            "SELECT source FROM graph_edges WHERE source LIKE 'gist_%' LIMIT 1"
        ).fetchone()[0]
    execute(
        db,
        (
            "INSERT INTO graph_edges(source, target, edge_type, weight) VALUES (?, "
            "'fedcba9876543210', 'related_to', 0.5)",
            (ids[0],),
        ),
        (
            "DELETE FROM gists WHERE id = ?",
            (gist,),
        ),  # the gist node of an existing ctx edge disappears
        (
            "INSERT INTO graph_edges(source, target, edge_type, weight) VALUES ('mem_001', 'topic:garden', 'rel', 1)",
        ),
        (
            "INSERT INTO triples(subject, predicate, object, valid_from, valid_until) "
            "VALUES ('user', 'owned', 'bike', '2026-05-01', '2026-01-01')",
        ),
        (
            "UPDATE working_memory SET superseded_by = 'ffffffffffffffff', valid_until = '2026-01-01' WHERE id = ?",
            (ids[3],),
        ),
        (
            "UPDATE working_memory SET consolidated_at = '2026-01-01T00:00:00', "
            "consolidation_claimed_at = '2026-01-01T00:00:00' WHERE id = ?",
            (ids[4],),
        ),
        (
            "INSERT INTO canonical_facts(owner_id, category, name, body, source, version, valid_from) "
            "VALUES ('default', 'preference', 'tea', 'green', 'auto:aaaaaaaaaaaaaaaa', 1, '2026-11-01T00:00:00')",
        ),
        (
            "INSERT INTO canonical_facts(owner_id, category, name, body, source, confidence, version, valid_from) "
            "VALUES ('default', 'habit', 'walks', 'daily', 'inferred', 0.6, 1, '2024-01-01T00:00:00')",
        ),
        ("CREATE TABLE review_parent(id INTEGER PRIMARY KEY)",),
        (
            "CREATE TABLE review_child(id INTEGER PRIMARY KEY, parent INTEGER REFERENCES review_parent(id))",
        ),
        ("INSERT INTO review_child(id, parent) VALUES (1, 42)",),
    )


def test_review_findings_are_reported_and_nothing_is_removed(sample, cli):
    db = sample.db_path
    damage_for_review(db)
    before = row_counts(db)
    with connect(db) as connection:
        edges_before = connection.execute("SELECT * FROM graph_edges ORDER BY id").fetchall()
        triples_before = connection.execute("SELECT * FROM triples ORDER BY id").fetchall()
        facts_before = connection.execute("SELECT * FROM canonical_facts ORDER BY id").fetchall()
    result = run(cli)
    assert result["status"] == "ok", result["error"]
    assert codes(result) == {
        "graph-dangling-edges",
        "triple-inverted-validity",
        "working-superseded-by-missing",
        "consolidation-claim-orphaned",
        "auto-lineage-source-missing",
        "canonical-unconfirmed-old",
        "foreign-key-violation",
    }
    dangling = next(w for w in result["warnings"] if w["code"] == "graph-dangling-edges")
    assert ": 2 (edge ids" in dangling["message"]  # 'mem_001' -> 'topic:garden' is not judged
    assert result["stats"]["graph_opaque_edges"] == 1
    assert result["changes"] == {}
    assert row_counts(db) == before
    with connect(db) as connection:
        assert (
            connection.execute("SELECT * FROM graph_edges ORDER BY id").fetchall() == edges_before
        )
        assert connection.execute("SELECT * FROM triples ORDER BY id").fetchall() == triples_before
        assert (
            connection.execute("SELECT * FROM canonical_facts ORDER BY id").fetchall()
            == facts_before
        )


@pytest.mark.heavy
def test_rows_without_vectors_without_a_model_give_one_counted_warning(sample, cli):
    first = working_ids(sample.db_path)[0]
    execute(
        sample.db_path,
        (
            "INSERT INTO memory_embeddings(memory_id, embedding_json, model) "
            "VALUES (?, '[0.1, 0.2]', 'x')",
            (first,),
        ),
    )
    # No model, whatever this machine has installed (Mnemosyne's own switch).
    before = sample_snapshot(
        sample
    )  # looking for a model imports Mnemosyne's embeddings: still pure
    planned = run(cli, "--dry-run", env={"MNEMOSYNE_NO_EMBEDDINGS": "1"})
    assert_unchanged(before, sample_snapshot(sample))
    assert codes(planned) == {"vectors-missing-no-model"}
    result = run(cli, env={"MNEMOSYNE_NO_EMBEDDINGS": "1"})
    warnings = [w for w in result["warnings"] if w["code"].startswith("vectors")]
    assert [w["code"] for w in warnings] == ["vectors-missing-no-model"]
    assert warnings[0]["message"].startswith(
        f"live working rows without a vector: {len(working_ids(sample.db_path)) - 1} "
    )
    assert "vectors_reembedded" not in result["changes"]


@pytest.mark.heavy
def test_dry_run_is_pure_and_plans_what_the_real_run_does(sample, cli):
    damage_repairable(sample.db_path)
    damage_for_review(sample.db_path)
    before = sample_snapshot(sample)
    planned = run(cli, "--dry-run")
    assert_unchanged(before, sample_snapshot(sample))
    assert planned["status"] == "dry-run" and planned["changes"] == REPAIRS
    done = run(cli)
    assert done["changes"] == planned["changes"]
    assert codes(done) == codes(planned)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def test_damaged_database_gets_no_writes_and_the_restore_command(sample, cli):
    backups = sample.state_dir / "backups"
    write_checkpoint(backups, "daily-20261101T020000Z", "2026-11-01T02:00:00+00:00", True)
    write_checkpoint(backups, "daily-20261120T020000Z", "2026-11-20T02:00:00+00:00", True)
    write_checkpoint(backups, "daily-20261125T020000Z", "2026-11-25T02:00:00+00:00", False)
    write_checkpoint(backups, "failed/daily-20261128T020000Z", "2026-11-28T02:00:00+00:00", True)
    write_checkpoint(backups, ".tmp-daily-20261129T020000Z", "2026-11-29T02:00:00+00:00", True)
    damage_repairable(sample.db_path)  # repairable damage too: none of it may be touched now
    connection = sqlite3.connect(sample.db_path)
    connection.execute(
        "PRAGMA writable_schema=ON"
    )  # an index whose entries no longer match its table
    connection.execute(
        "UPDATE sqlite_master SET sql = 'CREATE INDEX idx_wm_source ON working_memory(content)' "
        "WHERE name = 'idx_wm_source'"
    )
    connection.commit()
    connection.close()
    wal = Path(f"{sample.db_path}-wal")
    before = (file_digest(sample.db_path), file_digest(wal))

    result = run(cli)
    assert result["exit_code"] == 1 and result["status"] == "failed"
    critical = [w for w in result["warnings"] if w["severity"] == "critical"]
    assert [w["code"] for w in critical] == ["integrity-check-failed"]
    assert critical[0]["fix"] == (
        f"mnemo-ops --db {sample.db_path} --state-dir {sample.state_dir} "
        "backup restore daily-20261120T020000Z"
    )
    assert "missing from index idx_wm_source" in critical[0]["message"]
    assert result["changes"] == {} and result["checkpoint"] is None
    assert (file_digest(sample.db_path), file_digest(wal)) == before


@pytest.mark.heavy
def test_vacuum_only_when_asked(cli):
    plain = run(cli)
    assert "vacuum" not in plain["stats"]["maintenance"]
    planned = run(cli, "--dry-run", "--vacuum")
    assert "vacuum" in planned["stats"]["maintenance_planned"]
    vacuumed = run(cli, "--vacuum")
    assert vacuumed["stats"]["maintenance"]["vacuum"] is True and vacuumed["changes"] == {}


@pytest.mark.heavy
def test_multi_valued_predicates_from_the_config_stay_open(sample, cli, tmp_path):
    execute(
        sample.db_path,
        (
            "INSERT INTO triples(subject, predicate, object, valid_from) VALUES ('user', "
            "'speaks', 'English', '2020-01-01')",
        ),
        (
            "INSERT INTO triples(subject, predicate, object, valid_from) VALUES ('user', "
            "'speaks', 'Spanish', '2024-01-01')",
        ),
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        "monthly_maintenance:\n  multi_valued_predicates: [speaks]\n", encoding="utf-8"
    )
    result = run(cli, env={"MNEMO_OPS_CONFIG": str(config)})
    assert result["status"] == "ok" and result["changes"] == {} and codes(result) == set()
    assert count_open_triples(sample.db_path) == 2
    without = run(cli)  # the same pair without the exemption: the older value is closed
    assert without["changes"] == {"triples_closed": 1}
    assert count_open_triples(sample.db_path) == 1


def count_open_triples(db: Path) -> int:
    with connect(db) as connection:
        return connection.execute(
            "SELECT count(*) FROM triples WHERE valid_until IS NULL"
        ).fetchone()[0]


def test_bad_option_is_a_usage_error(cli):
    completed = cli("--json", "run", JOB, "--option", "claim_stale_hours=soon")
    assert completed.returncode == 2
    assert "claim_stale_hours" in json.loads(completed.stdout)["error"]


def test_garbled_page_without_checkpoints_says_so_and_writes_nothing(sample, cli):
    with connect(sample.db_path) as connection:
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        root = connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'idx_wm_timestamp'"
        ).fetchone()[0]
    with sample.db_path.open(
        "r+b"
    ) as handle:  # an index page whose header claims to be a table leaf
        handle.seek((root - 1) * page_size)
        handle.write(b"\x0d\xff\xff\x7f\x7f")
    before = file_digest(sample.db_path)
    result = run(cli)
    assert result["exit_code"] == 1 and result["status"] == "failed"
    [critical] = [w for w in result["warnings"] if w["severity"] == "critical"]
    assert critical["code"] == "integrity-check-failed" and "fix" not in critical
    assert "no verified checkpoint was found" in critical["message"]
    assert file_digest(sample.db_path) == before
