"""The clock: one place for "now", in the two conventions the project meets.

Our own records (ledger, manifests, state) use aware UTC datetimes and ISO 8601 with seconds.
Mnemosyne stamps its rows with naive local time (``datetime.now().isoformat()``), so comparisons with
its columns (``valid_until``, ``timestamp``) use `local_now`. Every function reads the clock through
``datetime.now`` so freezegun controls it in tests.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def isoformat(moment: datetime | None) -> str | None:
    """A datetime as ISO 8601 in UTC with seconds precision, or None."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def local_now() -> datetime:
    """The current local time, naive, as Mnemosyne stamps its rows."""
    return datetime.now()


def local_timestamp() -> str:
    """`local_now` as the ISO string Mnemosyne writes (comparable with its text columns)."""
    return local_now().isoformat()
