"""The realistic generator against the shipped sample conversations, by document-frequency profile.

At the sample's own size (35 turns in 5 sessions) the generated text must look like the sample:
the same number of terms per row, the same share of one-off terms, the user's name and the most
common word in about as many rows, and rows of one session sharing content terms more often than
rows of different sessions. At larger sizes it must follow the growth laws of real text: a
vocabulary that keeps growing but ever more slowly (Heaps), and salient terms whose document counts
grow with the table (what makes FTS queries on real memories expensive).
"""

import math
import statistics
from collections import Counter

import pytest

from devtools.samples import realistic_memories
from mnemo_ops import database
from mnemo_ops.mnemosyne.sample_home import conversations_file

SAMPLE_SIZE_SEEDS = range(30)


@pytest.fixture(scope="module")
def sample_profile():
    return realistic_memories.profile(realistic_memories.sample_documents(conversations_file()))


@pytest.fixture(scope="module")
def generated_profile():
    profiles = [
        realistic_memories.profile(realistic_memories.generated_documents(35, seed, mean_turns=7))
        for seed in SAMPLE_SIZE_SEEDS
    ]
    return {
        name: statistics.mean(getattr(profile, name) for profile in profiles)
        for name in profiles[0].to_dict()
    }


@pytest.mark.parametrize(
    "name, tolerance",
    [
        ("tokens_per_document", 1.5),
        ("hapax_share", 0.05),
        ("top_term_share", 0.1),
        ("user_share", 0.1),
        ("top10_mean_share", 0.05),
        ("same_session_overlap", 0.05),
        ("cross_session_overlap", 0.05),
    ],
)
@pytest.mark.heavy
def test_profile_matches_the_sample_at_its_size(sample_profile, generated_profile, name, tolerance):
    expected = getattr(sample_profile, name)
    assert abs(generated_profile[name] - expected) <= tolerance, (
        name,
        generated_profile[name],
        expected,
    )


def test_sessions_share_more_than_strangers(generated_profile):
    assert generated_profile["same_session_overlap"] > generated_profile["cross_session_overlap"]


def test_vocabulary_grows_slowly_and_terms_collide_more_with_size():
    sizes = (2_000, 20_000)
    vocabulary, held = [], []
    for size in sizes:
        frequencies = Counter()
        for _, terms in realistic_memories.generated_documents(size, seed=3):
            frequencies.update(set(terms))
        vocabulary.append(len(frequencies))
        # Document counts of the mid-frequency terms (ranks 100..1000): they grow with the table.
        ranked = [count for _, count in frequencies.most_common(1000)][100:]
        held.append(statistics.median(ranked))
    heaps_exponent = math.log(vocabulary[1] / vocabulary[0]) / math.log(sizes[1] / sizes[0])
    assert 0.4 <= heaps_exponent <= 0.85, heaps_exponent
    assert held[1] / held[0] >= 5, held  # 10x the rows: mid-frequency terms in >= 5x the rows


def test_rows_written_into_a_mnemosyne_schema(sample):
    connection = database.open_memory_db(sample.db_path, readonly=True)
    before = database.row_counts(connection)
    connection.close()  # the generator writes through sqlite3: one SQLite library at a time
    written = realistic_memories.add_realistic_memories(sample.db_path, 1_000, seed=2)
    connection = database.open_memory_db(sample.db_path, readonly=True)
    after = database.row_counts(connection)
    indexed = connection.execute("SELECT count(*) FROM fts_working").fetchone()[0]
    stated = connection.execute(
        "SELECT count(*) FROM working_memory WHERE source = 'user' AND veracity = 'stated' "
        "AND importance >= 0.7"
    ).fetchone()[0]
    connection.close()
    assert after["working_memory"] - before["working_memory"] == written["working"] == 1_000
    assert after["episodic_memory"] - before["episodic_memory"] == written["episodic"] == 25
    assert indexed == after["working_memory"]  # Mnemosyne's own triggers indexed every row
    assert 200 <= stated <= 400


def test_deterministic_for_a_seed():
    first = [row.content for row in realistic_memories.generate_rows(300, seed=9)]
    again = [row.content for row in realistic_memories.generate_rows(300, seed=9)]
    other = [row.content for row in realistic_memories.generate_rows(300, seed=10)]
    assert first == again != other


def test_the_cached_home_is_built_once_and_then_reused(tmp_path):
    layout = realistic_memories.cached_realistic_home(tmp_path, 200)
    assert layout.directory == tmp_path / "realistic-200"
    connection = database.open_memory_db(layout.db_path, readonly=True)
    counts = database.row_counts(connection)
    connection.close()
    assert counts["working_memory"] >= 200  # the sample's own rows and the generated ones
    built = layout.db_path.stat().st_mtime_ns
    again = realistic_memories.cached_realistic_home(tmp_path, 200)
    assert again == layout and layout.db_path.stat().st_mtime_ns == built
    named = realistic_memories.cached_realistic_home(tmp_path, 200, name="other")
    assert named.directory == tmp_path / "other" and named.db_path.exists()


def test_a_home_whose_build_did_not_finish_is_built_again(tmp_path):
    """The database exists long before a build ends: without the marker it is not a home."""
    half_built = tmp_path / "realistic-200"
    (half_built / "hermes").mkdir(parents=True)
    (half_built / "hermes" / "left-by-a-killed-build").write_text("partial")
    layout = realistic_memories.cached_realistic_home(tmp_path, 200)
    assert not (half_built / "hermes" / "left-by-a-killed-build").exists()
    assert (tmp_path / "realistic-200.built").exists() and layout.db_path.exists()
