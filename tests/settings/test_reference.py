"""docs/configuration.md's option tables are written from the models and must stay in step."""

from __future__ import annotations

from pathlib import Path

from mnemo_ops.settings import reference

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_option_table_of_the_docs_matches_the_models():
    assert DOCS.joinpath("configuration.md").read_text().count("<!-- options: ") >= 18
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        assert reference.refresh(text) == text, (
            f"{page} is out of date: run python -m mnemo_ops.settings.reference "
            "docs/*.md docs/jobs/*.md"
        )


def test_a_table_shows_type_default_range_and_the_run_only_mark():
    table = reference.table("evening_batch")
    assert "| `summary_tier` | integer | `3` | `1`, `2`, `3` |" in table
    assert "| `stale_fraction` | number | `0.1` | 0 to 1 |" in table
    assert "(one run only, never in the config file)" in table.split("`rebuild`")[1].split("\n")[0]
    assert "| `schedule` | string | unset | a cron expression |" in reference.table("jobs")
    assert "| `nice` | integer | `10` | -20 to 19 |" in reference.table("scheduling.systemd")


def test_refresh_rewrites_a_stale_table():
    stale = "x\n<!-- options: backup -->\n| key |\n| `keep` | old |\n<!-- end options -->\ny\n"
    fresh = reference.refresh(stale)
    assert "| `keep` | integer | `7` | > 0 | daily checkpoints kept: one per UTC day" in fresh
    assert fresh.startswith("x\n") and fresh.endswith("<!-- end options -->\ny\n")
