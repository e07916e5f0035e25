"""The extractive summary (NREM's fallback when no model is configured or may see the cluster).

It picks whole sentences from the sources, never rewrites one, so every name, number and date it
keeps is exactly as the sources wrote it. A sentence's salience is the number of the cluster's other
sources that hold its content terms (what the members have in common is what a summary is about),
plus a bonus for names and numbers (the details a person asks for). The best sentence of each source
is taken first, best sources first, then further sentences while they fit; a near-copy of a chosen
sentence is skipped. The result is at most `limit` characters and shorter than the sources together,
or None when no whole sentence fits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rapidfuzz import fuzz, utils

from mnemo_ops.jobs.evening_batch.sleep.clusters import content_terms

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
DETAIL = re.compile(r"\b(?:\d[\d.,:/-]*|[A-Z][a-z]+)\b")
NEAR_COPY = 90
SEPARATOR = " "


def sentences(text: str) -> list[str]:
    """`text` cut into sentences (whitespace inside each folded to single spaces)."""
    folded = " ".join((text or "").split())
    return [part.strip() for part in SENTENCE_END.split(folded) if part.strip()]


def _details(sentence: str) -> int:
    # Capitalised words that only start the sentence say nothing; names inside it do.
    found = DETAIL.findall(sentence)
    first = sentence.split(" ", 1)[0].strip(":,;")
    return sum(1 for word in found if word != first or word[0].isdigit())


def summarise(sources: Sequence[str], limit: int) -> str | None:
    """Whole sentences of `sources` (module docstring); None when nothing fits."""
    total = sum(len(text) for text in sources)
    budget = min(limit, total - 1)
    terms_of = [content_terms(text) for text in sources]
    scored: list[tuple[float, int, int, str]] = []
    for index, text in enumerate(sources):
        others = [terms for position, terms in enumerate(terms_of) if position != index]
        for order, sentence in enumerate(sentences(text)):
            words = content_terms(sentence)
            shared = sum(1 for word in words if any(word in terms for terms in others))
            score = shared + 0.5 * _details(sentence) + 0.1 * len(words)
            scored.append((score, index, order, sentence))
    chosen: list[tuple[int, int, str]] = []
    size = 0

    def fits(sentence: str) -> bool:
        extra = len(sentence) + (len(SEPARATOR) if chosen else 0)
        return size + extra <= budget

    def near_copy(sentence: str) -> bool:
        return any(
            fuzz.ratio(sentence, kept, processor=utils.default_process) >= NEAR_COPY
            for _, _, kept in chosen
        )

    ranked = sorted(scored, key=lambda item: (-item[0], item[1], item[2]))
    best_of_source: dict[int, tuple[float, int, int, str]] = {}
    for item in ranked:
        best_of_source.setdefault(item[1], item)
    first_pass = sorted(best_of_source.values(), key=lambda item: (-item[0], item[1]))
    for pool in (first_pass, ranked):
        for _score, index, order, sentence in pool:
            if (index, order, sentence) in chosen or not fits(sentence) or near_copy(sentence):
                continue
            chosen.append((index, order, sentence))
            size += len(sentence) + (len(SEPARATOR) if len(chosen) > 1 else 0)
    if not chosen:
        return None
    # In the sources' order, so the summary reads as they happened.
    return SEPARATOR.join(sentence for _, _, sentence in sorted(chosen))
