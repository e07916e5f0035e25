"""Crontab block handling: only our marked block changes."""

import pytest

from mnemo_ops.core.manifests import load_manifests
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.scheduling import crontab


def test_render_has_one_line_per_implemented_job():
    manifests = load_manifests()
    text = crontab.render(manifests)
    entries = [line for line in text.splitlines() if line and not line.startswith("#")]
    implemented = [name for name, manifest in manifests.items() if manifest.implemented]
    assert [line.rsplit(" ", 1)[1] for line in entries] == implemented
    assert all(" mnemo-ops -q run " in line for line in entries)
    # A job without a module would make cron mail "not implemented" at every slot: it is left out.
    assert all(
        f"run {name}" not in text
        for name, manifest in manifests.items()
        if not manifest.implemented
    )


def test_render_quotes_paths_with_spaces():
    text = crontab.render(
        load_manifests(), command="/opt/my tools/mnemo-ops", global_args=["--db", "/a b/m.db"]
    )
    assert "'/opt/my tools/mnemo-ops' --db '/a b/m.db' -q run backup" in text


def test_with_block_replaces_only_our_block():
    rendered = crontab.render(load_manifests())
    current = "MAILTO=x\n"
    once = crontab.with_block(current, rendered)
    twice = crontab.with_block(once, rendered)
    assert once == twice
    assert crontab.strip_block(twice) == current
    changed = crontab.with_block(once, rendered.replace("0 2 * * *", "0 3 * * *"))
    assert (
        "0 3 * * * mnemo-ops -q run backup" in changed and changed.count(crontab.BEGIN_MARKER) == 1
    )


def test_unterminated_block_is_refused():
    with pytest.raises(MnemoOpsError, match="without its END marker"):
        crontab.strip_block(f"{crontab.BEGIN_MARKER}\n0 2 * * * x\n")
