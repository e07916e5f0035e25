"""NREM and REM on a small home written by Mnemosyne: bounded summaries with derives edges that agree
with summary_of, sources untouched, extends edges from spreading activation, the model path through
the real llm call (answers in the rows, a failing model leaving the cluster for the next night, private
rows never sent to a remote model), dry-run exactness, and determinism for a fixed night."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from freezegun import freeze_time

from mnemo_ops import database
from mnemo_ops.jobs import run_job
from mnemo_ops.jobs.evening_batch.sleep import clusters, extractive, nrem, rem
from mnemo_ops.models.answers import MalformedAnswer
from mnemo_ops.settings.sections import SleepOptions
from tests.conftest import copy_sample
from tests.jobs.evening_batch.sleep.conftest import query, settings_for
from tests.jobs.evening_batch.sleep.dreams import (
    BRIDGE,
    GARDEN,
    dream_spec,
    link_chains,
    run_night,
    set_scope,
)
from tests.models.plugin import calls, registered_test_models
from tests.purity import assert_unchanged, sample_snapshot

__all__ = ["registered_test_models"]  # the fixture, used by name below

SUMMARY_ANSWER = "[test model] Dana and Henrik repair girder 7 of the Halden bridge."
JUDGEMENT = {"novelty": 4, "plausibility": 4, "usefulness": 5}


@pytest.fixture(scope="session")
def dream_template(tmp_path_factory):
    """The NREM/REM home (``dreams.dream_spec``), written once by the real Mnemosyne API."""
    from tests.jobs.evening_batch.sleep.homes import build

    layout, ids = build(tmp_path_factory.mktemp("dream-template") / "home", dream_spec())
    link_chains(layout.db_path, ids)
    return layout, ids


@pytest.fixture
def dream(dream_template, tmp_path):
    """A private copy of the NREM/REM home and its ids by key."""
    layout, ids = dream_template
    return copy_sample(layout, tmp_path / "dream"), ids


def _working(db_path) -> dict[str, tuple]:
    return {row[0]: row for row in query(db_path, "SELECT * FROM working_memory ORDER BY id")}


def _summaries(db_path) -> list[dict]:
    connection = database.open_memory_db(db_path, readonly=True)
    try:
        return database.fetch_dicts(
            connection,
            "SELECT * FROM episodic_memory WHERE source = ? ORDER BY id",
            (nrem.SOURCE,),
        )
    finally:
        connection.close()


def _edges(db_path, edge_type: str) -> list[tuple]:
    return query(
        db_path,
        "SELECT source, target, weight FROM graph_edges WHERE edge_type = ? ORDER BY source, target",
        (edge_type,),
    )


def _group(ids: dict[str, str], name: str) -> set[str]:
    return {value for key, value in ids.items() if key.startswith(name + "-")}


def _model_config(tmp_path, monkeypatch, model: str, extra: str = "") -> str:
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            {
                "condense a person's memories": {"summary": SUMMARY_ANSWER},
                "judge whether two memories": JUDGEMENT,
            }
        )
    )
    monkeypatch.setenv("MNEMO_TEST_MODEL_ANSWERS", str(answers))
    return f"models:\n  model: {model}\n{extra}"


@pytest.mark.heavy
def test_a_night_fuses_each_cluster_once_and_never_touches_a_source(dream, tmp_path):
    layout, ids = dream
    before = _working(layout.db_path)
    settings = settings_for(layout, tmp_path)
    night = run_night(settings)
    assert night.status == "ok", night.error
    assert night.changes["summaries_fused"] == 2
    summaries = _summaries(layout.db_path)
    derives = _edges(layout.db_path, "mnemo:derives")
    assert night.changes["derives_edges_created"] == len(derives) == len(BRIDGE) + len(GARDEN)
    sources = {}
    for row in summaries:
        members = set(row["summary_of"].split(","))
        sources[frozenset(members)] = row
        # The derives edges and summary_of agree, one edge per source.
        assert {target for source, target, _ in derives if source == row["id"]} == members
        texts = [before[i][1] for i in members]
        assert len(row["content"]) <= 600 and len(row["content"]) < sum(map(len, texts))
        # Whole sentences, verbatim: names, numbers and dates as the sources wrote them.
        assert all(sentence in " ".join(texts) for sentence in extractive.sentences(row["content"]))
        metadata = json.loads(row["metadata_json"])
        assert metadata["method"] == "extractive" and metadata["nrem"]["basis"] == "edges"
        assert row["tier"] == 3
        assert row["timestamp"] == max(before[i][3] for i in members)  # the newest source's
        assert row["importance"] == max(before[i][5] for i in members)
    assert set(sources) == {frozenset(_group(ids, "bridge")), frozenset(_group(ids, "garden"))}
    assert "14 April 2025" in sources[frozenset(_group(ids, "bridge"))]["content"]
    assert _working(layout.db_path) == before  # content, stamps, everything of every source

    # REM: the chain's ends, two or more hops apart, were judged; extends edges only, no text.
    extends = _edges(layout.db_path, "mnemo:extends")
    assert night.changes["extends_edges_created"] == len(extends)
    for source, target, weight in extends:
        assert source in before and target in before and 0.6 <= weight <= 1
    assert night.stats["sleep"]["rem"]["methods"] == ({"lexical": len(extends)} if extends else {})

    # Another run that night writes nothing; the next night never fuses a covered source again.
    again = run_night(settings)
    assert again.changes["summaries_fused"] == again.changes["extends_edges_created"] == 0
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        tomorrow = run_night(settings)
    assert tomorrow.changes["summaries_fused"] == 0
    assert _working(layout.db_path) == before


def test_without_edges_the_lexical_fallback_clusters(dream, tmp_path):
    layout, ids = dream
    connection = database.open_memory_db(layout.db_path)
    try:
        connection.execute("UPDATE graph_edges SET edge_type = 'ctx', source = 'x' || source")
    finally:
        connection.close()
    night = run_night(settings_for(layout, tmp_path))
    assert night.status == "ok", night.error
    stats = night.stats["sleep"]["nrem"]
    assert stats["basis"] == "lexical" and night.changes["summaries_fused"] >= 1
    for row in _summaries(layout.db_path):
        members = set(row["summary_of"].split(","))
        assert members <= _group(ids, "bridge") or members <= _group(ids, "garden")
        assert json.loads(row["metadata_json"])["nrem"]["basis"] == "lexical"


def test_the_dry_run_counts_what_the_night_then_writes_and_changes_nothing(dream, tmp_path):
    layout, _ids = dream
    settings = settings_for(layout, tmp_path)
    before = sample_snapshot(layout)
    dry = run_night(settings, dry_run=True)
    assert dry.status == "dry-run", dry.error
    assert_unchanged(before, sample_snapshot(layout))
    real = run_night(settings)
    for name in ("summaries_fused", "derives_edges_created", "extends_edges_created"):
        assert dry.changes[name] == real.changes[name], name
    assert real.changes["summaries_fused"] == 2


def test_the_test_models_answers_end_up_in_the_rows(
    dream, tmp_path, monkeypatch, registered_test_models
):
    layout, ids = dream
    set_scope(layout.db_path, list(ids.values()), "global")
    settings = settings_for(layout, tmp_path, _model_config(tmp_path, monkeypatch, "mnemo-test"))
    dry = run_night(settings, dry_run=True)
    assert calls(registered_test_models) == []  # a dry run never calls
    assert dry.stats["sleep"]["nrem"]["would_send_to_model"] == 2
    night = run_night(settings)
    assert night.status == "ok", night.error
    summaries = _summaries(layout.db_path)
    assert len(summaries) == 2
    for row in summaries:
        assert row["content"] == SUMMARY_ANSWER
        assert json.loads(row["metadata_json"])["method"] == "mnemo-test"
    prompts = [call["prompt"] for call in calls(registered_test_models)]
    summary_prompts = [p for p in prompts if '"summary"' in p]
    assert len(summary_prompts) == 2
    for prompt in summary_prompts:  # the members, and the relations between them
        assert "[m:" in prompt and "[r:1] " in prompt and "related_to" in prompt
    extends = _edges(layout.db_path, "mnemo:extends")
    assert extends and all(weight == round((4 + 4 + 5) / 3 / 5, 3) for *_, weight in extends)
    assert night.stats["model"]["tasks"]["summary"] == {"answered": 2}
    assert night.stats["model"]["tasks"]["judgement"]["answered"] == len(extends)


def test_a_failing_model_leaves_the_cluster_for_the_next_night(
    dream, tmp_path, monkeypatch, registered_test_models
):
    layout, ids = dream
    set_scope(layout.db_path, list(ids.values()), "global")
    failing = settings_for(
        layout, tmp_path, _model_config(tmp_path, monkeypatch, "mnemo-test-fail")
    )
    night = run_night(failing)
    assert night.status == "ok", night.error  # the night goes on
    assert night.changes["summaries_fused"] == 0 and _summaries(layout.db_path) == []
    assert night.stats["sleep"]["nrem"]["deferred"] == 2
    assert night.stats["model"]["tasks"]["summary"] == {"failed": 2}
    assert run_night(failing).changes["summaries_fused"] == 0  # not retried the same night
    working = settings_for(layout, tmp_path, _model_config(tmp_path, monkeypatch, "mnemo-test"))
    with freeze_time(datetime.now() + timedelta(days=1), tick=True):
        tomorrow = run_night(working)
    assert tomorrow.changes["summaries_fused"] == 2
    assert {row["content"] for row in _summaries(layout.db_path)} == {SUMMARY_ANSWER}


def test_private_rows_never_reach_a_remote_model(
    dream, tmp_path, monkeypatch, registered_test_models
):
    layout, ids = dream
    set_scope(layout.db_path, sorted(_group(ids, "garden")), "global")  # the bridge stays session
    settings = settings_for(layout, tmp_path, _model_config(tmp_path, monkeypatch, "mnemo-test"))
    night = run_night(settings)
    assert night.status == "ok", night.error
    sent = "\n".join(call["prompt"] for call in calls(registered_test_models))
    assert sent, "the global cluster went to the model: the test can see what was sent"
    for text in BRIDGE:
        assert text not in sent
    assert ids["bridge-1"] not in sent
    methods = {
        frozenset(row["summary_of"].split(",")): json.loads(row["metadata_json"])["method"]
        for row in _summaries(layout.db_path)
    }
    assert methods == {
        frozenset(_group(ids, "bridge")): "extractive",
        frozenset(_group(ids, "garden")): "mnemo-test",
    }
    assert night.stats["sleep"]["nrem"]["kept_from_model_private"] == 1


def test_a_summary_not_shorter_than_its_sources_is_rejected(dream, tmp_path):
    validate = nrem._validator(limit=600, total=50)
    with pytest.raises(MalformedAnswer):
        validate({"summary": "x" * 50}, frozenset())
    with pytest.raises(MalformedAnswer):
        nrem._validator(limit=40, total=500)({"summary": "y" * 41}, frozenset())
    assert validate({"summary": "short"}, frozenset()) == "short"
    # Every source one long sentence: no whole sentence fits in the limit, so nothing is written.
    assert extractive.summarise(["word " * 200 + "end.", "more " * 200 + "end."], 600) is None
    assert extractive.summarise(["One.", "Two."], 600) is None or len(
        extractive.summarise(["One.", "Two."], 600)
    ) < len("One.Two.")
    layout, _ids = dream
    night = run_night(settings_for(layout, tmp_path, "sleep:\n  max_summary_chars: 20\n"))
    assert night.changes["summaries_fused"] == 0 and night.stats["sleep"]["nrem"]["rejected"] == 2
    assert _summaries(layout.db_path) == []


def test_clusters_and_seeds_are_the_same_for_a_fixed_night():
    pool = [
        (f"w:{n:04d}", ("fact", "event", "preference")[n % 3], 0.5, 0.1 + n / 100)
        for n in range(60)
    ]
    options = SleepOptions()  # the defaults: 6 seeds, 2 per kind, noise 0.5, 4 hops, decay 0.4
    first = rem.draw_seeds(pool, "2026-03-01", options)
    assert first == rem.draw_seeds(list(reversed(pool)), "2026-03-01", options)
    assert len(first) == 6
    kinds = [dict((key, kind) for key, kind, *_ in pool)[key] for key in first]
    assert all(kinds.count(kind) <= 2 for kind in kinds)
    assert any(rem.draw_seeds(pool, f"2026-03-{day:02d}", options) != first for day in range(2, 6))

    graph = {
        "a": [("b", 1.0)],
        "b": [("a", 1.0), ("c", 0.5)],
        "c": [("b", 0.5), ("d", 1.0)],
        "d": [],
    }
    activation = rem.spread("a", lambda node: graph.get(node, []), "2026-03-01", options)
    assert activation == rem.spread("a", lambda node: graph.get(node, []), "2026-03-01", options)
    assert set(activation) == {"a", "b", "c", "d"} and activation["a"] == 1.0

    texts = {
        "w:1": "Halden bridge girder rust",
        "w:2": "girder rust on the Halden span",
        "w:3": "Halden girder bolts ordered",
        "w:4": "nothing in common here",
    }
    links = clusters.lexical_links(texts)
    assert links == clusters.lexical_links(dict(reversed(list(texts.items()))))
    parts = clusters.components(texts, links)
    assert ["w:1", "w:2", "w:3"] in parts and ["w:4"] in parts
    assert clusters.fingerprint(["w:2", "w:1"]) == clusters.fingerprint(["w:1", "w:2", "w:1"])


@pytest.mark.e2e
def test_a_guarded_night_on_the_aged_conversation_home(conversations, tmp_path):
    """The whole evening batch under the recall guard, after memory-maintain linked the home:
    bounded summaries are written, and recall is at or above its value before (the sources' own
    stamps are Mnemosyne's consolidation's here; the small home shows NREM never touches them)."""
    layout = conversations
    quick = settings_for(layout, tmp_path, "guard:\n  enabled: false\n")
    assert run_job(quick, "memory-maintain", show_progress=False).status == "ok"
    night = run_job(
        settings_for(layout, tmp_path, "guard:\n  probes: 80\n"),
        "evening-batch",
        show_progress=False,
    )
    assert night.status == "ok", night.error
    guard = night.stats["guard"]
    assert guard["verdict"] == "ok" and not guard["problems"], guard
    for name, value in guard["before"].items():
        assert guard["after"][name] >= value, (name, guard)
    fused = _summaries(layout.db_path)
    assert len(fused) == night.changes["summaries_fused"] > 0
    working = _working(layout.db_path)
    for row in fused:
        members = row["summary_of"].split(",")
        assert len(row["content"]) <= 600
        assert len(row["content"]) < sum(len(working[i][1]) for i in members)
        assert json.loads(row["metadata_json"])["nrem"]["basis"] == "edges"
    assert night.changes["extends_edges_created"] == len(_edges(layout.db_path, "mnemo:extends"))
