"""Bounded work per orphan (issue 19): the FTS matches scored per row stay within the budget."""

import shutil

import apsw
import pytest

from devtools.samples.realistic_memories import add_realistic_memories
from mnemo_ops.foundation.clock import local_timestamp
from mnemo_ops.jobs.memory_maintain import orphans

BUDGET = 60


def test_terms_fit_the_budget_and_common_rows_get_a_bounded_scan(sample):
    add_realistic_memories(sample.db_path, 3000, seed=4)
    connection = apsw.Connection(str(sample.db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        probe = orphans.Matcher(connection, orphans.LinkOptions(), local_timestamp())
        rows = connection.execute("SELECT id, content FROM working_memory ORDER BY id").fetchall()
        probe.prime([content for _, content in rows])
        # A budget between the rows' rarest terms, so that both cases occur whatever the data.
        rarest = sorted(
            min(probe.vocabulary.document_frequency(terms).values())
            for terms in (probe.terms_for(content) for _, content in rows[:600])
            if terms
        )
        budget = rarest[len(rarest) // 2]
        matcher = orphans.Matcher(
            connection, orphans.LinkOptions(match_budget=budget), local_timestamp()
        )
        matcher.prime([content for _, content in rows])
        planned = scanned = 0
        for _, content in rows[:600]:
            terms, scan = matcher.plan_query(content)
            if not terms:
                continue
            frequencies = matcher.vocabulary.document_frequency(terms)
            if scan:
                scanned += 1
                assert min(frequencies.values()) > budget  # even the rarest term is common
                query = matcher._query_in(matcher.working_vocabulary, terms)
                assert len(matcher._scan("fts_working", "id", query)) <= budget
            else:
                planned += 1
                assert sum(frequencies.values()) <= budget
        assert planned and scanned, (planned, scanned, budget)
        exact = orphans.Matcher(connection, orphans.LinkOptions(match_budget=None), "9999")
        assert all(not exact.plan_query(content)[1] for _, content in rows[:50])
    finally:
        connection.close()


def _link(db_path, budget):
    connection = apsw.Connection(str(db_path))
    try:
        return orphans.link_orphans(
            orphans.LinkRun(
                connection=connection,
                options=orphans.LinkOptions(max_rows=10**6, match_budget=budget),
                dry_run=False,
            )
        )
    finally:
        connection.close()


@pytest.mark.heavy
def test_a_bounded_pass_links_about_as_many_orphans_as_the_exact_one(sample, tmp_path):
    add_realistic_memories(sample.db_path, 2000, seed=6)
    exact_copy = tmp_path / "exact.db"
    shutil.copyfile(sample.db_path, exact_copy)
    bounded = _link(sample.db_path, BUDGET)
    exact = _link(exact_copy, None)
    assert bounded.completed_round and exact.completed_round
    linked = bounded.orphans_linked + bounded.orphans_linked_meanwhile
    linked_exact = exact.orphans_linked + exact.orphans_linked_meanwhile
    assert linked >= 0.95 * linked_exact, (bounded, exact)
