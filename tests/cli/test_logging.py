"""Mnemosyne's own log lines reach the user once, as Mnemosyne's; its sqlite-vec warnings (one fact
about this Python, said by Mnemosyne on every start) only with -v, as one line."""

from __future__ import annotations

import io
import logging
import sqlite3

from mnemo_ops.cli.common import MnemosyneOnce
from tests.conftest import run_cli


def shown(show_sqlite_vec: bool) -> list[str]:
    """What a handler with the filter prints for Mnemosyne's messages (both lines' wordings) and ours."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("mnemo-ops: %(levelname)s: %(message)s"))
    handler.addFilter(MnemosyneOnce(show_sqlite_vec=show_sqlite_vec))
    beam = logging.getLogger("mnemosyne.core.beam")
    ours = logging.getLogger("mnemo_ops.test")
    for logger in (beam, ours):
        logger.addHandler(handler)
        logger.propagate = False
    try:
        for _ in range(3):  # every job of a demo opens the database again
            beam.warning("sqlite-vec tables unavailable: vec0 module is not loaded")
            beam.warning("sqlite-vec facts table unavailable: vec0 module is not loaded")
            beam.warning("sqlite-vec package is installed but load_extension() failed.")
            beam.warning("sqlite-vec tables not created: extension not loaded.")
            beam.warning("something else from Mnemosyne")
        ours.warning("ours is never held back")
        ours.warning("ours is never held back")
    finally:
        for logger in (beam, ours):
            logger.removeHandler(handler)
            logger.propagate = True
    return stream.getvalue().splitlines()


OTHERS = [
    "mnemo-ops: mnemosyne warning: something else from Mnemosyne",
    "mnemo-ops: WARNING: ours is never held back",
    "mnemo-ops: WARNING: ours is never held back",
]


def test_mnemosyne_warnings_are_shown_once_and_the_sqlite_vec_ones_only_with_verbose():
    assert shown(show_sqlite_vec=False) == OTHERS
    assert shown(show_sqlite_vec=True) == [
        "mnemo-ops: mnemosyne info: sqlite-vec cannot be loaded here: Mnemosyne's vector search "
        "is off (mnemo-ops doctor says why)",
        *OTHERS,
    ]


def test_a_command_that_opens_mnemosyne_says_nothing_of_sqlite_vec_and_doctor_does(sample):
    loads = hasattr(sqlite3.connect(":memory:"), "enable_load_extension")
    drained = run_cli(sample, "run", "bridge-drain")  # Mnemosyne in this process: remember
    assert drained.returncode == 0, drained.stderr
    assert "sqlite-vec" not in drained.stderr

    spool_file = sample.state_dir / "queue" / "new" / "more.json"
    spool_file.write_text('{"content": "The boiler was serviced in March."}')
    verbose = run_cli(sample, "-v", "run", "bridge-drain")
    assert verbose.stderr.count("sqlite-vec") == (0 if loads else 1), verbose.stderr

    doctor = run_cli(sample, "doctor")
    if not loads:  # this Python: Mnemosyne warns on every start; doctor says it once
        assert "cannot load extensions" in doctor.stdout
