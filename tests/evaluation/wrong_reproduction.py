"""The Mnemosyne worker with a deliberately wrong reproduction: no filter ever drops a row.

Run as the worker module by ``test_explain`` to show that the reproduction check can fail: for a
query whose recall holds rows the prefetch filters out, the explanation must carry an
``explain-mismatch`` note.
"""

from __future__ import annotations

from mnemo_ops.foundation.child_process import child_main
from mnemo_ops.mnemosyne import explain, worker


def _passes_everything(self, *args):
    """A filter that never filters (the wrong reproduction)."""
    return None, ""


explain.PrefetchExplainer.filter_rule = _passes_everything
explain.ApproximateExplainer.filter_rule = _passes_everything

if __name__ == "__main__":
    child_main(worker.handle)
