"""A test child run standalone (a copy run by path, as under an interpreter without mnemo-ops): it
imports only the standard library and the child-process module, and says where they came from."""

import os
import sys

from mnemo_ops.foundation import child_process


def handle(request):
    """Report the module file in use, the first import folder and PYTHONPATH."""
    child_process.send_progress("started")
    return {
        "module_file": child_process.__file__,
        "script": os.path.abspath(__file__),
        "path0": sys.path[0],
        "pythonpath": os.environ.get("PYTHONPATH"),
        "request": request,
    }


if __name__ == "__main__":
    child_process.child_main(handle)
