"""The job tests' homes (``tests/jobs/<job>/test_job.py``): the recall guard is off in them unless a
test is marked ``guard``; the tests of a job's stages beside them keep the home as it is.

Every writing job runs its change first on a copy and recalls the whole probe set before and after;
that trial is the subject of tests/guard/ and of the job tests marked ``guard`` (each writing job
keeps at least one, which sees the guard refuse a harmful change or accept a good one). Elsewhere a
job test is about what the job itself does, and the trial would only double its time. The switch is
the user's own: ``guard: {enabled: false}`` in the home's default config file
(``~/.config/mnemo-ops/config.yaml``), which a test that passes ``--config`` replaces.
"""

from __future__ import annotations

import pytest

from mnemo_ops.mnemosyne.sample_home import SampleLayout

GUARD_OFF_CONFIG = "guard:\n  enabled: false\n"


def guard_switched(layout: SampleLayout, request: pytest.FixtureRequest) -> SampleLayout:
    """`layout` with the guard off in its default config file, unless the test is marked ``guard``."""
    is_job_test = request.node.path.name == "test_job.py"
    if is_job_test and request.node.get_closest_marker("guard") is None:
        config = layout.directory / "home" / ".config" / "mnemo-ops" / "config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(GUARD_OFF_CONFIG, encoding="utf-8")
    return layout


@pytest.fixture
def sample(sample, request) -> SampleLayout:
    """The sample home; the guard off unless the test is marked ``guard``."""
    return guard_switched(sample, request)


@pytest.fixture
def conversations(conversations, request) -> SampleLayout:
    """The aged conversation home; the guard off unless the test is marked ``guard``."""
    return guard_switched(conversations, request)


@pytest.fixture
def agent_conversations(agent_conversations, request) -> SampleLayout:
    """The agent-session conversation home; the guard off unless the test is marked ``guard``."""
    return guard_switched(agent_conversations, request)


@pytest.fixture
def realistic(realistic, request) -> SampleLayout:
    """The realistic 50k-row home; the guard off unless the test is marked ``guard``."""
    return guard_switched(realistic, request)
