"""The sleep stages' arithmetic: prominence, utility, bands, the edge weight update, the entropy
trigger and the kind mapping, with property tests for bounds and monotonicity."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_ops.jobs.evening_batch.sleep import kinds, prominence
from mnemo_ops.jobs.evening_batch.sleep.edges import updated_weight
from mnemo_ops.jobs.evening_batch.sleep.night import night_of
from mnemo_ops.jobs.evening_batch.sleep.prominence import Retention
from mnemo_ops.jobs.evening_batch.sleep.triggers import in_quiet_hours, normalised_entropy

RATES = {"relationship": 0.998, "preference": 0.995, "fact": 0.99, "insight": 0.97, "event": 0.95}
unit = st.floats(min_value=0.0, max_value=1.0)
rate = st.sampled_from(sorted(RATES.values()))
ages = st.floats(min_value=0.0, max_value=5000.0)
counts = st.integers(min_value=0, max_value=1000)
days = st.none() | st.floats(min_value=0.0, max_value=5000.0)


@given(rate, ages, counts, days, unit, unit, st.booleans())
def test_prominence_stays_within_zero_and_one(
    rate, age, confirmations, since, importance, confidence, exempt
):
    value = prominence.prominence(
        rate, age, confirmations, since, importance, confidence, 1.0, exempt
    )
    assert 0.0 <= value <= 1.0


@given(rate, ages, ages, counts, days, unit, unit)
def test_prominence_never_rises_with_age(
    rate, age, more, confirmations, since, importance, confidence
):
    younger, older = sorted((age, more))
    assert (
        prominence.prominence(rate, older, confirmations, since, importance, confidence)
        <= prominence.prominence(rate, younger, confirmations, since, importance, confidence)
        + 1e-12
    )


@given(rate, ages, counts, counts, st.floats(min_value=0.0, max_value=100.0), unit, unit)
def test_confirmations_never_lower_prominence(rate, age, few, many, since, importance, confidence):
    few, many = sorted((few, many))
    assert prominence.prominence(rate, age, many, since, importance, confidence) >= (
        prominence.prominence(rate, age, few, since, importance, confidence) - 1e-12
    )


@given(rate, ages, counts, days, unit, unit)
def test_importance_and_confidence_never_lower_prominence(
    rate, age, confirmations, since, low, high
):
    low, high = sorted((low, high))
    base = prominence.prominence(rate, age, confirmations, since, low, low)
    assert prominence.prominence(rate, age, confirmations, since, high, low) >= base - 1e-12
    assert prominence.prominence(rate, age, confirmations, since, low, high) >= base - 1e-12


def test_the_formula_term_by_term():
    # A fresh memory inside the grace: the full age term.
    assert prominence.prominence(0.95, 0.5, 0, None, 0.5, 0.8) == pytest.approx(
        0.55 + 0.10 * 0.5 + 0.05 * 0.8
    )
    # Ten days: decay over nine (the first day is grace).
    assert prominence.prominence(0.95, 10, 0, None, 0.0, 0.0) == pytest.approx(0.55 * 0.95**9)
    # Confirmations: log2(1 + c) / log2(9), full at eight; the recency term only from two on.
    assert prominence.confirmation_term(8) == pytest.approx(1.0)
    assert prominence.confirmation_term(1) == pytest.approx(1 / math.log2(9))
    assert prominence.prominence(1.0, 0, 1, 0.0, 0, 0) == pytest.approx(0.55 + 0.20 / math.log2(9))
    assert prominence.prominence(1.0, 0, 2, 30.0, 0, 0) == pytest.approx(
        0.55 + 0.20 * math.log2(3) / math.log2(9) + 0.10 * math.exp(-1)
    )
    # Exempt memories keep the age term whatever their age.
    assert prominence.prominence(0.95, 900, 0, None, 0, 0, exempt=True) == pytest.approx(0.55)
    assert prominence.utility(0.2, 0) == pytest.approx(0.2 * math.log(2))
    assert prominence.utility(0.2, 3) == pytest.approx(0.2 * math.log(5))


def test_bands():
    assert prominence.band(0.5) == "active"
    assert prominence.band(0.4999) == "dormant"
    assert prominence.band(0.1) == "dormant"
    assert prominence.band(0.0999) == "archive"


def test_importance_of_at_least_0_6_is_never_an_archive_candidate():
    """0.10 * 0.6 + 0.05 * 0.8 (an unknown veracity) is already 0.1: such a memory never decays
    below the archive line, however old."""
    assert prominence.band(prominence.prominence(0.95, 10_000, 0, None, 0.6, 0.8)) == "dormant"


def test_the_sql_functions_compute_exactly_what_python_does():
    retention = Retention(RATES, grace_days=1.0)
    reference = datetime(2026, 5, 4)
    connection = sqlite3.connect(":memory:")
    prominence.register_functions(connection, retention, reference)
    rows = [
        ("event", (reference - timedelta(days=40)).isoformat(), 0, None, 0.3, 0.8, 0),
        (
            "fact",
            (reference - timedelta(days=3, hours=5)).isoformat(),
            3,
            "2026-05-01T10:00:00",
            0.9,
            1.0,
            0,
        ),
        ("preference", "not a date", 0, None, 0.5, 0.5, 0),
        ("event", (reference - timedelta(days=400)).isoformat(), 0, None, 0.1, 0.8, 1),
    ]
    for row in rows:
        sql = connection.execute("SELECT mnemo_prominence(?, ?, ?, ?, ?, ?, ?)", row).fetchone()[0]
        python = prominence.of_row(retention, reference, *row[:6], bool(row[6]))
        assert sql == python
        assert connection.execute("SELECT mnemo_band(?)", (sql,)).fetchone()[0] == prominence.band(
            sql
        )
    connection.close()


weights = st.none() | st.floats(min_value=-1.0, max_value=2.0)
floors = st.floats(min_value=0.0, max_value=1.0)


@given(weights, st.booleans(), unit, unit, unit, unit, floors)
def test_edge_weights_stay_in_floor_to_one_and_never_go_negative(
    weight, coactive, a, b, rate, alpha, floor
):
    after = updated_weight(weight, coactive, a, b, rate, alpha, floor)
    assert 0.0 <= floor <= after <= 1.0


@given(st.floats(min_value=0.0, max_value=1.0), unit, unit, unit, unit, floors)
def test_a_coactive_edge_never_ends_lower_than_an_idle_one(weight, a, b, rate, alpha, floor):
    assert updated_weight(weight, True, a, b, rate, alpha, floor) >= updated_weight(
        weight, False, a, b, rate, alpha, floor
    )


@given(st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.0, max_value=1.0), floors)
def test_the_update_is_monotonic_in_the_weight(first, second, floor):
    low, high = sorted((first, second))
    assert updated_weight(low, False, 0, 0, 0.1, 0.8, floor) <= updated_weight(
        high, False, 0, 0, 0.1, 0.8, floor
    )


def test_the_edge_update_term_by_term():
    assert updated_weight(0.5, True, 0.8, 0.5, 0.1, 0.8, 0.05) == pytest.approx((0.5 + 0.04) * 0.8)
    assert updated_weight(0.5, False, 0.8, 0.5, 0.1, 0.8, 0.05) == pytest.approx(0.4)
    assert updated_weight(0.99, True, 1, 1, 0.1, 0.8, 0.05) == pytest.approx(
        0.8
    )  # capped at 1 first
    assert updated_weight(0.05, False, 1, 1, 0.1, 0.8, 0.05) == 0.05  # at the floor: stays
    assert updated_weight(None, False, 1, 1, 0.1, 0.8, 0.05) == pytest.approx(0.8)
    # Nightly from 1.0 the floor of 0.05 is reached after 14 idle nights and never left.
    weight = 1.0
    for _ in range(14):
        weight = updated_weight(weight, False, 0, 0, 0.1, 0.8, 0.05)
    assert weight == 0.05


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=60))
def test_normalised_entropy_lies_in_zero_to_one(values):
    assert 0.0 <= normalised_entropy(values) <= 1.0


def test_normalised_entropy_is_one_for_equal_importance_and_low_when_one_dominates():
    assert normalised_entropy([0.5] * 30) == pytest.approx(1.0)
    assert normalised_entropy([1.0] + [0.001] * 29) < 0.2
    assert normalised_entropy([0.7]) == 0.0 and normalised_entropy([]) == 0.0


def test_quiet_hours_and_nights():
    assert in_quiet_hours(datetime(2026, 5, 4, 2, 0), (120, 300))
    assert in_quiet_hours(datetime(2026, 5, 4, 4, 59), (120, 300))
    assert not in_quiet_hours(datetime(2026, 5, 4, 5, 0), (120, 300))
    assert in_quiet_hours(datetime(2026, 5, 4, 23, 30), (23 * 60, 4 * 60))  # over midnight
    assert in_quiet_hours(datetime(2026, 5, 4, 3, 0), (23 * 60, 4 * 60))
    # 21:00 on the 3rd and 03:00 on the 4th are one night, measured at the midnight between them.
    evening, morning = night_of(datetime(2026, 5, 3, 21)), night_of(datetime(2026, 5, 4, 3))
    assert evening == morning and evening.key == "2026-05-03"
    assert evening.reference == datetime(2026, 5, 4)
    assert night_of(datetime(2026, 5, 4, 12, 1)).key == "2026-05-04"


@pytest.mark.parametrize(
    ("source", "memory_type", "veracity", "kind"),
    [
        ("preference", "context", "unknown", "preference"),
        ("relationship", None, None, "relationship"),
        ("reflection", "context", "inferred", "insight"),
        ("conversation", "relationship", "unknown", "relationship"),
        ("conversation", "decision", "unknown", "fact"),
        ("conversation", "error", "unknown", "insight"),
        ("conversation", "event", "unknown", "event"),
        ("user", "context", "stated", "fact"),
        ("conversation", "context", "stated", "fact"),
        ("conversation", "context", "unknown", "event"),
        ("tool", "unknown", "tool", "event"),
        (None, None, None, "event"),
    ],
)
def test_kinds_from_mnemosyne_columns(source, memory_type, veracity, kind):
    assert kinds.kind_of(source, memory_type, veracity) == kind


def test_chatter_is_an_event_unless_its_source_names_a_kind():
    assert kinds.kind_of("conversation", "fact", "unknown", text="[USER] hi there!") == "event"
    assert kinds.kind_of("user", "context", "stated", text="ok thanks haha") == "event"
    assert kinds.kind_of("preference", "fact", "unknown", text="hi there!") == "preference"
    assert kinds.kind_of("conversation", "fact", "unknown", text="Mira was born in 2019") == "fact"
    assert kinds.kind_of("conversation", "fact", "unknown", text=None) == "fact"


def test_chatter_is_judged_only_when_it_would_change_the_kind():
    judged = []

    def chatter(text):
        judged.append(text)
        return True

    assert kinds.kind_of("conversation", "context", "unknown", "hi", chatter=chatter) == "event"
    assert kinds.kind_of("conversation", "fact", "unknown", "hi", chatter=chatter) == "event"
    assert judged == ["hi"]


def test_confidence_and_identity():
    assert kinds.confidence_of("stated", None) == 1.0
    assert kinds.confidence_of("tool", '{"sample": true}') == 0.5
    assert kinds.confidence_of("tool", '{"confidence": 0.9}') == 0.9
    assert kinds.confidence_of("nonsense", "not json") == 0.8
    assert kinds.is_identity("identity", None)
    assert kinds.is_identity("surface_manual", json.dumps({"surface_kind": "identity"}))
    assert not kinds.is_identity("user", "{}")
    assert kinds.exemption(True, "identity", None, True) == "pinned"
    assert kinds.exemption(False, "user", None, True) == "lineage"
    assert kinds.exemption(False, "user", None, False) is None


def test_veracity_confidence_is_the_installed_mnemosynes_own_weights(tmp_path):
    """Read in a child process: importing Mnemosyne has side effects on the process's home."""
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from mnemosyne.core.veracity_consolidation import VERACITY_WEIGHTS as w; "
            "print(json.dumps(w))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={
            "HOME": str(tmp_path),
            "MNEMOSYNE_DATA_DIR": str(tmp_path / "data"),
            "PATH": "/usr/bin",
        },
    )
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == kinds.VERACITY_CONFIDENCE
