"""A test child that prints on stdout at import time, before ``child_main`` keeps stdout for the
protocol (as a library's banner would); it answers with its request."""

from mnemo_ops.foundation.child_process import child_main

print("a banner printed at import time")

if __name__ == "__main__":
    child_main(lambda request: request)
