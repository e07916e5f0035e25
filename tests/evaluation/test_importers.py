"""LoCoMo and LongMemEval importers on small files written here in those formats; the turns are
stored by the real Mnemosyne, and the imported suite then runs through the real eval."""

from __future__ import annotations

import json
import sqlite3

from tests.conftest import run_cli

LOCOMO = [
    {
        "sample_id": "conv-7",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {
                    "speaker": "Caroline",
                    "dia_id": "D1:1",
                    "text": "I went to the LGBTQ support group yesterday.",
                },
                {
                    "speaker": "Melanie",
                    "dia_id": "D1:2",
                    "text": "That sounds wonderful, how did it feel?",
                },
                {
                    "speaker": "Caroline",
                    "dia_id": "D1:3",
                    "text": "I am planning to study counseling psychology.",
                },
                {"speaker": "Melanie", "dia_id": "D1:4", "text": "lol that is great"},
            ],
            "session_2_date_time": "1:14 pm on 25 May, 2023",
            "session_2": [
                {
                    "speaker": "Melanie",
                    "dia_id": "D2:1",
                    "text": "I ran a charity race for mental health on Saturday.",
                    "img_url": ["https://example.invalid/race.jpg"],
                    "blip_caption": "a photo of runners at a finish line",
                },
                {
                    "speaker": "Caroline",
                    "dia_id": "D2:2",
                    "text": "Amazing! Did you paint anything new lately?",
                },
                {
                    "speaker": "Melanie",
                    "dia_id": "D2:3",
                    "text": "Yes, a sunset over the lake with my kids.",
                },
            ],
        },
        "qa": [
            {
                "question": "What did Caroline plan to study?",
                "answer": "counseling psychology",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "What did Melanie do for mental health and what did she paint?",
                "answer": "race; sunset",
                "evidence": ["D2:1; D2:3"],
                "category": 1,
            },
            {
                "question": "What did Caroline paint?",
                "adversarial_answer": "a sunset",
                "evidence": [],
                "category": 5,
            },
            {
                "question": "Who won the lottery?",
                "answer": "nobody",
                "evidence": ["D9:9"],
                "category": 3,
            },
            {
                "question": "Did Melanie laugh?",
                "answer": "yes",
                "evidence": ["D1:4"],
                "category": 4,
            },
        ],
    }
]

LONGMEMEVAL = [
    {
        "question_id": "q-car",
        "question_type": "single-session-user",
        "question": "What colour is the hatchback I bought?",
        "answer": "red",
        "haystack_session_ids": ["s-car", "s-food"],
        "haystack_sessions": [
            [
                {
                    "role": "user",
                    "content": "I just bought a red hatchback for commuting.",
                    "has_answer": True,
                },
                {"role": "assistant", "content": "Congratulations on the new hatchback!"},
            ],
            [
                {"role": "user", "content": "Give me a lentil soup recipe."},
                {"role": "assistant", "content": "Simmer red lentils with cumin and onion."},
            ],
        ],
        "answer_session_ids": ["s-car"],
    },
    {
        "question_id": "q-soup",
        "question_type": "single-session-assistant",
        "question": "Which spice was in the soup?",
        "answer": "cumin",
        "haystack_session_ids": ["s-food", "s-car"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "Give me a lentil soup recipe."},
                {"role": "assistant", "content": "Simmer red lentils with cumin and onion."},
            ],
            [
                {
                    "role": "user",
                    "content": "I just bought a red hatchback for commuting.",
                    "has_answer": True,
                },
                {"role": "assistant", "content": "Congratulations on the new hatchback!"},
            ],
        ],
        "answer_session_ids": ["s-food"],
    },
    {
        "question_id": "q-none",
        "question_type": "temporal-reasoning",
        "question": "When did I move?",
        "answer": "March",
        "haystack_session_ids": ["s-car"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I just bought a red hatchback for commuting."},
                {"role": "assistant", "content": "Congratulations on the new hatchback!"},
            ]
        ],
        "answer_session_ids": ["s-move"],
    },
]


def write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def rows(db_path, sql, *args):
    connection = sqlite3.connect(db_path)
    try:
        return connection.execute(sql, args).fetchall()
    finally:
        connection.close()


def test_locomo_import_stores_turns_and_maps_evidence(tmp_path):
    source = write_json(tmp_path / "locomo.json", LOCOMO)
    out = tmp_path / "out"
    out.mkdir()
    db_path, suite_path = out / "locomo.db", out / "locomo.jsonl"
    imported = run_cli(
        None,
        "--json",
        "eval",
        "import",
        "locomo",
        str(source),
        "--db",
        str(db_path),
        "--suite",
        str(suite_path),
        env={"MNEMOSYNE_IGNORE_PATTERNS": "^Melanie: lol"},
    )
    assert imported.returncode == 0, imported.stderr
    summary = json.loads(imported.stdout)
    assert (summary["turns"], summary["turns_stored"], summary["turns_filtered"]) == (7, 6, 1)
    assert summary["cases"] == 2
    assert summary["skipped"] == {
        "adversarial or without evidence": 1,
        "evidence not stored (unknown dia_id or filtered turn)": 2,
    }
    assert sorted(path.name for path in out.iterdir()) == [
        "locomo.db",
        "locomo.jsonl",
    ]  # no temp dir, no config

    stored = dict(
        rows(db_path, "SELECT json_extract(metadata_json, '$.dia_id'), id FROM working_memory")
    )
    sessions = {row[0] for row in rows(db_path, "SELECT session_id FROM working_memory")}
    assert sessions == {"conv-7-session_1", "conv-7-session_2"}
    content = dict(rows(db_path, "SELECT id, content FROM working_memory"))
    assert content[stored["D2:1"]].startswith("Melanie: I ran a charity race")
    assert "a photo of runners" in content[stored["D2:1"]]

    cases = [json.loads(line) for line in suite_path.read_text().splitlines()]
    assert [case["id"] for case in cases] == ["conv-7-q1", "conv-7-q2"]
    assert cases[0]["relevant"] == [stored["D1:3"]] and cases[0]["category"] == "single-hop"
    assert (
        cases[1]["relevant"] == [stored["D2:1"], stored["D2:3"]]
        and cases[1]["category"] == "multi-hop"
    )
    assert cases[0]["answer"] == "counseling psychology"

    # The imported pair is a ready eval: Mnemosyne's recall finds the evidence for the first question.
    # Plain recall, named: the default profile follows the Hermes home the process sees, and the
    # imported cases name no Hermes session for the plugin's prefetch to recall in.
    config = tmp_path / "plain.yaml"
    config.write_text("retrieval_eval:\n  profile: plain\n", encoding="utf-8")
    evaluated = run_cli(
        None,
        "--config",
        str(config),
        "--db",
        str(db_path),
        "--state-dir",
        str(tmp_path / "state"),
        "--json",
        "eval",
        "run",
        "--suite",
        str(suite_path),
        "--dry-run",
    )
    assert evaluated.returncode == 0, evaluated.stderr
    stats = json.loads(evaluated.stdout)["stats"]
    assert stats["cases"] == 2 and stats["metrics"]["recall@10"] > 0


def test_longmemeval_import_stores_shared_sessions_once(tmp_path):
    source = write_json(tmp_path / "lme.json", LONGMEMEVAL)
    db_path, suite_path = tmp_path / "lme.db", tmp_path / "lme.jsonl"
    imported = run_cli(
        None,
        "--json",
        "eval",
        "import",
        "longmemeval",
        str(source),
        "--db",
        str(db_path),
        "--suite",
        str(suite_path),
    )
    assert imported.returncode == 0, imported.stderr
    summary = json.loads(imported.stdout)
    assert (summary["sessions"], summary["turns"], summary["cases"]) == (2, 4, 2)
    assert summary["skipped"] == {"no answer session in the haystack": 1}
    assert rows(db_path, "SELECT count(*) FROM working_memory")[0][0] == 4
    by_turn = {
        (session, turn): memory_id
        for session, turn, memory_id in rows(
            db_path,
            "SELECT json_extract(metadata_json, '$.session'), json_extract(metadata_json, '$.turn'), id "
            "FROM working_memory",
        )
    }
    cases = {case["id"]: case for case in map(json.loads, suite_path.read_text().splitlines())}
    assert cases["q-car"]["relevant"] == [by_turn[("s-car", 0)]]  # the has_answer turn only
    # No turn flagged in the answer session: the whole session is the evidence.
    assert cases["q-soup"]["relevant"] == [by_turn[("s-food", 0)], by_turn[("s-food", 1)]]
    assert cases["q-car"]["category"] == "single-session-user"
    builtin = run_cli(
        None,
        "--db",
        str(db_path),
        "--state-dir",
        str(tmp_path / "state"),
        "--json",
        "eval",
        "run",
        "--engine",
        "builtin",
        "--suite",
        str(suite_path),
        "--dry-run",
    )
    assert json.loads(builtin.stdout)["stats"]["passed"] == 2


def test_import_refuses_existing_db_and_names_bad_fields(tmp_path):
    existing = tmp_path / "exists.db"
    existing.write_bytes(b"")
    source = write_json(tmp_path / "locomo.json", LOCOMO)
    refused = run_cli(
        None,
        "eval",
        "import",
        "locomo",
        str(source),
        "--db",
        str(existing),
        "--suite",
        str(tmp_path / "s.jsonl"),
    )
    assert refused.returncode == 2 and "already exists" in refused.stderr
    broken = json.loads(json.dumps(LOCOMO))
    del broken[0]["conversation"]["session_2"][1]["dia_id"]
    bad = write_json(tmp_path / "bad.json", broken)
    failed = run_cli(
        None,
        "eval",
        "import",
        "locomo",
        str(bad),
        "--db",
        str(tmp_path / "new.db"),
        "--suite",
        str(tmp_path / "s.jsonl"),
    )
    assert failed.returncode == 2
    assert f"{bad}: sample 1: session_2 turn 2: field 'dia_id'" in failed.stderr
    assert not (tmp_path / "new.db").exists() and not (tmp_path / "s.jsonl").exists()
    top_level = write_json(
        tmp_path / "flat.json", {**LOCOMO[0]["conversation"], "qa": LOCOMO[0]["qa"]}
    )
    flat = run_cli(
        None,
        "--json",
        "eval",
        "import",
        "locomo",
        str(top_level),
        "--db",
        str(tmp_path / "flat.db"),
        "--suite",
        str(tmp_path / "flat.jsonl"),
    )
    assert flat.returncode == 0, flat.stderr
    assert json.loads(flat.stdout)["turns"] == 7
