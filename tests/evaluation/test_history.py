"""eval_history in a real state.db: rows appended, read back newest first."""

import pytest

from mnemo_ops.core import state
from mnemo_ops.evaluation import history


def test_record_and_read_back(tmp_path):
    db = state.open_state(tmp_path / "state.db")
    assert history.recent(db) == []
    for number, status in enumerate(("no-baseline", "ok", "regressed"), start=1):
        history.record(
            db,
            run_at=f"2026-11-0{number}T03:45:00+00:00",
            suite="s.jsonl",
            suite_sha256="ab",
            engine="mnemosyne",
            k=10,
            metrics={"recall@10": number / 4},
            regressions=number - 1,
            status=status,
        )
    rows = history.recent(db, limit=2)
    assert [row["status"] for row in rows] == ["regressed", "ok"]
    assert rows[0]["metrics"] == {"recall@10": 0.75} and rows[0]["regressions"] == 2
    with pytest.raises(ValueError):
        history.record(
            db,
            run_at="x",
            suite="s",
            suite_sha256="ab",
            engine="e",
            k=1,
            metrics={},
            regressions=0,
            status="great",
        )
    db.close()


def test_misses_are_recorded_and_an_older_table_gains_the_column(tmp_path):
    db = state.open_state(tmp_path / "state.db")
    # A table from before misses_json.
    db["eval_history"].create(
        {
            "id": int,
            "run_at": str,
            "suite": str,
            "suite_sha256": str,
            "engine": str,
            "k": int,
            "metrics_json": str,
            "regressions": int,
            "status": str,
        },
        pk="id",
    )
    misses = {"fact": {"cases": 4, "missed": 1, "examples": ["garden-crop"]}}
    history.record(
        db,
        run_at="2026-11-01T03:45:00+00:00",
        suite="s.jsonl",
        suite_sha256="ab",
        engine="mnemosyne",
        k=10,
        metrics={},
        regressions=0,
        status="ok",
        misses=misses,
    )
    assert "misses_json" in db["eval_history"].columns_dict
    assert history.recent(db)[0]["misses"] == misses
    db.close()
