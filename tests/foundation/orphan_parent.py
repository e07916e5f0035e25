"""A parent for the kill -9 test: runs the hanging test child without a timeout, until killed.

Usage: python -m tests.foundation.orphan_parent PID_FILE
"""

import sys

from mnemo_ops.foundation.child_process import run_child

if __name__ == "__main__":
    run_child("tests.foundation.children", {"mode": "hang", "pid_file": sys.argv[1]}, timeout=None)
