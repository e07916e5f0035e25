"""Child process for work done through Mnemosyne's own API (recall for the eval, benchmark imports).

Run by ``engines/mnemosyne.run_worker`` through ``foundation.child_process`` with
``MNEMOSYNE_DATA_DIR``/``HERMES_HOME`` already pointed at a temp dir. The request's ``mode`` is
``recall``, ``store`` or ``explain`` (why each query's expected memories were or were not
injected: `explain`); progress messages carry a count done, the result the answers and the
``mnemosyne_version`` that produced them. Anything Mnemosyne prints goes to stderr.

This module is the entry point and the dispatch (`handle`); the modes live beside it, by concern:
``recall.py`` (``recall`` and ``store``, the config overrides), ``plugin_prefetch.py`` (the Hermes
plugin's prefetch as Hermes calls it, its documented approximation, the cost meter) and
``explain.py`` (``explain``: the explainers). All of it runs in this child: importing Mnemosyne has
side effects that follow the environment (the parent sets it first), and the prefetch is measured
and explained by wrapping Mnemosyne's and the plugin's functions, in a process of its own, on a copy.

Profiles (``request["profile"]``): ``plain`` (Mnemosyne's recall with top k), ``hermes`` (what the
Hermes plugin injects each turn: its own ``MnemosyneMemoryProvider.prefetch`` when
``mnemosyne_hermes`` is importable here, else the documented approximation, and the result says
which: ``profile_used`` is ``hermes`` or ``hermes-approximate``) and ``hermes-approximate`` (the
approximation even where the plugin is installed, to compare the two).

The agent's cost: with ``request["cost_sample"]`` > 0, the first that many queries are also
measured in units that do not depend on machine load: SQLite virtual-machine steps on every
connection this process opens (a progress handler on each, installed before Mnemosyne is
imported) and Python function calls (a profile hook), plus CPU and wall time as side figures.

It also runs under other interpreters (``eval run --python``: an upgrade candidate's venv, without
mnemo-ops), as a standalone copy run by path: import only the standard library, PyYAML and
``mnemosyne`` here and in the modes' modules (the dependencies of mnemosyne-memory itself),
``mnemo_ops.foundation.child_process`` (a stand-in of it is copied beside this file) and those
modules (`STANDALONE_FILES`, copied into the stand-in package), and keep to Python 3.10 syntax
(what Mnemosyne needs).
"""

from __future__ import annotations

import sys
from typing import Any

from mnemo_ops.foundation.child_process import child_main
from mnemo_ops.mnemosyne.explain import explain
from mnemo_ops.mnemosyne.recall import recall, store

STANDALONE_FILES = (
    "mnemosyne/__init__.py",
    "mnemosyne/plugin_prefetch.py",
    "mnemosyne/recall.py",
    "mnemosyne/explain.py",
)
"""The modules this one imports besides ``child_process``, relative to the ``mnemo_ops`` folder: a
standalone run copies them into its stand-in package (``engines/mnemosyne.run_worker``)."""


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Run the request's mode; the result says which Mnemosyne version did the work."""
    handlers = {"recall": recall, "store": store, "explain": explain}
    result = handlers[request["mode"]](request)
    version = _imported_mnemosyne_version()
    if version:
        result.setdefault("mnemosyne_version", version)
    return result


def _imported_mnemosyne_version() -> str | None:
    """The version of the ``mnemosyne`` package this process imported (the one that recalled)."""
    module = sys.modules.get("mnemosyne")
    return getattr(module, "__version__", None) if module is not None else None


if __name__ == "__main__":
    child_main(handle)
