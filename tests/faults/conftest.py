"""Every test here is in the e2e tier: kill -9 at every point, live writers beside a job, locks held
past their timeouts, full disks. The fast tier covers each of these paths once elsewhere (the job
tests' kill and lock cases, tests/core/); here they run over and over, as CI does once a change."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Put every test of this folder in the e2e tier."""
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
