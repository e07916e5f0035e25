"""Mnemosyne's own log lines reach the user once, as Mnemosyne's (issue 28, item 7: the 4.0 demo
printed the sqlite-vec warning twice)."""

from __future__ import annotations

import io
import logging

from mnemo_ops.cli.common import MnemosyneOnce


def test_mnemosyne_warnings_are_shown_once_and_the_two_sqlite_vec_ones_as_one_line():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("mnemo-ops: %(levelname)s: %(message)s"))
    handler.addFilter(MnemosyneOnce())
    beam = logging.getLogger("mnemosyne.core.beam")
    ours = logging.getLogger("mnemo_ops.test")
    for logger in (beam, ours):
        logger.addHandler(handler)
        logger.propagate = False
    try:
        for _ in range(3):  # every job of a demo opens the database again
            beam.warning("sqlite-vec tables unavailable: vec0 module is not loaded")
            beam.warning("sqlite-vec facts table unavailable: vec0 module is not loaded")
            beam.warning("something else from Mnemosyne")
        ours.warning("ours is never held back")
        ours.warning("ours is never held back")
    finally:
        for logger in (beam, ours):
            logger.removeHandler(handler)
            logger.propagate = True
    assert stream.getvalue().splitlines() == [
        "mnemo-ops: mnemosyne warning: sqlite-vec cannot be loaded here (vec0 module not loaded): "
        "Mnemosyne's vector tables are off",
        "mnemo-ops: mnemosyne warning: something else from Mnemosyne",
        "mnemo-ops: WARNING: ours is never held back",
        "mnemo-ops: WARNING: ours is never held back",
    ]
