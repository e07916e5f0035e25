"""Test tool, not product code: a deterministic OpenAI-style embedding server on localhost.

Mnemosyne embeds through an OpenAI-compatible API when ``MNEMOSYNE_EMBEDDINGS_VIA_API`` is on and
``MNEMOSYNE_EMBEDDING_API_URL`` names the endpoint: it POSTs ``{"model", "input": [texts]}`` to
``<url>/embeddings`` and reads ``data[i]["embedding"]`` back, one float list per text, of the
dimension its model name implies (384 for the default ``BAAI/bge-small-en-v1.5``). No model can be
downloaded here, so this server stands in for one: each text is hashed into that many dimensions
from its words and character trigrams, with a sign per feature, and L2-normalised. Texts that share
words and spellings are near, unrelated texts are almost orthogonal, and the same text always gets
the same vector, so recall with a vector voice is reproducible.

The server runs in a thread of the test process (``http.server``), serves 127.0.0.1 only, counts
the texts it embedded, and can be told to fail (HTTP 401, which Mnemosyne does not retry) to
stand for a model that cannot be
reached.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMENSION = 384
"""The dimension of Mnemosyne's default model, BAAI/bge-small-en-v1.5."""

_WORD = re.compile(r"[a-z0-9]+")


def _features(text: str) -> list[tuple[str, float]]:
    words = _WORD.findall(text.lower())
    features = [(f"w:{word}", 1.0) for word in words]
    for word in words:
        padded = f" {word} "
        features.extend((f"c:{padded[i : i + 3]}", 0.5) for i in range(len(padded) - 2))
    return features


def embed_text(text: str, dimension: int = DIMENSION) -> list[float]:
    """The unit vector of `text`: hashed, signed word and character-trigram features."""
    vector = [0.0] * dimension
    for feature, weight in _features(text):
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dimension
        sign = 1.0 if digest[4] & 1 else -1.0
        vector[index] += sign * weight
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:  # an empty text still gets a unit vector, as a real model gives one
        vector[0], norm = 1.0, 1.0
    return [value / norm for value in vector]


class EmbeddingServer:
    """The server, started by ``start()`` (or ``with``), on a free port of 127.0.0.1."""

    def __init__(self, dimension: int = DIMENSION) -> None:
        self.dimension = dimension
        self.texts_embedded = 0
        self.requests = 0
        self.failing = False
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL to give ``MNEMOSYNE_EMBEDDING_API_URL`` (Mnemosyne appends /embeddings)."""
        assert self._server is not None, "the server is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> EmbeddingServer:
        """Listen and serve in a daemon thread."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with owner._lock:
                    owner.requests += 1
                    failing = owner.failing
                if failing or not self.path.rstrip("/").endswith("/embeddings"):
                    self._answer(401 if failing else 404, {"error": {"message": "unavailable"}})
                    return
                request = json.loads(body or b"{}")
                texts = request.get("input", [])
                if isinstance(texts, str):
                    texts = [texts]
                data = [
                    {"object": "embedding", "index": i, "embedding": embed_text(t, owner.dimension)}
                    for i, t in enumerate(texts)
                ]
                with owner._lock:
                    owner.texts_embedded += len(texts)
                self._answer(200, {"object": "list", "data": data, "model": request.get("model")})

            def _answer(self, status: int, payload: dict) -> None:
                encoded = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(encoded)))
                self.end_headers()
                self.wfile.write(encoded)

            def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
                pass  # quiet: a test's output is its assertions

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> EmbeddingServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
