"""Ranking metrics at k: recall@k (any hit), recall_all@k, MRR@k and nDCG@k, per case and averaged.

A case's *targets* are its relevant memory ids and its expected substrings. A retrieved memory
matches an id target when its id is that id, and an expect target when its content contains the
substring (case-insensitive). Definitions (ranks are 1-based, counted after duplicate ids are
dropped, keeping the first occurrence; only the first k memories count):

- ``recall@k``: 1 when at least one target is matched within the first k, else 0.
- ``recall_all@k``: 1 when every target is matched within the first k, else 0.
- ``mrr@k``: 1 / rank of the first memory that matches any target, 0 when none does.
- ``ndcg@k``: binary gains. A memory gains 1 when it matches a target that no earlier memory
  matched (so five copies of the same fact do not count five times), discounted by
  1 / log2(rank + 1); divided by the ideal DCG, where the first min(T, k) ranks each gain 1
  (T = number of targets).

Ties are the engine's to break (engines order by score, then memory id), so the same input always
gives the same ranks; the metrics themselves are pure functions of the ranked list.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

METRIC_NAMES = ("recall", "recall_all", "mrr", "ndcg")
"""Base names; reported as ``<name>@<k>``."""


@dataclasses.dataclass(frozen=True)
class Retrieved:
    """One memory an engine returned, in rank order."""

    id: str
    content: str


@dataclasses.dataclass
class CaseScore:
    """The metrics of one case and what produced them."""

    case_id: str
    category: str | None
    k: int
    hit_rank: int | None
    targets: int
    recall: float
    recall_all: float
    mrr: float
    ndcg: float

    @property
    def passed(self) -> bool:
        """A case passes when at least one target was found within its k (recall@k = 1)."""
        return self.hit_rank is not None

    def values(self) -> dict[str, float]:
        """The four metrics by base name."""
        return {
            "recall": self.recall,
            "recall_all": self.recall_all,
            "mrr": self.mrr,
            "ndcg": self.ndcg,
        }


def matched_targets(memory: Retrieved, relevant: Sequence[str], expect: Sequence[str]) -> set[int]:
    """Indexes of the targets (relevant ids first, then expected substrings) that `memory` matches."""
    found = {index for index, memory_id in enumerate(relevant) if memory.id == memory_id}
    content = (memory.content or "").casefold()
    offset = len(relevant)
    found.update(offset + index for index, text in enumerate(expect) if text.casefold() in content)
    return found


def deduplicate(results: Iterable[Retrieved]) -> list[Retrieved]:
    """Drop repeated ids, keeping the first (best-ranked) occurrence."""
    seen: set[str] = set()
    unique = []
    for memory in results:
        if memory.id in seen:
            continue
        seen.add(memory.id)
        unique.append(memory)
    return unique


def score_case(
    case_id: str,
    category: str | None,
    relevant: Sequence[str],
    expect: Sequence[str],
    results: Iterable[Retrieved],
    k: int,
) -> CaseScore:
    """Score one ranked list against one case's targets at cutoff `k`."""
    relevant = list(dict.fromkeys(relevant))
    expect = list(dict.fromkeys(expect))
    total_targets = len(relevant) + len(expect)
    ranked = deduplicate(results)[:k]
    credited: set[int] = set()
    hit_rank = None
    dcg = 0.0
    for rank, memory in enumerate(ranked, start=1):
        matches = matched_targets(memory, relevant, expect)
        if matches and hit_rank is None:
            hit_rank = rank
        if matches - credited:
            dcg += 1.0 / math.log2(rank + 1)
        credited |= matches
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(total_targets, k) + 1))
    return CaseScore(
        case_id=case_id,
        category=category,
        k=k,
        hit_rank=hit_rank,
        targets=total_targets,
        recall=1.0 if hit_rank is not None else 0.0,
        recall_all=1.0 if total_targets and len(credited) == total_targets else 0.0,
        mrr=1.0 / hit_rank if hit_rank is not None else 0.0,
        ndcg=dcg / ideal if ideal else 0.0,
    )


def metric_key(name: str, k: int) -> str:
    """``recall`` at 10 -> ``recall@10``."""
    return f"{name}@{k}"


def aggregate(scores: Sequence[CaseScore], k: int) -> dict[str, float]:
    """Mean of each metric over `scores` (0.0 for an empty list), keyed ``<name>@<k>``.

    Values are rounded to 6 decimals so the same ranks always give byte-identical baselines.
    """
    result: dict[str, float] = {}
    for name in METRIC_NAMES:
        values = [getattr(score, name) for score in scores]
        result[metric_key(name, k)] = round(sum(values) / len(values), 6) if values else 0.0
    return result


def per_category(scores: Sequence[CaseScore], k: int) -> dict[str, dict[str, Any]]:
    """Metrics per category (cases without one under ``uncategorized``), with the case count."""
    groups: dict[str, list[CaseScore]] = {}
    for score in scores:
        groups.setdefault(score.category or "uncategorized", []).append(score)
    return {
        name: {"cases": len(group), **aggregate(group, k)} for name, group in sorted(groups.items())
    }
