"""What a memory's text carries (`mnemo_ops.database.facts`): chatter, fact items, survivors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_ops.database import facts


@pytest.mark.parametrize(
    "text",
    [
        "[USER] haha that is funny, ok sounds good",
        "thanks a lot 🙂",
        "good morning!",
        "Hmm okay.",
        "👍👍",
        "",
    ],
)
def test_chatter_is_content_free(text):
    assert facts.is_chatter(text)
    assert not facts.carries_fact(text)


@pytest.mark.parametrize(
    ("text", "items"),
    [
        (
            "[USER] My aunt believed in volunteering, and used to help my family out",
            set(),
        ),
        ("[USER] Lena moved from Graz to Lyon in 2019.", {"name:graz", "name:lyon", "number:2019"}),
        ("We made pizza on Friday", {"date:friday"}),
        ("I really prefer tea to coffee", {"taste:prefer"}),
    ],
)
def test_fact_bearing_text_is_not_chatter_and_names_its_items(text, items):
    assert not facts.is_chatter(text)
    assert facts.carries_fact(text)
    assert items <= facts.fact_items(text)


def test_a_survivor_holds_every_item_and_nearly_every_content_word():
    text = "[USER] We made pizza with Marisol on Friday"
    others = [
        ("a", "[USER] We made pasta with Marisol on Friday"),  # a content word differs
        ("b", "[USER] We made pizza with Marisol"),  # the date is missing
        ("c", "[USER] We made pizza with Marisol on Friday, it was great"),
    ]
    assert facts.survivor(text, others) == "c"
    assert facts.survivor(text, others[:2]) is None


@given(st.text(max_size=200))
def test_the_classifier_never_raises_and_chatter_has_no_items_of_content(text):
    chatter = facts.is_chatter(text)
    assert chatter == (not facts.content_words(text))
    if chatter:
        assert not {item for item in facts.fact_items(text) if item.startswith("number:")}
