"""The topic clustering on its own: deterministic, near-identical labels merged, small topics dissolved."""

from __future__ import annotations

import random

from mnemo_ops import database
from mnemo_ops.jobs.evening_batch.topics.clustering import (
    MapOptions,
    TermExtractor,
    build_full,
    merge_near_identical,
)
from mnemo_ops.jobs.evening_batch.topics.memories import load_live_memories


def test_full_build_is_deterministic_whatever_the_input_order(sample):
    connection = database.open_memory_db(sample.db_path, readonly=True)
    memories = load_live_memories(connection)
    first, _ = build_full(memories, TermExtractor(connection), MapOptions())
    keys = list(memories)
    random.Random(3).shuffle(keys)
    shuffled = {key: memories[key] for key in keys}
    second, _ = build_full(shuffled, TermExtractor(connection), MapOptions())
    connection.close()
    assert first.assignments == second.assignments
    assert {
        label: (topic.aliases, topic.top_terms(6)) for label, topic in first.topics.items()
    } == {label: (topic.aliases, topic.top_terms(6)) for label, topic in second.topics.items()}
    assert all(topic.size >= MapOptions().min_topic_size for topic in first.topics.values())


def test_near_identical_terms_share_a_label_but_short_ones_do_not():
    from collections import Counter

    support = Counter({"tomato": 5, "tomatoes": 2, "photo": 3, "photos": 1, "tea": 4, "team": 4})
    label_of = merge_near_identical(support, support, 85)
    assert label_of["tomatoes"] == "tomato"  # the better supported spelling names the topic
    assert label_of["photos"] == "photo"
    assert label_of["tea"] == "tea" and label_of["team"] == "team"
