"""Job manifests: all nine present and valid; a broken manifest names its file and key."""

from datetime import UTC, datetime

import pytest

from mnemo_ops.core.manifests import load_manifests
from mnemo_ops.foundation.errors import ConfigError
from mnemo_ops.settings import JOB_NAMES


def test_all_jobs_have_valid_manifests():
    manifests = load_manifests()
    assert tuple(manifests) == JOB_NAMES
    assert manifests["backup"].schedule == "0 2 * * *"
    assert manifests["nightly-selfcare"].schedule == "0 13 * * *"
    assert manifests["monthly-maintenance"].schedule == "30 3 1 * *"
    assert manifests["self-reflection"].schedule == "0 23 * * 0"
    assert manifests["retrieval-eval"].needs_lock is False
    assert manifests["memory-maintain"].needs_lock is True
    assert manifests["memory-maintain"].checkpoint == "before-write"
    # How each job uses Mnemosyne (the version check's preflight reads it).
    assert {name: manifest.mnemosyne for name, manifest in manifests.items()} == {
        "backup": "none",
        "nightly-selfcare": "none",
        "memory-maintain": "opens-snapshot",  # the recall guard recalls on copies
        "evening-batch": "opens-database",
        "bridge-drain": "opens-database",
        "retrieval-eval": "opens-snapshot",
        "monthly-maintenance": "uses-code",
        "self-reflection": "opens-database",  # stores lessons through Mnemosyne
        "memory-block-migrate": "opens-database",  # stores the entries through remember
    }


def test_next_and_previous_run():
    backup = load_manifests()["backup"]
    moment = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert backup.next_run(moment) == datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    assert backup.previous_run(moment) == datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "name: backup\nschedule: '0 2 * * *'\ndescription: x\nwrites: []\ncheckpoint: none\ntimeout: 5\nextra: 1\n",
            "unknown key 'extra'",
        ),
        (
            "name: backup\nschedule: 'every day'\ndescription: x\nwrites: []\ncheckpoint: none\ntimeout: 5\n",
            "key 'schedule'",
        ),
        (
            "name: backup\nschedule: '0 2 * * *'\ndescription: x\nwrites: [disk]\ncheckpoint: none\ntimeout: 5\n",
            "key 'writes'",
        ),
        (
            "name: backup\nschedule: '0 2 * * *'\ndescription: x\nwrites: []\ncheckpoint: always\ntimeout: 5\n",
            "key 'checkpoint'",
        ),
        (
            "name: backup\nschedule: '0 2 * * *'\ndescription: x\nwrites: []\ncheckpoint: none\n",
            "missing key 'timeout'",
        ),
        (
            "name: backup\nschedule: '0 2 * * *'\ndescription: x\nwrites: []\ncheckpoint: none\n"
            "timeout: 5\nmnemosyne: sometimes\n",
            "key 'mnemosyne' must be one of none, opens-database, opens-snapshot, uses-code",
        ),
        (
            "name: backup\nschedule: '0 2 * * *'\ndescription: x\nwrites: []\ncheckpoint: none\n"
            "timeout: 5\nwithholds_crowders: true\n",
            "withholds_crowders needs a guard",
        ),
    ],
)
def test_broken_manifest_is_named(tmp_path, text, fragment):
    (tmp_path / "backup.yaml").write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_manifests(tmp_path)
    assert "backup.yaml" in raised.value.message and fragment in raised.value.message


def test_manifest_name_must_match_file(tmp_path):
    (tmp_path / "backup.yaml").write_text(
        "name: evening-batch\nschedule: '0 2 * * *'\ndescription: x\nwrites: []\ncheckpoint: none\ntimeout: 5\n"
    )
    with pytest.raises(ConfigError, match="must match the file name"):
        load_manifests(tmp_path)
