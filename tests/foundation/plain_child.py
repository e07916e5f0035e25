"""A test child that does not use ``child_main``: it writes the stdout lines it is asked for, raw,
to show how the parent takes protocol failures. Request: ``{"lines": [...], "status": 0}``."""

import json
import sys

if __name__ == "__main__":
    request = json.loads(sys.stdin.read())
    for line in request["lines"]:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    sys.exit(request.get("status", 0))
