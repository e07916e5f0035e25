"""Child process: the version of a distribution installed for the interpreter that runs it.

Run standalone by ``versions.interpreter_version`` under another interpreter (one without
mnemo-ops, ``retrieval_eval.python``) through ``foundation.child_process``: it imports only the
standard library and that module, in Python 3.10 syntax, and never Mnemosyne itself (package
metadata only). Request: ``{"distribution": "mnemosyne-memory"}``; result: the version, or None
when it is not installed.
"""

from __future__ import annotations

import importlib.metadata

from mnemo_ops.foundation.child_process import child_main


def installed(request: dict[str, str]) -> str | None:
    """The installed version of ``request["distribution"]`` (None when absent)."""
    try:
        return importlib.metadata.version(request["distribution"])
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    child_main(installed)
