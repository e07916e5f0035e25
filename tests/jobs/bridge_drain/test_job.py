"""bridge-drain and capture against the real sample home, through the real CLI (subprocesses)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.purity import assert_unchanged, sample_snapshot


def _queue(sample) -> Path:
    return sample.state_dir / "queue"


def _drop(sample, name: str, text: str | bytes) -> Path:
    """Deliver a file the Maildir way (tmp/ then rename into new/)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    temporary = _queue(sample) / "tmp" / name
    temporary.write_bytes(data)
    target = _queue(sample) / "new" / name
    os.rename(temporary, target)
    return target


def _drain(cli, *extra: str, env: dict | None = None) -> dict:
    completed = cli("--json", "run", "bridge-drain", *extra, env=env)
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


def _rows(sample, where: str = "1", bindings=()) -> list[dict]:
    connection = sqlite3.connect(sample.db_path)
    connection.row_factory = sqlite3.Row
    try:
        return [
            dict(row)
            for row in connection.execute(f"SELECT * FROM working_memory WHERE {where}", bindings)
        ]
    finally:
        connection.close()


def _bridge_rows(sample) -> list[dict]:
    return _rows(sample, "metadata_json LIKE '%\"_bridge\"%'")


def _names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_drains_the_sample_queue_through_mnemosyne(sample, cli):
    result = _drain(cli)
    assert result["status"] == "ok"
    assert result["changes"] == {
        "files_drained": 2,
        "items_ingested": 3,
        "items_merged": 0,
        "duplicates_skipped": 0,
        "items_rejected": 0,
        "files_rejected": 0,
    }
    assert _names(_queue(sample) / "new") == []
    assert _names(_queue(sample) / "cur") == ["browser-capture.json", "shell-notes.jsonl"]
    rows = {row["content"]: row for row in _bridge_rows(sample)}
    seats = rows["Dana prefers window seats on flights"]
    assert (seats["source"], seats["veracity"], seats["session_id"], seats["importance"]) == (
        "user",
        "stated",
        "capture",
        0.8,
    )
    shell = rows["Ran apt upgrade on the home server; PostgreSQL was held back"]
    assert shell["session_id"] == "bridge"  # the default session
    metadata = json.loads(seats["metadata_json"])["_bridge"]
    assert metadata["file"] == "shell-notes.jsonl" and metadata["position"] == 2
    assert metadata["key"].startswith("derived:")
    # Mnemosyne's own side rows: the FTS entry (trigger), the legacy memories row, the trust tier.
    connection = sqlite3.connect(sample.db_path)
    try:
        assert (
            connection.execute(
                "SELECT count(*) FROM fts_working WHERE fts_working MATCH 'window AND seats'"
            ).fetchone()[0]
            == 1
        )
        assert (
            connection.execute(
                "SELECT count(*) FROM memories WHERE id = ?", (seats["id"],)
            ).fetchone()[0]
            == 1
        )
    finally:
        connection.close()
    assert seats["trust_tier"] is not None


def test_dry_run_counts_without_changing_anything(sample, cli):
    _drop(sample, "bad.json", "{not json")
    _drop(sample, "mixed.jsonl", '{"content": "good one"}\n{"content": ""}\n')
    before = sample_snapshot(sample)
    dry = _drain(cli, "--dry-run")
    assert_unchanged(before, sample_snapshot(sample))
    assert dry["status"] == "dry-run"
    real = _drain(cli)
    assert dry["changes"] == real["changes"]
    assert real["changes"]["items_ingested"] == 4 and real["changes"]["files_rejected"] == 1
    assert real["changes"]["items_rejected"] == 1


@pytest.mark.heavy
def test_second_run_and_redelivery_are_no_ops(sample, cli):
    _drain(cli)
    count = len(_rows(sample))
    again = _drain(cli)
    assert again["changes"]["files_drained"] == 0
    # Re-deliver both files (same names, same bytes): every item is a duplicate, nothing is added.
    for name in ("browser-capture.json", "shell-notes.jsonl"):
        _drop(sample, name, (_queue(sample) / "cur" / name).read_bytes())
    redelivered = _drain(cli)
    assert redelivered["changes"]["duplicates_skipped"] == 3
    assert redelivered["changes"]["items_ingested"] == 0
    assert len(_rows(sample)) == count
    # cur/ keeps both copies: nothing is overwritten.
    assert len(_names(_queue(sample) / "cur")) == 4


def test_whole_file_rejections_go_to_failed_with_reasons(sample, cli, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text('{"content": "must never be read through a link"}')
    (_queue(sample) / "new" / "link.json").symlink_to(outside)
    _drop(sample, "latin1.json", '{"content": "café"}'.encode("latin-1"))
    _drop(sample, "broken.json", '{"content": "unterminated')
    _drop(sample, "scalar.json", "42")
    _drop(sample, "notes.txt", "hello")
    (_queue(sample) / "new" / "folder.json").mkdir()
    os.mkfifo(_queue(sample) / "new" / "pipe.jsonl")
    config = tmp_path / "config.yaml"
    config.write_text("bridge_drain:\n  max_file_bytes: 1000\n")
    _drop(sample, "huge.jsonl", ('{"content": "x"}\n' * 100))
    result = _drain(cli, env={"MNEMO_OPS_CONFIG": str(config)})
    assert result["changes"]["files_rejected"] == 8
    assert result["changes"]["files_drained"] == 2  # the sample's two files still go in
    failed = _queue(sample) / "failed"
    reasons = {
        name[: -len(".error.json")]: json.loads((failed / name).read_text())["reason"]
        for name in _names(failed)
        if name.endswith(".error.json")
    }
    assert "symlink" in reasons["link.json"]
    assert "not UTF-8" in reasons["latin1.json"]
    assert "not valid JSON" in reasons["broken.json"] and "line 1" in reasons["broken.json"]
    assert "object or an array" in reasons["scalar.json"]
    assert "unknown format" in reasons["notes.txt"]
    assert (
        "not a regular file" in reasons["folder.json"]
        and "not a regular file" in reasons["pipe.jsonl"]
    )
    assert "over the 1000-byte limit" in reasons["huge.jsonl"]
    # The link moved as a link; its target was neither read into the DB nor moved.
    assert (failed / "link.json").is_symlink() and outside.exists()
    assert not _rows(sample, "content LIKE '%never be read%'")
    assert all(
        os.stat(failed / name).st_mode & 0o077 == 0
        for name in _names(failed)
        if name.endswith(".error.json")
    )
    assert _names(_queue(sample) / "new") == []


def test_bad_items_are_rejected_alone_and_the_rest_goes_in(sample, cli):
    lines = [
        {
            "content": "Good item with an unknown field",
            "colour": "green",
            "memory_type": "preference",
            "metadata": {"tag": "a"},
            "created_at": "2026-11-29T10:00:00Z",
            "idempotency_key": "k-1",
        },
        {"content": "", "importance": 3},
        {"content": "bad veracity", "veracity": "certain"},
        "not an object",
        {"content": "clash", "tag": "x", "metadata": {"tag": "y"}},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n{oops\n"
    _drop(sample, "batch.jsonl", text)
    result = _drain(cli)
    assert result["changes"]["items_ingested"] == 4  # 1 here + 3 from the sample
    assert result["changes"]["items_rejected"] == 5
    assert result["status"] == "ok"
    assert any(
        "batch.jsonl item 3" in warning["message"] and "veracity" in warning["message"]
        for warning in result["warnings"]
    )
    (good,) = _rows(sample, "content = 'Good item with an unknown field'")
    metadata = json.loads(good["metadata_json"])
    assert metadata["colour"] == "green" and metadata["tag"] == "a"
    assert metadata["_bridge"] == {
        "key": "k-1",
        "file": "batch.jsonl",
        "position": 1,
        "created_at": "2026-11-29T10:00:00Z",
    }
    assert good["memory_type"] == "preference"
    failed = _queue(sample) / "failed"
    rejected = (failed / "batch.jsonl.rejected.jsonl").read_text().splitlines()
    assert len(rejected) == 5 and rejected[-1] == "{oops"
    report = json.loads((failed / "batch.jsonl.rejected.jsonl.error.json").read_text())
    positions = {entry["position"]: entry["reasons"] for entry in report["items"]}
    assert sorted(positions) == [2, 3, 4, 5, 6]
    assert len(positions[2]) == 2  # every problem of the item, not only the first
    assert "both at the top level" in positions[5][0]
    assert (_queue(sample) / "cur" / "batch.jsonl").exists()


@pytest.mark.heavy
def test_json_array_and_content_merged_by_mnemosyne(sample, cli):
    existing = _rows(sample, "session_id = (SELECT session_id FROM working_memory LIMIT 1)")[0]
    items = [
        {"content": "first of an array", "session_id": "s-array"},
        {"content": "first of an array", "session_id": "s-array"},  # same content, same session
        {"content": existing["content"], "session_id": existing["session_id"], "importance": 0.95},
    ]
    _drop(sample, "array.json", json.dumps(items))
    dry = _drain(cli, "--dry-run")
    result = _drain(cli)
    assert result["changes"] == dry["changes"]
    assert result["changes"]["items_merged"] == 2
    assert len(_rows(sample, "content = 'first of an array'")) == 1
    (refreshed,) = _rows(sample, "id = ?", (existing["id"],))
    assert refreshed["importance"] == 0.95  # Mnemosyne's dedup refresh: MAX(importance, new)
    # The merged items' keys are kept in state.db, so re-delivery stays a no-op.
    _drop(sample, "array.json", json.dumps(items))
    again = _drain(cli)
    assert again["changes"]["duplicates_skipped"] == 3 and again["changes"]["items_merged"] == 0


def test_write_filter_rejections_are_reported_not_lost(sample, cli):
    _drop(
        sample,
        "noise.jsonl",
        '{"content": "heartbeat tick from the cron box"}\n{"content": "keep me"}\n',
    )
    env = {"MNEMOSYNE_IGNORE_PATTERNS": "^heartbeat"}
    dry = _drain(cli, "--dry-run", env=env)
    result = _drain(cli, env=env)
    assert dry["changes"] == result["changes"]
    assert result["changes"]["items_rejected"] == 1
    assert not _rows(sample, "content LIKE 'heartbeat%'")
    assert _rows(sample, "content = 'keep me'")
    report = json.loads(
        (_queue(sample) / "failed" / "noise.jsonl.rejected.jsonl.error.json").read_text()
    )
    assert "write filter" in report["items"][0]["reasons"][0]


def test_refuses_a_symlinked_spool_folder(sample, cli, tmp_path):
    new = _queue(sample) / "new"
    elsewhere = tmp_path / "elsewhere"
    new.rename(elsewhere)
    new.symlink_to(elsewhere)
    result = _drain(cli)
    assert result["status"] == "failed" and "symlink" in result["error"]
    assert _names(elsewhere) == ["browser-capture.json", "shell-notes.jsonl"]


def test_capture_then_drain(sample, cli):
    queued = cli(
        "--json",
        "capture",
        "Dana's passport expires in March",
        "--source",
        "user",
        "--veracity",
        "stated",
        "--importance",
        "0.9",
        "--session",
        "s-cap",
    )
    assert queued.returncode == 0, queued.stderr
    path = Path(json.loads(queued.stdout)["queued"])
    assert path.parent == _queue(sample) / "new" and os.stat(path).st_mode & 0o077 == 0
    piped = cli("capture", "-", "--key", "my-key", input_text="from a pipe\n")
    assert piped.returncode == 0, piped.stderr
    invalid = cli("--json", "capture", "x", "--veracity", "sure")
    assert invalid.returncode == 2 and "veracity" in json.loads(invalid.stdout)["error"]
    assert (
        len(_names(_queue(sample) / "new")) == 4
    )  # the sample's two plus ours; nothing for the bad one
    result = _drain(cli)
    assert result["changes"]["items_ingested"] == 5
    (row,) = _rows(sample, "content = ?", ("Dana's passport expires in March",))
    assert (row["source"], row["veracity"], row["session_id"], row["importance"]) == (
        "user",
        "stated",
        "s-cap",
        0.9,
    )
    (piped_row,) = _rows(sample, "content = 'from a pipe'")
    assert json.loads(piped_row["metadata_json"])["_bridge"]["key"] == "my-key"


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("importance", "2", "from 0 to 1"),
        ("session", " ", "must not be empty"),
    ],
)
def test_capture_rejects_bad_fields(cli, field, value, message):
    completed = cli("capture", "some text", f"--{field}", value)
    assert completed.returncode == 2 and message in completed.stderr


def test_kill_inside_remember_is_repaired(sample, cli):
    """The state a kill between remember's two commits leaves: the working row with our key, no legacy row."""
    from mnemo_ops.jobs.bridge_drain.items import parse_file

    name, data = "half.jsonl", '{"content": "written by BEAM only", "session_id": "s-half"}\n'
    (item,) = parse_file(name, data.encode()).items
    script = (
        "import json, sys; from pathlib import Path; from mnemosyne.core.beam import BeamMemory; "
        "BeamMemory(session_id='s-half', db_path=Path(sys.argv[1])).remember("
        "'written by BEAM only', source='bridge', metadata=json.loads(sys.argv[2]))"
    )
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-c", script, str(sample.db_path), json.dumps(item.row_metadata(name))],
        env=sample.environ(),
        check=True,
    )
    (row,) = _rows(sample, "content = 'written by BEAM only'")
    connection = sqlite3.connect(sample.db_path)
    assert (
        connection.execute("SELECT count(*) FROM memories WHERE id = ?", (row["id"],)).fetchone()[0]
        == 0
    )
    _drop(sample, name, data)
    result = _drain(cli)
    assert (
        result["changes"]["duplicates_skipped"] == 1
        and result["changes"]["legacy_rows_repaired"] == 1
    )
    assert len(_rows(sample, "content = 'written by BEAM only'")) == 1
    legacy = connection.execute(
        "SELECT content, session_id FROM memories WHERE id = ?", (row["id"],)
    ).fetchall()
    connection.close()
    assert legacy == [("written by BEAM only", "s-half")]


def test_capture_creates_a_private_spool_and_honours_the_item_cap(sample, cli, tmp_path):
    state_dir = tmp_path / "fresh-state"
    config = tmp_path / "config.yaml"
    config.write_text("bridge_drain:\n  max_item_bytes: 10\n")
    queued = cli("--state-dir", str(state_dir), "capture", "short")
    assert queued.returncode == 0, queued.stderr
    for folder in (
        state_dir,
        state_dir / "queue",
        *(state_dir / "queue" / name for name in ("tmp", "new", "cur", "failed")),
    ):
        assert folder.is_dir() and os.stat(folder).st_mode & 0o077 == 0, folder
    too_long = cli(
        "--config", str(config), "--state-dir", str(state_dir), "capture", "eleven bytes"
    )
    assert too_long.returncode == 2 and "over the 10-byte limit" in too_long.stderr
    assert len(_names(state_dir / "queue" / "new")) == 1
    # The drain applies the same cap from the config: each sample item is longer, each rejected alone.
    result = _drain(cli, "--dry-run", env={"MNEMO_OPS_CONFIG": str(config)})
    assert result["changes"]["items_rejected"] == 3 and result["changes"]["files_drained"] == 2


def _doctor_findings(sample) -> list:
    import subprocess
    import sys

    mnemosyne = str(Path(sys.executable).with_name("mnemosyne"))
    completed = subprocess.run(
        [mnemosyne, "doctor", "--db", str(sample.db_path), "--format", "json"],
        env=sample.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)["findings"]


def test_after_a_drain_mnemosyne_doctor_is_clean_recall_finds_items_and_insert_triggers_fire(
    sample, cli
):
    # An AFTER INSERT trigger of our own stands in for the canonical promotion trigger: rows written
    # through remember are real INSERTs, so such triggers see every drained row.
    connection = sqlite3.connect(sample.db_path)
    with connection:
        connection.execute("CREATE TABLE test_inserted (id TEXT)")
        connection.execute(
            "CREATE TRIGGER test_after_insert AFTER INSERT ON working_memory "
            "BEGIN INSERT INTO test_inserted VALUES (new.id); END"
        )
    connection.close()
    findings_before = _doctor_findings(sample)
    _drain(cli)
    assert _doctor_findings(sample) == findings_before
    connection = sqlite3.connect(sample.db_path)
    fired = {row[0] for row in connection.execute("SELECT id FROM test_inserted")}
    connection.close()
    assert fired == {row["id"] for row in _bridge_rows(sample)} and len(fired) == 3
    import subprocess
    import sys

    script = (
        "import sys; from pathlib import Path; from mnemosyne.core.memory import Mnemosyne; "
        "hits = Mnemosyne(session_id='capture', db_path=Path(sys.argv[1])).recall('window seats flights'); "
        "print(any('window seats' in hit['content'] for hit in hits))"
    )
    recalled = subprocess.run(
        [sys.executable, "-c", script, str(sample.db_path)],
        env=sample.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recalled.stdout.strip().splitlines()[-1] == "True", recalled.stderr


def test_no_queue_folder_is_nothing_to_do(sample, cli):
    (sample.state_dir / "queue").rename(sample.state_dir / "queue-elsewhere")
    result = _drain(cli)
    assert result["status"] == "ok" and result["stats"]["files_pending"] == 0
    assert not (sample.state_dir / "queue").exists()
