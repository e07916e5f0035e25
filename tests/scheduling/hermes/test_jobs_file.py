"""jobs.json edited as text: every byte we do not change is kept, and removing ours gives the array back."""

from __future__ import annotations

import json

import pytest

from mnemo_ops.scheduling.hermes.jobs_file import compose_jobs_text, parse_jobs_text
from tests.scheduling.hermes.helpers import FOREIGN


@pytest.mark.parametrize(
    "text",
    [
        FOREIGN,
        '{"updated_at": "x", "jobs": [{"id": "a"}, {"id": "b"}], "extra": 1}',
        '{\n    "jobs": [],\n    "updated_at": "2026-01-01"\n}',
        '\ufeff{"jobs":[{"id":"a"}]}',
    ],
)
def test_text_edits_keep_every_byte_they_do_not_change(tmp_path, text):
    path = tmp_path / "jobs.json"
    document = parse_jobs_text(path, text)
    kept = [(index, value) for index, value in enumerate(document.entries)]
    stamp = "2026-12-01T00:00:00+01:00"
    unchanged = compose_jobs_text(document, kept, stamp)
    if document.updated_at_span is None:
        assert unchanged == text
    ours = {"id": "ffffffffffff", "script": "mnemo-ops/backup.sh", "name": "mnemo-ops backup"}
    added = compose_jobs_text(document, [*kept, (None, ours)], stamp)
    parsed = parse_jobs_text(path, added)
    assert parsed.entries == [*document.entries, ours]
    assert json.loads(added.lstrip("\ufeff")).get("updated_at", stamp) == stamp
    for index in range(len(document.entries)):
        assert parsed.entry_text(index) == document.entry_text(index)
    # Taking ours out again gives the earlier array back, byte for byte.
    back = compose_jobs_text(
        parsed, [(index, value) for index, value in enumerate(parsed.entries[:-1])], stamp
    )
    start, end = document.array_span
    again = parse_jobs_text(path, back)
    assert back[again.array_span[0] : again.array_span[1]] == text[start:end]
