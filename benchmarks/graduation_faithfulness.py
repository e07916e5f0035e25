"""A sample of graduated statements beside the rows they came from, for a person to label.

Run by hand (not part of the test suite):

    python benchmarks/graduation_faithfulness.py --out sample.jsonl          # build, graduate, sample
    python benchmarks/graduation_faithfulness.py --labels benchmarks/labels/graduation_faithfulness.jsonl

The first form builds the benchmark-size Hermes conversation home (``devtools/samples/
hermes_conversations``; through the plugin's own ``sync_turn`` where it is installed), runs
``evening-batch`` with graduation on for N nights (the guard off: the sample is about what a
graduated row says, not which rows the guard lets through), and writes a deterministic sample of the
graduated rows: each with its text, the day it was said and its source rows' texts, and the stage's
own automatic check (the content words, numbers and dates the sources do not hold: empty for every
row written, since a row that fails it is never written). A person then adds ``label`` (``correct``:
everything the row states, including a resolved date and its kind words, is what the sources say
on that day; ``wrong`` otherwise), ``why`` and ``durable`` (false: true to its sources, but a
chat turn that carries no lasting fact) to each line.

The second form reads a labelled sample and prints the share labelled correct (the goal: at least
95 of 100).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from freezegun import freeze_time  # noqa: E402

from devtools.samples import hermes_conversations  # noqa: E402
from mnemo_ops.jobs import run_job  # noqa: E402
from mnemo_ops.jobs.evening_batch.sleep import graduation  # noqa: E402
from mnemo_ops.settings import load_settings  # noqa: E402


def graduated_rows(db_path: Path) -> list[dict]:
    """Every graduated row with its sources' texts and the automatic check's findings."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT id, content, metadata_json FROM working_memory "
            "WHERE metadata_json LIKE '%\"graduation\"%' ORDER BY id"
        ).fetchall()
        found = []
        for memory_id, content, metadata in rows:
            data = json.loads(metadata)
            sources = [str(source) for source in data.get("derived_from") or []]
            texts = []
            for source in sources:
                row = connection.execute(
                    "SELECT content, timestamp FROM working_memory WHERE id = ?", (source,)
                ).fetchone()
                if row is not None:
                    texts.append({"id": source, "text": row[0], "said_at": row[1]})
            said = [(entry["text"], graduation.said_on(entry["said_at"])) for entry in texts]
            statement = content.split(" (said on ")[0]
            found.append(
                {
                    "memory_id": memory_id,
                    "graduated": content,
                    "said_on": (data.get("graduation") or {}).get("said_on"),
                    "method": data.get("method"),
                    "sources": texts,
                    "automatic_check_missing": sorted(graduation.unsupported(statement, said)),
                }
            )
        return found
    finally:
        connection.close()


def sample(rows: list[dict], size: int) -> list[dict]:
    """`size` rows chosen by a hash of their text (the same rows for the same home)."""
    ordered = sorted(rows, key=lambda row: hashlib.sha256(row["graduated"].encode()).hexdigest())
    return ordered[:size]


def build_and_sample(out: Path, nights: int, size: int) -> None:
    """Build the home, graduate for `nights` nights, write the sample to `out`."""
    os.environ.setdefault("MNEMOSYNE_NO_EMBEDDINGS", "1")
    work = Path(tempfile.mkdtemp(prefix="mnemo-ops-faithfulness-"))
    home = hermes_conversations.build(work / "home", **hermes_conversations.BENCHMARK_SIZE)
    config = work / "config.yaml"
    config.write_text("sleep:\n  graduate: true\nguard:\n  enabled: false\n", encoding="utf-8")
    settings = load_settings(
        db=home.db_path, state_dir=home.state_dir, config=config, environ=home.environ()
    )
    today = datetime.now().replace(hour=21, minute=0, second=0, microsecond=0)
    for night in range(nights, 0, -1):
        with freeze_time(today - timedelta(days=night), tick=True):
            result = run_job(settings, "evening-batch", force=True, show_progress=False)
        print(
            f"night -{night}: {result.status}, {result.changes.get('statements_graduated', 0)} graduated"
        )
    rows = graduated_rows(home.db_path)
    chosen = sample(rows, size)
    out.write_text("".join(json.dumps(row) + "\n" for row in chosen), encoding="utf-8")
    print(f"{len(rows)} graduated rows; {len(chosen)} sampled into {out} ({work})")


def summarize(labels: Path) -> None:
    """Print the share of a labelled sample labelled correct, and every row labelled wrong."""
    rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines() if line]
    labelled = [row for row in rows if row.get("label") in ("correct", "wrong")]
    correct = sum(1 for row in labelled if row["label"] == "correct")
    print(f"{correct} of {len(labelled)} labelled correct ({len(rows) - len(labelled)} unlabelled)")
    passing = [row for row in labelled if row.get("durable") is False]
    if passing:
        print(f"{len(passing)} of {len(labelled)} carry no lasting fact (labelled durable: false)")
    for row in labelled:
        if row["label"] == "wrong":
            print(f"  wrong: {row['graduated']!r}: {row.get('why', '')}")


def main() -> None:
    """Build and sample, or summarise a labelled sample."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write a new sample here")
    parser.add_argument("--labels", type=Path, help="summarise this labelled sample")
    parser.add_argument("--nights", type=int, default=6)
    parser.add_argument("--size", type=int, default=100)
    arguments = parser.parse_args()
    if arguments.labels:
        summarize(arguments.labels)
    elif arguments.out:
        build_and_sample(arguments.out, arguments.nights, arguments.size)
    else:
        parser.error("give --out or --labels")


if __name__ == "__main__":
    main()
