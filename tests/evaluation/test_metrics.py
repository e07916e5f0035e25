"""Metrics against values worked out by hand (the arithmetic is in each test's comment)."""

import pytest

from mnemo_ops.evaluation.metrics import Retrieved, aggregate, per_category, score_case


def ranked(*items):
    """Retrieved memories from (id, content) pairs or bare ids."""
    return [Retrieved(*item) if isinstance(item, tuple) else Retrieved(item, "") for item in items]


def test_two_relevant_ids_at_ranks_two_and_four():
    # hits at 2 and 4: MRR 1/2; DCG = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068 = 1.06161;
    # IDCG (2 targets) = 1/log2(2) + 1/log2(3) = 1.63093; nDCG = 0.65092
    score = score_case("a", None, ["a", "c"], [], ranked("x", "a", "y", "c", "z"), k=10)
    assert score.hit_rank == 2
    assert (score.recall, score.recall_all, score.mrr) == (1.0, 1.0, 0.5)
    assert score.ndcg == pytest.approx(0.650921, abs=1e-6)


def test_cutoff_k_excludes_later_hits():
    score = score_case("b", None, ["c"], [], ranked("x", "a", "y", "c"), k=3)
    assert score.hit_rank is None and not score.passed
    assert score.values() == {"recall": 0.0, "recall_all": 0.0, "mrr": 0.0, "ndcg": 0.0}


def test_expect_is_a_case_insensitive_substring_and_credited_once():
    # "TOMATO" matches ranks 2 and 3, but one target gains once: DCG = 1/log2(3) = 0.63093, IDCG = 1
    results = ranked(
        ("m1", "nothing here"), ("m2", "Heirloom tomatoes in beds"), ("m3", "tomato soup")
    )
    score = score_case("c", None, [], ["TOMATO"], results, k=10)
    assert score.hit_rank == 2 and score.mrr == 0.5 and score.recall_all == 1.0
    assert score.ndcg == pytest.approx(0.630930, abs=1e-6)


def test_duplicate_ids_count_once_and_keep_the_first_rank():
    score = score_case("d", None, ["b"], [], ranked("a", "a", "b"), k=2)
    assert score.hit_rank == 2 and score.mrr == 0.5  # dedup: [a, b]; b at rank 2 is within k=2


def test_ids_and_expectations_together_recall_all_needs_every_target():
    # targets: id m1 and "lisbon"; k=2 keeps [m2 (lisbon), m3]; m1 at rank 3 is cut.
    # recall 1, recall_all 0, MRR 1; DCG = 1; IDCG = 1 + 1/log2(3) = 1.63093; nDCG = 0.61315
    results = ranked(("m2", "A trip to Lisbon"), ("m3", "other"), ("m1", "the answer"))
    score = score_case("e", None, ["m1"], ["lisbon"], results, k=2)
    assert (score.recall, score.recall_all, score.mrr) == (1.0, 0.0, 1.0)
    assert score.ndcg == pytest.approx(0.613147, abs=1e-6)
    assert score.targets == 2


def test_one_memory_matching_two_targets():
    # one memory holds both substrings: found both (recall_all 1); it gains 1 at rank 1, IDCG = 1.63093
    score = score_case("f", None, [], ["lisbon", "march"], ranked(("m", "Lisbon in March")), k=10)
    assert score.recall_all == 1.0 and score.ndcg == pytest.approx(1 / 1.630930, abs=1e-6)


def test_aggregate_and_per_category_are_means():
    first = score_case("a", "fact", ["a", "c"], [], ranked("x", "a", "y", "c", "z"), k=10)  # mrr .5
    second = score_case("b", "fact", ["c"], [], ranked("x", "a", "y", "c"), k=3)  # all 0
    third = score_case("c", "event", ["q"], [], ranked("q"), k=10)  # all 1
    overall = aggregate([first, second, third], 10)
    # recall (1+0+1)/3; recall_all (1+0+1)/3; MRR (.5+0+1)/3 = .5; nDCG (.650921+0+1)/3 = .550307
    assert overall == {
        "recall@10": 0.666667,
        "recall_all@10": 0.666667,
        "mrr@10": 0.5,
        "ndcg@10": 0.550307,
    }
    categories = per_category([first, second, third], 10)
    assert categories["fact"] == {
        "cases": 2,
        "recall@10": 0.5,
        "recall_all@10": 0.5,
        "mrr@10": 0.25,
        "ndcg@10": 0.32546,
    }
    assert categories["event"]["mrr@10"] == 1.0
    assert aggregate([], 5) == {"recall@5": 0.0, "recall_all@5": 0.0, "mrr@5": 0.0, "ndcg@5": 0.0}


def test_uncategorized_cases_are_grouped():
    score = score_case("a", None, ["a"], [], ranked("a"), k=1)
    assert list(per_category([score], 1)) == ["uncategorized"]
