"""Child process for the CronJob check: each JSON document on stdin through the official client's
V1CronJob model and back; prints ``{"results": [...]}`` (the round-tripped dict, or the error).

The client is imported only here: in the pytest process its lazily imported models would be built
under freezegun's fake datetime by other tests and fail.
"""

from __future__ import annotations

import inspect
import json
import sys

from kubernetes import client


class _Response:
    """What older clients' ApiClient.deserialize reads: a body in ``.data``."""

    def __init__(self, body):
        self.data = json.dumps(body)


def round_trip(document: dict) -> dict:
    """`document` through V1CronJob and back (unknown fields are dropped, missing ones raise)."""
    api = client.ApiClient()
    if "response_text" in inspect.signature(api.deserialize).parameters:  # client 35 and later
        model = api.deserialize(json.dumps(document), "V1CronJob", "application/json")
    else:
        model = api.deserialize(_Response(document), "V1CronJob")
    return api.sanitize_for_serialization(model)


def main() -> None:
    """Read a JSON list of documents, print each one's round trip or error."""
    results = []
    for document in json.load(sys.stdin):
        try:
            results.append({"document": round_trip(document)})
        except (ValueError, TypeError) as error:
            results.append({"error": f"{type(error).__name__}: {error}"})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
