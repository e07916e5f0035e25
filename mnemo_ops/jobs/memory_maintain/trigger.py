"""The canonical promotion trigger (sql/canonical_promotion.sql): render, install, uninstall, status.

The owner is fixed at install and written into the trigger SQL; a marker comment in each trigger
body records the version and the owner (hex, so any owner text round-trips), which is how
``status`` and an idempotent ``install`` know what is there. Only objects named ``mnemo_ops_*``
are ever created or dropped.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import apsw

from mnemo_ops import database
from mnemo_ops.database import transactions
from mnemo_ops.foundation.errors import DatabaseError, UsageError
from mnemo_ops.foundation.resources import resource_dir

TRIGGER_VERSION = 1
"""Bump when the SQL changes; install replaces an older version in place."""

TRIGGER_NAMES = ("mnemo_ops_canonical_ai", "mnemo_ops_canonical_au", "mnemo_ops_canonical_ad")
INDEX_NAME = "mnemo_ops_canonical_lineage"
PROMOTION_SOURCES = ("user", "fact")
PROMOTION_VERACITY = "stated"
PROMOTION_MIN_IMPORTANCE = 0.7
MAX_OWNER_CHARS = 200

_MARKER = re.compile(r"mnemo-ops:canonical-promotion version=(\d+) owner_hex=([0-9a-f]*)")


@dataclasses.dataclass
class TriggerStatus:
    """What of our trigger is in a database."""

    installed: bool
    complete: bool
    version: int | None
    owner: str | None
    triggers: list[str]
    index: bool
    current_version: int = TRIGGER_VERSION

    @property
    def up_to_date(self) -> bool:
        """True when every trigger is there at the current version."""
        return self.complete and self.version == TRIGGER_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The JSON form for ``trigger status --json``."""
        return {
            "installed": self.installed,
            "complete": self.complete,
            "up_to_date": self.up_to_date,
            "version": self.version,
            "current_version": self.current_version,
            "owner": self.owner,
            "triggers": self.triggers,
            "index": self.index,
        }


def check_owner(owner: str) -> str:
    """Return `owner` if usable as canonical owner_id, else raise UsageError naming the problem."""
    if not isinstance(owner, str) or not owner.strip():
        raise UsageError("--owner must not be empty")
    if len(owner) > MAX_OWNER_CHARS:
        raise UsageError(f"--owner is longer than {MAX_OWNER_CHARS} characters")
    if any(ord(character) < 32 or ord(character) == 127 for character in owner):
        raise UsageError("--owner must not contain control characters")
    return owner


def sql_literal(text: str) -> str:
    """An SQL string literal for `text` (single quotes doubled); used only for the checked owner."""
    return "'" + text.replace("'", "''") + "'"


def render_sql(owner: str) -> str:
    """The trigger SQL from sql/canonical_promotion.sql with the owner and version filled in."""
    check_owner(owner)
    template = (resource_dir("sql") / "canonical_promotion.sql").read_text(encoding="utf-8")
    return (
        template.replace("__OWNER_HEX__", owner.encode("utf-8").hex())
        .replace("__OWNER__", sql_literal(owner))
        .replace("__VERSION__", str(TRIGGER_VERSION))
    )


def status(connection: apsw.Connection) -> TriggerStatus:
    """Read which of our triggers (and the lineage index) exist, with their version and owner."""
    rows = connection.execute(
        "SELECT name, type, sql FROM sqlite_master WHERE name LIKE 'mnemo\\_ops\\_canonical\\_%' ESCAPE '\\'"
    ).fetchall()
    triggers = sorted(name for name, kind, _ in rows if kind == "trigger")
    markers: set[tuple[str, str] | None] = set()
    for _, kind, sql in rows:
        if kind == "trigger":
            match = _MARKER.search(sql or "")
            markers.add(match.groups() if match else None)
    version = owner = None
    if len(markers) == 1 and None not in markers:
        found_version, owner_hex = next(iter(markers))
        version = int(found_version)
        owner = bytes.fromhex(owner_hex).decode("utf-8", "replace")
    index = any(name == INDEX_NAME for name, kind, _ in rows if kind == "index")
    complete = set(triggers) == set(TRIGGER_NAMES) and version is not None and index
    return TriggerStatus(
        installed=bool(triggers),
        complete=complete,
        version=version,
        owner=owner,
        triggers=triggers,
        index=index,
    )


def _require_canonical_table(connection: apsw.Connection) -> None:
    # A trigger that names a missing table would make every working_memory write fail.
    tables = database.table_names(connection)
    for table in ("working_memory", "canonical_facts"):
        if table not in tables:
            raise DatabaseError(
                f"the database has no {table} table; open it once with Mnemosyne 3.15 first"
            )
    columns = set(database.column_names(connection, "working_memory"))
    needed = {
        "id",
        "content",
        "source",
        "veracity",
        "importance",
        "memory_type",
        "valid_until",
        "superseded_by",
    }
    if not needed <= columns:
        raise DatabaseError(
            f"working_memory lacks columns {sorted(needed - columns)}; "
            "open the database once with Mnemosyne 3.15 first"
        )


def _drop_ours(connection: apsw.Connection, with_index: bool) -> list[str]:
    dropped = []
    for name in TRIGGER_NAMES:
        if connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", (name,)
        ).fetchone():
            connection.execute(f'DROP TRIGGER "{name}"')
            dropped.append(name)
    if (
        with_index
        and connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (INDEX_NAME,)
        ).fetchone()
    ):
        connection.execute(f'DROP INDEX "{INDEX_NAME}"')
        dropped.append(INDEX_NAME)
    return dropped


def plan_install(connection: apsw.Connection, owner: str) -> str:
    """What install would do: ``installed``, ``unchanged`` or ``replaced`` (older version or other owner)."""
    check_owner(owner)
    _require_canonical_table(connection)
    current = status(connection)
    if not current.installed and not current.index:
        return "installed"
    if current.up_to_date and current.owner == owner:
        return "unchanged"
    return "replaced"


def install(connection: apsw.Connection, owner: str) -> str:
    """Install (or replace) the triggers for `owner` in one BEGIN IMMEDIATE transaction.

    Idempotent: with the same version and owner already in place nothing is written. Returns what
    was done (see `plan_install`).
    """
    sql = render_sql(owner)

    def work(conn: apsw.Connection) -> str:
        action = plan_install(conn, owner)
        if action == "unchanged":
            return action
        _drop_ours(conn, with_index=False)
        conn.execute(sql)
        return action

    return transactions.write_batch(connection, work)


def uninstall(connection: apsw.Connection) -> list[str]:
    """Drop our triggers and lineage index (nothing else); returns the names dropped (empty: none there)."""
    return transactions.write_batch(connection, lambda conn: _drop_ours(conn, with_index=True))
