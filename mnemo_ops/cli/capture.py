"""``mnemo-ops capture TEXT``: drop one item into the bridge spool (``<state_dir>/queue/new``).

The item is validated with the same rules the drain applies, written into ``queue/tmp/`` and renamed
into ``queue/new/`` (Maildir), so the hourly bridge-drain ingests it exactly once. Capture never opens
the database: it works while the agent is busy, and even before the database exists.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.jobs.bridge_drain.items import VERACITIES, Item, parse_file
from mnemo_ops.jobs.bridge_drain.spool import Spool


def build_item(
    text: str,
    source: str | None,
    importance: float | None,
    veracity: str | None,
    session: str | None,
    key: str | None,
) -> dict[str, Any]:
    """The item object for one capture (only the fields given, plus the capture time)."""
    item: dict[str, Any] = {"content": text, "created_at": isoformat(utc_now())}
    for field, value in (
        ("source", source),
        ("importance", importance),
        ("veracity", veracity),
        ("session_id", session),
        ("idempotency_key", key),
    ):
        if value is not None:
            item[field] = value
    return item


def capture(settings, item: dict[str, Any]) -> tuple[str, Item]:
    """Validate `item` as the drain will and deliver it; return (path in new/, the validated item).

    A bad item is a UsageError naming the field (exit 2), and nothing is written.
    """
    data = (json.dumps(item, ensure_ascii=False) + "\n").encode("utf-8")
    limits = settings.bridge_drain
    spool = Spool(settings.queue_dir)
    name = spool.unique_name(".json")
    parsed = parse_file(
        name, data, limits.max_item_bytes, limits.max_file_bytes, limits.default_session
    )
    if parsed.rejected:
        raise UsageError(f"not captured: {'; '.join(parsed.rejected[0].reasons)}")
    path = spool.deliver(data, ".json")
    # The key was derived from the name the parser saw; derive it again from the delivered name.
    delivered = parse_file(
        path.name, data, limits.max_item_bytes, limits.max_file_bytes, limits.default_session
    )
    return str(path), delivered.items[0]


@handle_errors
def capture_command(
    text: str = typer.Argument(
        ..., help="The memory's text, or '-' to read it from stdin.", metavar="TEXT"
    ),
    source: str = typer.Option(
        None, "--source", help="Where it came from (default: bridge).", metavar="S"
    ),
    importance: float = typer.Option(
        None, "--importance", help="0 to 1 (default: 0.5).", metavar="F"
    ),
    veracity: str = typer.Option(
        None,
        "--veracity",
        help=f"One of {', '.join(VERACITIES)} (default: unknown).",
        metavar="V",
    ),
    session: str = typer.Option(
        None, "--session", help="Mnemosyne session id (default: bridge).", metavar="ID"
    ),
    key: str = typer.Option(
        None, "--key", help="Idempotency key (default: derived from the file).", metavar="KEY"
    ),
) -> None:
    """Queue one item (TEXT, or stdin for '-') in the bridge inbox."""
    if text == "-":
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError("not captured: stdin is not UTF-8") from None
        text = text.rstrip("\n")
    path, item = capture(
        invocation_state().settings,
        build_item(text, source, importance, veracity, session, key),
    )
    data = {
        "queued": path,
        "idempotency_key": item.idempotency_key,
        "session_id": item.session_id,
        "bytes": len(item.content.encode("utf-8")),
    }
    emit(data, lambda console: console.print(f"queued {path}", markup=False, soft_wrap=True))


def register(app: typer.Typer) -> None:
    """Add the ``capture`` command."""
    app.command(
        "capture",
        help=(
            "Drop one item into the bridge inbox (<state_dir>/queue/new); the hourly bridge-drain job "
            "stores it in Mnemosyne exactly once. TEXT '-' reads the text from stdin.\n\n"
            "Exit codes: 0 queued, 2 the item is invalid (nothing written) or the config is bad.\n\n"
            "Example: mnemo-ops capture 'Dana prefers window seats' --source user --veracity stated "
            "--importance 0.8\n\n"
            "Example: git log -1 --format=%s | mnemo-ops capture - --source shell --veracity tool"
        ),
    )(capture_command)
