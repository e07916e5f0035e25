"""Secrets kept out of text: the patterns the auth-file audit knows, and redaction with them.

Shared by the nightly auth-file audit (``jobs/nightly_selfcare/audits/auth_files``), which reads Hermes' auth files
without ever showing a value, and by the model layer (``models/``), which must never send a secret to a
model. Nothing here imports a domain package, so both can use it without an import cycle.

- ``patterns``: what a secret looks like: dotenv lines, secret-looking key names, token shapes
  (API keys, bearer tokens, JWTs, private key blocks, credentials in URLs, ``KEY=value`` assignments).
- ``known``: the concrete values stored in ``$HERMES_HOME/auth.json`` and ``$HERMES_HOME/.env``, so a
  key pasted into a conversation is found even when it has no recognisable shape.
- `Redactor`: both together; ``redact(text)`` returns the text with every secret replaced by
  ``[REDACTED:<kind>]`` and how many were replaced (never the secrets themselves).
"""

from __future__ import annotations

from mnemo_ops.models.redaction.known import known_secret_values
from mnemo_ops.models.redaction.redactor import Redacted, Redactor, redactor_for

__all__ = ["Redacted", "Redactor", "known_secret_values", "redactor_for"]
