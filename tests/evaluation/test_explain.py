"""Why the agent did not remember: explanations on a real home, checked against the engine, the
plugin's own functions and memories made unreachable on purpose.

The home is the aged conversation home with its sessions made the plugin's own (``hermes_<s>``).
Where ``mnemosyne_hermes`` is installed (4.0 with mnemosyne-hermes) the plugin's prefetch is
explained; elsewhere the documented approximation, and the plugin-only assertions are skipped.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from devtools.samples.memory_rows import append_rows
from mnemo_ops.evaluation import metrics
from mnemo_ops.evaluation.engines import mnemosyne as engine_module
from mnemo_ops.evaluation.engines.base import Query
from mnemo_ops.evaluation.engines.mnemosyne import MnemosyneEngine
from mnemo_ops.evaluation.explain import (
    MISMATCH,
    REASONS,
    explain_question,
    explain_suite,
    session_of,
)
from mnemo_ops.evaluation.suite import load_suite
from mnemo_ops.settings import load_settings

REPO = Path(__file__).resolve().parents[2]
HAS_PLUGIN = (
    subprocess.run(
        [sys.executable, "-c", "import mnemosyne_hermes"], capture_output=True, timeout=120
    ).returncode
    == 0
)
needs_plugin = pytest.mark.skipif(
    not HAS_PLUGIN,
    reason="mnemosyne_hermes is not installed here (it needs Mnemosyne 4.0): the plugin's own "
    "rules are explained only where it is; the approximation is tested instead",
)


def settings_of(layout):
    """Settings for the home, as the CLI resolves them."""
    return load_settings(db=layout.db_path, state_dir=layout.state_dir, environ=layout.environ())


def suite_of(layout):
    """The home's own suite."""
    return load_suite(layout.state_dir / "eval" / "suite.jsonl")


def one_case_suite(layout, tmp_path, case, **fields) -> Path:
    """A suite of one case of the home's suite, with `fields` replacing its own."""
    data = {**case.to_dict(), **fields}
    data = {key: value for key, value in data.items() if value is not None}
    path = tmp_path / f"{case.id.replace(':', '-')}.jsonl"
    path.write_text(json.dumps(data) + "\n", encoding="utf-8")
    return path


def injected_case(layout):
    """A case of the home whose relevant memory the agent is given (its only target: its id)."""
    suite = suite_of(layout)
    explained = explain_suite(settings_of(layout), suite, [case.id for case in suite.cases[:12]])
    for case in explained.cases:
        by_id = [t for t in case.explanation.targets if t.kind == "id"]
        if by_id and by_id[0].reason == "injected":
            return case.case
    raise AssertionError("no case of the home is injected")


def write(layout, statement: str, *parameters) -> None:
    """Change the home's database as a user or a job would (a committed write, WAL checkpointed)."""
    connection = sqlite3.connect(layout.db_path)
    with connection:
        assert connection.execute(statement, parameters).rowcount == 1
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def add_rows(layout, session: str, contents: list[str], importance: float = 0.95) -> list[str]:
    """Rows the agent might have written just now in `session`; their ids."""
    now = datetime.now().isoformat()
    rows = [
        (f"{number:04d}feedfacecafe", content, "user", now, session, importance, "{}")
        + ("stated", "fact", None)
        for number, content in enumerate(contents)
    ]
    append_rows(layout.db_path, [(rows, [])])
    return [row[0] for row in rows]


def test_the_injected_rows_are_what_the_engines_hermes_profile_returns(agent_conversations):
    settings = settings_of(agent_conversations)
    suite = suite_of(agent_conversations)
    explained = explain_suite(settings, suite)
    engine = MnemosyneEngine.from_settings(settings, profile="hermes")
    queries = [Query(text=case.query, k=10, session=case.session) for case in suite.cases]
    ranked = engine.recall_many(queries)
    expected_profile = "hermes" if HAS_PLUGIN else "hermes-approximate"
    assert explained.run.profile_used == engine.profile_used == expected_profile
    assert explained.run.approximate is not HAS_PLUGIN
    assert not explained.mismatches
    for case, items in zip(explained.cases, ranked):
        engine_ids = [item.id for item in items]
        assert [str(item["id"]) for item in case.explanation.injected] == engine_ids, case.case.id
        by_line = sorted(
            (c for c in case.explanation.candidates if c.outcome == "injected"),
            key=lambda c: c.line,
        )
        assert [c.id for c in by_line] == engine_ids, case.case.id
        # The case's verdict is the eval's: found within k by the same rows.
        score = metrics.score_case(
            case.case.id, None, case.case.relevant, case.case.expect, items, 10
        )
        assert case.passed == score.passed, case.case.id
    # Not a comparison of empty lists: most cases are given their memory, some are not.
    assert len(explained.misses) < len(explained.cases) / 2
    assert explained.misses
    summary = explained.summary()
    assert sum(row["missed"] for row in summary.values()) == len(explained.misses)
    assert set(summary) == {case.category for case in suite.cases}


def test_a_closed_memory_is_reported_as_not_retrieved(agent_conversations, tmp_path):
    case = injected_case(agent_conversations)
    path = one_case_suite(agent_conversations, tmp_path, case, expect=None)
    settings = settings_of(agent_conversations)
    before = explain_suite(settings, load_suite(path)).cases[0]
    assert before.reason == "injected" and before.passed
    assert before.sentence().startswith("injected at line ")
    yesterday = (datetime.now() - timedelta(days=1)).isoformat()
    write(
        agent_conversations,
        "UPDATE working_memory SET valid_until = ? WHERE id = ?",
        yesterday,
        case.relevant[0],
    )
    after = explain_suite(settings, load_suite(path)).cases[0]
    assert not after.passed
    target = after.explanation.targets[0]
    assert (target.outcome, target.reason) == ("not-retrieved", "not-within-50")
    assert target.hint and "1 closed" in target.hint and case.relevant[0] in target.hint
    assert after.sentence().startswith(REASONS["not-within-50"])


def test_a_memory_moved_to_another_session_is_reported_as_not_retrieved(
    agent_conversations, tmp_path
):
    case = injected_case(agent_conversations)
    path = one_case_suite(agent_conversations, tmp_path, case, expect=None)
    write(
        agent_conversations,
        "UPDATE working_memory SET session_id = 'hermes_elsewhere', channel_id = "
        "'hermes_elsewhere' WHERE id = ?",
        case.relevant[0],
    )
    after = explain_suite(settings_of(agent_conversations), load_suite(path)).cases[0]
    target = after.explanation.targets[0]
    assert (target.outcome, target.reason) == ("not-retrieved", "not-within-50")
    assert "another session (hermes_elsewhere)" in target.hint
    assert after.explanation.recalled_in == case.session


def test_a_memory_outranked_by_five_others_is_ranked_out_with_its_rank(
    agent_conversations, tmp_path
):
    case = injected_case(agent_conversations)
    path = one_case_suite(agent_conversations, tmp_path, case, expect=None)
    settings = settings_of(agent_conversations)
    before = explain_suite(settings, load_suite(path)).cases[0].explanation.targets[0]
    # Six fresher, more important rows that share the question's distinctive words and not
    # each other's (so no dedup drops them).
    words = ["apricot", "bramble", "cobalt", "dormouse", "ember", "fjord", "gazebo", "hazel"]
    asked = [word for word in case.query.rstrip("?").split() if len(word) > 3]
    contents = [
        f"{' '.join(asked)} {words[n]} {words[(n + 1) % 8]}{n} quartz{n} velvet{n} zephyr{n}"
        for n in range(6)
    ]
    add_rows(agent_conversations, case.session, contents)
    after = explain_suite(settings, load_suite(path)).cases[0]
    target = after.explanation.targets[0]
    assert (target.outcome, target.reason) == ("ranked-out", "ranked-out")
    assert target.rank is not None and target.rank > 5 and target.line is None
    assert before.rank is not None and target.rank > before.rank
    assert f"rank {target.rank}" in target.detail
    assert not after.passed and not after.explanation.mismatch


@needs_plugin
def test_a_near_duplicate_is_reported_with_the_line_it_duplicates(agent_conversations, tmp_path):
    case = injected_case(agent_conversations)
    path = one_case_suite(agent_conversations, tmp_path, case, expect=None)
    connection = sqlite3.connect(agent_conversations.db_path)
    (content,) = connection.execute(
        "SELECT content FROM working_memory WHERE id = ?", (case.relevant[0],)
    ).fetchone()
    connection.close()
    # The same words, fresher and more important: it sorts first, and the plugin's dedup then
    # drops the expected row as its near-duplicate.
    (twin,) = add_rows(agent_conversations, case.session, [f"{content} Indeed."])
    after = explain_suite(settings_of(agent_conversations), load_suite(path)).cases[0]
    target = after.explanation.targets[0]
    assert (target.outcome, target.reason) == ("ranked-out", "near-duplicate")
    assert "near-duplicate of line 1" in target.detail and twin in target.detail
    assert after.explanation.injected[0]["id"] == twin
    assert not after.explanation.mismatch


@needs_plugin
def test_an_assistant_line_is_filtered_by_the_source_quality_rule(agent_conversations, tmp_path):
    case = injected_case(agent_conversations)
    path = one_case_suite(agent_conversations, tmp_path, case, expect=None)
    write(
        agent_conversations,
        "UPDATE working_memory SET content = '[ASSISTANT] ' || content WHERE id = ?",
        case.relevant[0],
    )
    after = explain_suite(settings_of(agent_conversations), load_suite(path)).cases[0]
    target = after.explanation.targets[0]
    assert (target.outcome, target.reason) == ("filtered", "source-quality")
    assert target.recall_rank is not None and "[ASSISTANT]" in target.detail
    assert not after.explanation.mismatch


@needs_plugin
def test_every_filtered_or_injected_candidate_agrees_with_the_plugins_own_functions(
    agent_conversations,
):
    explained = explain_suite(settings_of(agent_conversations), suite_of(agent_conversations))
    pairs = []
    for case in explained.cases:
        for candidate in case.explanation.candidates:
            if candidate.canonical:
                continue
            if candidate.reason in ("lexical-evidence", "injected"):
                pairs.append((case.explanation.recall_query, candidate.content, candidate.reason))
    reasons = {reason for _, _, reason in pairs}
    assert reasons == {"lexical-evidence", "injected"}
    # The plugin itself, in another process, judges the same texts.
    judged = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, mnemosyne_hermes as p\n"
            "pairs = json.load(sys.stdin)\n"
            "print(json.dumps([p._prefetch_has_distinctive_lexical_evidence(q, c) "
            "for q, c, _ in pairs]))",
        ],
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        timeout=120,
        env=agent_conversations.environ(),
    )
    assert judged.returncode == 0, judged.stderr
    verdicts = json.loads(judged.stdout.strip().splitlines()[-1])
    for (query, content, reason), passes in zip(pairs, verdicts):
        assert passes is (reason == "injected"), (query, content, reason)


def test_a_wrong_reproduction_is_caught_as_a_mismatch(agent_conversations, monkeypatch):
    """The check against the real prefetch can fail: with every filter switched off in the
    reproduction, a query whose recall holds rows the prefetch drops is reported."""
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(engine_module, "WORKER_MODULE", "tests.evaluation.wrong_reproduction")
    suite = suite_of(agent_conversations)
    explained = explain_suite(
        settings_of(agent_conversations), suite, [case.id for case in suite.cases[:12]]
    )
    assert explained.mismatches
    for case in explained.mismatches:
        note = next(n for n in case.explanation.notes if n["code"] == MISMATCH)
        assert "does not describe" in note["message"] or "the approximation" in note["message"]


def test_a_question_gives_every_candidate_its_score_parts(agent_conversations):
    case = injected_case(agent_conversations)
    session_key = case.session.removeprefix("hermes_")
    explained = explain_question(
        settings_of(agent_conversations),
        case.query,
        expect=[case.relevant[0], "no memory says this 7f1b"],
        session_key=session_key,
    )
    query = explained.explanation
    assert query.recalled_in == case.session == session_of(session_key)
    assert query.candidates and not query.mismatch
    for candidate in query.candidates:
        if not candidate.canonical:
            assert {"final", "keyword", "fts", "dense", "importance"} <= set(candidate.scores)
    # Mnemosyne's explain trace named the rows it kept: the score parts are its own.
    assert any(c.scores.get("from") == "explain" for c in query.candidates)
    found, absent = query.targets
    assert (found.kind, found.reason) == ("id", "injected")
    assert (absent.kind, absent.reason) == ("text", "not-within-50")
    assert absent.hint == "no memory contains this text"
    data = explained.to_dict()
    assert data["profile_used"] == ("hermes" if HAS_PLUGIN else "hermes-approximate")
    json.dumps(data)  # one JSON object


def test_without_the_plugin_the_approximation_is_explained_and_said(agent_conversations):
    if HAS_PLUGIN:
        # Where the plugin is installed, the config can still ask for the approximation.
        config = agent_conversations.directory / "config.yaml"
        config.write_text("retrieval_eval:\n  profile: hermes-approximate\n", encoding="utf-8")
        settings = load_settings(
            db=agent_conversations.db_path,
            state_dir=agent_conversations.state_dir,
            config=config,
            environ=agent_conversations.environ(),
        )
    else:
        settings = settings_of(agent_conversations)
    suite = suite_of(agent_conversations)
    explained = explain_suite(settings, suite, [case.id for case in suite.cases[:12]])
    assert explained.run.approximate and explained.run.profile_used == "hermes-approximate"
    assert any("approximation" in note for note in explained.run.notes())
    rules = {c.reason for case in explained.cases for c in case.explanation.candidates}
    assert rules <= {"injected", "ranked-out", "score-and-importance"}
    assert not explained.mismatches


@needs_plugin
def test_canonical_lines_are_explained_and_mapped_to_their_rows(agent_conversations, tmp_path):
    """After memory-maintain promotes the stated facts, the plugin appends canonical lines: the
    replay still matches the engine, and a canonical line answers for its lineage's row."""
    from tests.conftest import run_cli

    config = tmp_path / "config.yaml"
    config.write_text("guard:\n  enabled: false\n", encoding="utf-8")
    promoted = run_cli(
        agent_conversations,
        "--config",
        str(config),
        "run",
        "memory-maintain",
        "-o",
        "link=false",
        timeout=600,
    )
    assert promoted.returncode == 0, promoted.stderr
    settings = settings_of(agent_conversations)
    suite = suite_of(agent_conversations)
    explained = explain_suite(settings, suite)
    engine = MnemosyneEngine.from_settings(settings, profile="hermes")
    ranked = engine.recall_many([Query(c.query, 10, c.session) for c in suite.cases])
    assert not explained.mismatches
    for case, items in zip(explained.cases, ranked):
        assert [str(item["id"]) for item in case.explanation.injected] == [i.id for i in items]
    canonical = [
        (case, candidate)
        for case in explained.cases
        for candidate in case.explanation.candidates
        if candidate.canonical and candidate.outcome == "injected"
    ]
    assert canonical
    answered = [
        case
        for case, candidate in canonical
        if candidate.id in case.case.relevant and candidate.recall_rank is None
    ]
    assert answered and all(case.passed for case in answered)
