"""The extractor's patterns and the plan's rules, on statements made up here (no database)."""

from __future__ import annotations

import pytest

from mnemo_ops.jobs.self_reflection import extractor, plan
from mnemo_ops.jobs.self_reflection.prompting import parse_lessons
from mnemo_ops.jobs.self_reflection.sessions import Session, Turn
from mnemo_ops.models import MalformedAnswer


def session(*texts: str, session_id: str = "s1") -> Session:
    return Session(
        session_id,
        [
            Turn(
                f"m:{session_id}-{number}",
                session_id,
                text,
                f"2026-11-2{number % 10}T10:00:00",
                "memory",
                False,
            )
            for number, text in enumerate(texts)
        ],
    )


def found(*texts: str) -> dict[str, list[str]]:
    lessons, _ = extractor.extract([session(*texts)])
    result: dict[str, list[str]] = {}
    for lesson in lessons:
        result.setdefault(lesson.kind, []).append(lesson.body)
    return result


def test_preferences_in_the_first_and_third_person_and_refusals():
    result = found(
        "I prefer dark themes in every editor.",
        "Dana prefers email over phone calls for alerts",
        "I don't want my calendar shared with anyone.",
        "Please never send me reminders on weekends.",
        "We went to the market on Saturday.",
    )
    assert result["preference"] == [
        "The user prefers dark themes in every editor.",
        "The user prefers email over phone calls for alerts.",
        "The user does not want their calendar shared with anyone.",
        "Never send them reminders on weekends: the user asked not to.",
    ]


def test_a_procedure_needs_steps_and_a_confirmation():
    confirmed = found(
        "To rotate the logs: 1. stop the agent 2. move the files 3. start it", "It worked."
    )
    assert confirmed["procedure"] == [
        "To rotate the logs: 1) stop the agent; 2) move the files; 3) start it."
    ]
    lessons, report = extractor.extract([session("First stop it, then move it, then start it.")])
    assert lessons == [] and report.procedures_unconfirmed == 1


def test_a_failure_needs_its_fix():
    result = found(
        "The import failed with error: no such file or directory",
        "The problem was a missing mount; after mounting it works.",
    )
    assert result["failure"][0].startswith("The import failed with error")
    lessons, report = extractor.extract([session("The sync failed again with a timeout.")])
    assert lessons == [] and report.failures_without_fix == 1


def test_environment_quirks_need_a_version_path_or_setting_and_a_quirk_word():
    result = found(
        "ffmpeg 6.0 needs the -strict flag for this codec.",
        "The config lives in ~/.config/photo-tool/settings.toml",
        "We took tram 28 to the castle.",
        "Python 3.12 is out.",
    )
    assert len(result["environment"]) == 2


def test_merge_repeated_statements_and_a_newer_contradiction_wins_the_slot():
    first, _ = extractor.extract(
        [session("I prefer window seats on long flights.", session_id="a")]
    )
    again, _ = extractor.extract(
        [session("I prefer window seats on long flights.", session_id="b")]
    )
    merged = plan.merge(first + again, 85)
    assert len(merged) == 1 and merged[0].sessions == {"a", "b"} and merged[0].confirmations == 2
    newer, _ = extractor.extract(
        [session("I don't want window seats on long flights.", session_id="c")]
    )
    newer[0].newest = "2026-12-31T00:00:00"
    [winner] = plan.merge(first + newer, 85)
    assert winner.body.startswith("The user does not want")


def test_the_plan_reinforces_only_with_new_evidence_and_supersedes_on_a_changed_body():
    [lesson] = plan.merge(
        extractor.extract([session("I prefer window seats on long flights.")])[0], 85
    )
    stored = plan.Stored(
        "old", lesson.kind, lesson.slot, lesson.body, "2026-11-01", set(lesson.evidence)
    )
    same = plan.make_plan([lesson], [stored], {}, 85, "2026-W48", "now")
    assert same.unchanged == 1 and [a["op"] for a in same.actions] == ["canonical"]
    stored.evidence = {"m:elsewhere"}
    more = plan.make_plan([lesson], [stored], {}, 85, "2026-W48", "now")
    assert more.counts["lessons_reinforced"] == 1
    stored.body = "The user prefers aisle seats."
    changed = plan.make_plan(
        [lesson], [stored], {("lesson:preference", lesson.slot): stored.body}, 85, "2026-W48", "now"
    )
    assert changed.counts["lessons_superseded"] == 1 and changed.counts["canonical_updated"] == 1
    [store] = [a for a in changed.actions if a["op"] == "store"]
    assert store["closes"] == ["old"]


def test_a_lesson_that_only_seems_to_contradict_another_leaves_both():
    """Only the same slot with a different body closes a lesson; a lesson of another slot that
    reads like a contradiction (no deterministic check says so) is stored beside it."""
    [window] = plan.merge(
        extractor.extract([session("I prefer window seats on long flights.")])[0], 85
    )
    [night] = plan.merge(
        extractor.extract([session("I don't want night flights.", session_id="s2")])[0], 85
    )
    assert (window.kind, night.kind) == ("preference", "preference") and window.slot != night.slot
    stored = plan.Stored(
        "old", window.kind, window.slot, window.body, "2026-11-01", set(window.evidence)
    )
    both = plan.make_plan([night], [stored], {}, 85, "2026-W48", "now")
    assert both.counts["lessons_stored"] == 1 and both.counts["lessons_superseded"] == 0
    assert not [a for a in both.actions if a["op"] == "close" or a.get("closes")]


def test_two_live_rows_in_one_slot_are_repaired():
    rows = [
        plan.Stored("older", "preference", "x", "The user prefers x.", "2026-11-01", set()),
        plan.Stored("newer", "preference", "x", "The user prefers x.", "2026-11-02", set()),
    ]
    repaired = plan.make_plan(
        [], rows, {("lesson:preference", "x"): "The user prefers x."}, 85, "w", "now"
    )
    assert repaired.actions == [{"op": "close", "memory_id": "older", "superseded_by": "newer"}]


def test_a_model_answer_is_validated():
    sent = frozenset({"m:1", "h:2"})
    reflection = parse_lessons(
        {
            "went_well": ["the certificate renewal"],
            "lessons": [
                {
                    "kind": "Preferences",
                    "slot": "Window Seats",
                    "lesson": "The user wants window seats",
                    "evidence": ["m:1"],
                },
                {"kind": "gossip", "lesson": "x", "evidence": ["m:1"]},
                {"kind": "failure", "lesson": "cites nothing sent", "evidence": ["m:9"]},
            ],
        },
        sent,
    )
    assert [(entry["kind"], entry["slot"]) for entry in reflection.lessons] == [
        ("preference", "window-seats")
    ]
    assert reflection.went_well == ["the certificate renewal"]
    for bad in (
        {"no": "lessons"},
        [],
        {"lessons": [{"kind": "gossip", "lesson": "x", "evidence": ["m:1"]}]},
    ):
        with pytest.raises(MalformedAnswer):
            parse_lessons(bad, sent)
