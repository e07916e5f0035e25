"""Known-item probes: deterministic, spread over sessions and sources, refreshed as memories go."""

from __future__ import annotations

import json
import sqlite3

from mnemo_ops import database
from mnemo_ops.core import state
from mnemo_ops.evaluation.metrics import Retrieved
from mnemo_ops.guard import probes
from mnemo_ops.guard.measure import Measurement, probe_rank
from mnemo_ops.guard.verdict import decide
from mnemo_ops.settings.sections import GuardOptions


def _refresh(layout, size, state_db=None):
    connection = database.open_memory_db(layout.db_path, readonly=True)
    try:
        return probes.refresh(connection, state_db, size)
    finally:
        connection.close()


def test_the_same_database_gives_the_same_probes_spread_over_every_session(conversations_template):
    first = _refresh(conversations_template, 60).probes
    second = _refresh(conversations_template, 60).probes
    assert first == second and len(first) == 60
    sessions = {probe.session_id for probe in first}
    assert len(sessions) == 6  # every session of the home is represented
    per_stratum = {}
    for probe in first:
        per_stratum[(probe.session_id, probe.source)] = (
            per_stratum.get((probe.session_id, probe.source), 0) + 1
        )
    assert max(per_stratum.values()) <= -(-60 // len(per_stratum))  # no stratum above its share
    assert all(len(probe.query_terms) == 3 and probe.answer_terms for probe in first)


def test_a_refresh_retires_probes_whose_memory_closed_and_fills_their_places(conversations):
    ledger = state.open_state(conversations.state_dir / "state.db")
    try:
        stored = _refresh(conversations, 40, ledger).probes
        closed = stored[0].memory_id
        connection = sqlite3.connect(conversations.db_path)
        with connection:
            connection.execute(
                "UPDATE working_memory SET valid_until = '2000-01-01T00:00:00' WHERE id = ?",
                (closed,),
            )
        connection.close()
        refreshed = _refresh(conversations, 40, ledger)
        assert refreshed.retired == [closed] and len(refreshed.added) == 1
        assert closed not in {probe.memory_id for probe in probes.stored(ledger)}
        assert len(probes.stored(ledger)) == 40
        kept = {probe.memory_id for probe in stored} - {closed}
        assert kept <= {probe.memory_id for probe in refreshed.probes}  # the others stay
    finally:
        ledger.close()


def test_an_item_answers_a_probe_by_its_id_or_by_holding_every_term_in_its_returned_text():
    probe = probes.Probe(
        "m1", "s", "conversation", ("porto", "ferry", "luggage"), ("tallinn", "visa")
    )
    assert probe.answered_by("m1", "")
    faithful = "Summary: the ferry from Porto; luggage; visa for Tallinn."
    assert probe.answered_by("summary-1", faithful)
    assert not probe.answered_by("summary-1", faithful.replace("Tallinn", ""))
    ranked = [Retrieved("x", "nothing"), Retrieved("summary-1", faithful)]
    assert probe_rank(probe, ranked, cutoff=5) == 2 and probe_rank(probe, ranked, cutoff=1) is None


def test_verdict_excuses_forgotten_probes_and_counts_newly_failing_ones():
    made = [probes.Probe(f"m{i}", "s", "c", ("a", "b", "c"), ("d",)) for i in range(10)]
    before = Measurement("plain", 10, {probe.memory_id: 1 for probe in made})
    tolerances = GuardOptions(recall_tolerance=0.01, mrr_tolerance=0.01, max_newly_failing=2)
    # m0 and m1 were archived on purpose; everything else still answered: accepted.
    after = Measurement("plain", 10, {**before.ranks, "m0": None, "m1": None})
    live = {probe.memory_id for probe in made} - {"m0", "m1"}
    accepted = decide(made, before, after, live, tolerances)
    assert accepted.accepted and len(accepted.forgotten) == 2 and not accepted.newly_failing
    # The same misses with the memories still live are a regression.
    refused = decide(made, before, after, {probe.memory_id for probe in made}, tolerances)
    assert not refused.accepted and any(
        "recall@10 fell from 1.000 to 0.800" in p for p in refused.problems
    )
    # A lower rank alone is caught by MRR.
    lower = Measurement("plain", 10, {probe.memory_id: 2 for probe in made})
    ranked = decide(made, before, lower, {probe.memory_id for probe in made}, tolerances)
    assert not ranked.accepted and any(p.startswith("probe mrr@10") for p in ranked.problems)


def test_a_refresh_reads_only_new_rows_for_strata_and_gives_what_a_full_scan_gives(
    conversations, tmp_path
):
    """The strata are kept in state.db with the highest rowid seen; a refresh after new sessions
    arrive finds them from the new rows alone, and picks the probes a full scan would pick."""
    import shutil

    from devtools.samples.realistic_memories import add_realistic_memories

    ledger_path = conversations.state_dir / "state.db"
    ledger = state.open_state(ledger_path)
    try:
        _refresh(conversations, 40, ledger)
        known = {
            tuple(key)
            for key in json.loads(
                next(ledger.query("SELECT strata FROM guard_probe_strata"))["strata"]
            )
        }
    finally:
        ledger.close()
    add_realistic_memories(conversations.db_path, 300, seed=31)
    full_path = tmp_path / "full-state.db"
    shutil.copyfile(ledger_path, full_path)
    full = state.open_state(full_path)
    full.execute("DELETE FROM guard_probe_strata")  # nothing known: a full scan
    full.conn.commit()
    ledger = state.open_state(ledger_path)
    try:
        incremental = _refresh(conversations, 40, ledger)
        scanned = _refresh(conversations, 40, full)
        now = {
            tuple(key)
            for key in json.loads(
                next(ledger.query("SELECT strata FROM guard_probe_strata"))["strata"]
            )
        }
    finally:
        ledger.close()
        full.close()
    assert now > known  # the new rows' sessions were found
    assert incremental.probes == scanned.probes
    assert incremental.added  # the new strata took places
