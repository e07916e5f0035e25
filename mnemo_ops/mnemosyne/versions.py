"""The Mnemosyne lines mnemo-ops supports, which one is installed, and which one wrote a database.

A database remembers which Mnemosyne wrote it only through what that Mnemosyne left in it: tables,
columns and indexes that older lines never create, and (4.0) a format bit in ``PRAGMA user_version``.
Mnemosyne records no version number of its own in the file (3.15.1 and 4.0.0b6 read from source).
``LINES`` lists those markers per line; docs/contracts.md ("Mnemosyne versions") keeps the facts
behind them and what else differs between the lines.

Why an older Mnemosyne must never open a newer database: its schema initialisation runs on every
open, and its writes follow the older rules. 3.15's sleep writes tier-1 summaries stamped "now" into
a 4.0 database (the recall collapse 4.0 fixed, docs/mnemosyne.md), writes canonical facts without the
writer columns 4.0 keeps, and writes vectors un-normalised into a vector store that 4.0 has marked as
normalised (``user_version`` bit 0x20000000), which 4.0 then ranks with raw L2 distances.

Why a newer Mnemosyne must not open an older database beside the live agent: its initialisation
upgrades the schema (4.0 adds ``media_assets``, ``media_moments`` and columns), a schema change under
the agent's open connections (see ``mnemosyne_api``) and a database the agent's older Mnemosyne then
runs on. Work on a copy (the eval's snapshot) is not affected.

Nothing here imports Mnemosyne: versions come from package metadata, or from a small child process
for another interpreter (``eval run --python``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from mnemo_ops.foundation.child_process import ChildProcessFailed, run_child
from mnemo_ops.foundation.errors import DatabaseError, UsageError
from mnemo_ops.mnemosyne.api import mnemosyne_version
from mnemo_ops.settings.job_sections import RetrievalEvalOptions

DISTRIBUTION = "mnemosyne-memory"

# How a job uses Mnemosyne (the ``mnemosyne`` key of its manifest, jobs/*.yaml).
OPENS_DATABASE = "opens-database"  # opens the live database through Mnemosyne's API
OPENS_SNAPSHOT = "opens-snapshot"  # opens only private copies of it (the eval)
USES_CODE = "uses-code"  # runs Mnemosyne's code on our own connections (embeddings)
NONE = "none"
USAGES = (NONE, OPENS_DATABASE, OPENS_SNAPSHOT, USES_CODE)


@dataclasses.dataclass(frozen=True)
class Marker:
    """Something only this line (or a newer one) creates in a database: a table, index or column."""

    kind: str  # "table", "index" or "column"
    name: str  # the table or index; for a column, "table.column"

    def describe(self) -> str:
        """``table media_assets``, ``column canonical_facts.writer_id``."""
        return f"{self.kind} {self.name}"


@dataclasses.dataclass(frozen=True)
class MnemosyneLine:
    """One release line of mnemosyne-memory that mnemo-ops is tested with."""

    name: str  # "3.15"
    tested: str  # the exact version CI runs
    requirement: str  # pip's specifier for the newest release of the line, pre-releases included
    markers: tuple[Marker, ...] = ()
    user_version_bits: int = 0  # PRAGMA user_version bits only this line (or newer) sets
    agent_plugin: str = ""  # the Hermes plugin release users run with this line (CI installs it)

    @property
    def key(self) -> tuple[int, int]:
        """(major, minor), for ordering lines."""
        return line_key(self.name)

    @property
    def install_hint(self) -> str:
        """The pip command that installs the tested version of this line."""
        return f"pip install '{DISTRIBUTION}=={self.tested}'"


LINES: tuple[MnemosyneLine, ...] = (
    MnemosyneLine(name="3.15", tested="3.15.1", requirement=">=3.15,<3.16"),
    MnemosyneLine(
        name="4.0",
        tested="4.0.0b6",
        requirement=">=4.0.0b1,<4.1",
        markers=(
            Marker("table", "media_assets"),
            Marker("table", "media_moments"),
            Marker("column", "canonical_facts.writer_id"),
            Marker("index", "idx_conflicts_pair_norm"),
        ),
        # _VEC_NORM_BIT (mnemosyne/core/beam.py): set when 4.0 creates its vec0 tables, i.e. only
        # where sqlite-vec is loadable; 0x10000000 is the legacy bit of its own pre-releases.
        user_version_bits=0x20000000 | 0x10000000,
        # mnemosyne-hermes 0.7.6 requires mnemosyne-memory[embeddings]>=4.0.0b5: its users are on
        # this line, so CI tests the eval's and the guard's plugin profile here.
        agent_plugin="mnemosyne-hermes==0.7.6",
    ),
)
"""Oldest first. A line's markers are what its schema initialisation adds to an older database."""


def line_key(version: str) -> tuple[int, int]:
    """(major, minor) of a version string (``4.0.0b6`` -> (4, 0)); ValueError when it has none."""
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    if not match:
        raise ValueError(f"not a version: {version!r}")
    return int(match.group(1)), int(match.group(2))


def line_name(version: str) -> str:
    """The release line of a version: ``3.15.1`` -> ``3.15``, ``4.0.0b6`` -> ``4.0``."""
    major, minor = line_key(version)
    return f"{major}.{minor}"


def known_line(version_or_line: str | None) -> MnemosyneLine | None:
    """The entry of ``LINES`` for a version or line name, None when mnemo-ops does not know it."""
    if not version_or_line:
        return None
    try:
        name = line_name(version_or_line)
    except ValueError:
        return None
    return next((line for line in LINES if line.name == name), None)


def installed_version() -> str | None:
    """The mnemosyne-memory version of this interpreter (package metadata; nothing imported)."""
    return mnemosyne_version()


def installed_line() -> str | None:
    """The release line installed here (``"3.15"``, ``"4.0"``, ...), None when Mnemosyne is absent.

    For code and tests whose expectations differ by line (e.g. 4.0 writes its summaries at tier 3
    with their sources' time, so the summary repair has nothing to do there).
    """
    version = installed_version()
    return line_name(version) if version else None


def stamps_utc(line: str | None = None) -> bool:
    """Does this line (default: the installed one) stamp memory rows in naive UTC? 4.0 writes
    ``datetime.now(timezone.utc)`` without its offset; 3.15 writes naive local time."""
    line = line or installed_line() or LINES[0].name
    return line_key(line) >= (4, 0)


def memory_time(moment: datetime, line: str | None = None) -> str:
    """A naive local time as the text the line stamps rows with (for comparisons in SQL)."""
    if stamps_utc(line):
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat()


def local_time(stamp: str, line: str | None = None) -> str:
    """A row's timestamp text as naive local ISO time (3.15's stamps are that already); text that is
    not a time is returned as it is."""
    if not stamp or not stamps_utc(line):
        return stamp
    try:
        moment = datetime.fromisoformat(stamp.strip())
    except ValueError:
        return stamp
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone().replace(tzinfo=None).isoformat()


def tested_versions() -> str:
    """``3.15.1, 4.0.0b6``: the versions CI runs, for messages."""
    return ", ".join(line.tested for line in LINES)


def interpreter_version(python: str | Path, timeout_s: float = 60) -> str | None:
    """The mnemosyne-memory version installed for another Python interpreter (None when absent).

    Asked of a standalone child (``version_probe``: that interpreter need not have mnemo-ops).
    UsageError (exit 2) when `python` is not an interpreter that runs.
    """
    path = Path(python).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise UsageError(f"retrieval_eval.python: {path} is not an executable file")
    try:
        found = run_child(
            "mnemo_ops.mnemosyne.version_probe",
            {"distribution": DISTRIBUTION},
            timeout=timeout_s,
            python=path,
            standalone=True,
        )
    except ChildProcessFailed as error:
        if error.reason in ("start", "timeout"):
            raise UsageError(f"retrieval_eval.python: cannot run {path}: {error.message}") from None
        raise UsageError(
            f"retrieval_eval.python: {path} is not a working Python: {error.message}"
        ) from None
    return found or None


@dataclasses.dataclass(frozen=True)
class DatabaseLine:
    """Which known line wrote a database, and the evidence found in it."""

    line: MnemosyneLine  # the oldest line when no marker of a newer one is present
    evidence: tuple[str, ...]  # e.g. ("table media_assets", "user_version bit 0x20000000")
    missing: dict[str, tuple[str, ...]]  # line name -> its markers this database lacks

    def describe(self) -> str:
        """``Mnemosyne 4.0 (table media_assets, ...)`` or ``Mnemosyne 3.15 or older``."""
        if not self.evidence:
            return f"Mnemosyne {self.line.name} or older"
        shown = ", ".join(self.evidence[:2]) + (", ..." if len(self.evidence) > 2 else "")
        return f"Mnemosyne {self.line.name} ({shown})"


def _schema(connection) -> tuple[set[tuple[str, str]], int]:
    """(kind, name) of every table, index and column, and ``user_version``; any DB-API-like connection."""
    objects: set[tuple[str, str]] = set()
    rows = list(connection.execute("SELECT type, name, sql FROM sqlite_master"))
    for object_type, name, sql in rows:
        if object_type not in ("table", "index"):
            continue
        objects.add((object_type, name))
        virtual = (sql or "").upper().startswith("CREATE VIRTUAL TABLE")
        if object_type == "table" and not virtual and not name.startswith("sqlite_"):
            for column in connection.execute(f'PRAGMA table_info("{name}")'):
                objects.add(("column", f"{name}.{column[1]}"))
    user_version = list(connection.execute("PRAGMA user_version"))[0][0]
    return objects, int(user_version or 0)


def database_line(connection) -> DatabaseLine:
    """The newest known line whose markers this database holds (apsw or sqlite3 connection, read only).

    Any one marker is evidence: every open by that line creates them all, and an older Mnemosyne
    that opened the file since adds nothing that would remove them.
    """
    objects, user_version = _schema(connection)
    chosen = LINES[0]
    evidence: tuple[str, ...] = ()
    missing: dict[str, tuple[str, ...]] = {}
    for line in LINES:
        found = [
            marker.describe() for marker in line.markers if (marker.kind, marker.name) in objects
        ]
        missing[line.name] = tuple(
            marker.describe()
            for marker in line.markers
            if (marker.kind, marker.name) not in objects
        )
        bits = user_version & line.user_version_bits
        if bits:
            found.append(f"user_version bit {bits:#x}")
        if found:
            chosen, evidence = line, tuple(found)
    return DatabaseLine(line=chosen, evidence=evidence, missing=missing)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Can this Mnemosyne work on this database? ``problem`` is the one-line refusal, else None."""

    version: str | None
    database: DatabaseLine
    problem: str | None = None
    warning: str | None = None


def judge(
    database: DatabaseLine,
    version: str | None,
    usage: str,
    python: str | Path | None = None,
) -> Verdict:
    """Decide whether Mnemosyne `version` may do `usage` (one of ``USAGES``) on `database`.

    - No Mnemosyne: refused.
    - The database was written by a newer line than `version`: refused for every usage, naming the
      version to install (an older Mnemosyne must never run its initialisation on a newer database).
    - `version` is a known line whose markers the database lacks, and the job opens the live database
      through Mnemosyne: refused (its initialisation would upgrade the schema beside the live agent).
    - `version` is of a line mnemo-ops does not know: allowed, with a warning (untested).

    `python` is the other interpreter whose Mnemosyne `version` is (None: the installed one); messages
    name it, and say where to install.
    """
    if python:
        label, target = f"{DISTRIBUTION} {version} of {python}", f"for {python}"
    else:
        label, target = f"installed {DISTRIBUTION} {version}", "where mnemo-ops runs"
    if version is None:
        where = f"installed for {python}" if python else "installed"
        return Verdict(
            version, database, problem=f"{DISTRIBUTION} is not {where}: {LINES[-1].install_hint}"
        )
    try:
        key = line_key(version)
    except ValueError:
        return Verdict(version, database, warning=f"cannot read the version of the {label}")
    if database.evidence and database.line.key > key:
        return Verdict(
            version,
            database,
            problem=(
                f"database written by {database.describe()}; the {label} is older and must not "
                f"open it: install {database.line.name} {target}: {database.line.install_hint}"
            ),
        )
    line = known_line(version)
    if line is None:
        return Verdict(
            version,
            database,
            warning=(
                f"the {label} is of a line mnemo-ops is not tested with "
                f"(tested: {tested_versions()})"
            ),
        )
    lacking = database.missing.get(line.name, ())
    if lacking and line.key > database.line.key and usage == OPENS_DATABASE:
        return Verdict(
            version,
            database,
            problem=(
                f"database written by {database.describe()}; the {label} would upgrade its schema "
                f"beside the live agent: upgrade the agent's Mnemosyne first (it migrates the "
                f"database when it starts), or install {database.line.name} {target}: "
                f"{database.line.install_hint}"
            ),
        )
    return Verdict(version, database)


def check_database(db_path: Path, usage: str, python: str | Path | None = None) -> Verdict:
    """Judge the installed Mnemosyne (or that of `python`) against the database at `db_path`.

    The database is read through a read-only apsw connection, closed before this returns (the job
    may then open it through Mnemosyne: one SQLite library per process per database).
    """
    from mnemo_ops import database as memory_database

    version = interpreter_version(python) if python else installed_version()
    connection = memory_database.open_memory_db(db_path, readonly=True)
    try:
        found = database_line(connection)
    finally:
        connection.close()
    return judge(found, version, usage, python)


def usage_of(manifest) -> str:
    """The manifest's ``mnemosyne`` usage (``none`` when the manifest does not say)."""
    return getattr(manifest, "mnemosyne", NONE) or NONE


def preflight(ctx) -> None:
    """The runner's preflight check (``RunHooks.preflight``): refuse, exit 2, before anything is written.

    Applies to jobs whose manifest says they use Mnemosyne (``mnemosyne: opens-database |
    opens-snapshot | uses-code``), dry runs included (a dry run reports what the real run would do).
    The retrieval eval uses Mnemosyne only with ``engine: mnemosyne``, and runs the Mnemosyne of
    its ``python`` when one is set (the upgrade gate).
    A warning (an untested line) is added to the result.
    """
    usage = usage_of(ctx.manifest)
    if usage == NONE:
        return
    python = None
    if isinstance(ctx.options, RetrievalEvalOptions):
        if ctx.options.engine != "mnemosyne":
            return
        python = ctx.options.python or None
    verdict = check_database(ctx.settings.db_path, usage, python=python)
    ctx.result.stats["mnemosyne_version"] = verdict.version
    ctx.result.stats["database_written_by"] = verdict.database.describe()
    if verdict.problem:
        raise DatabaseError(verdict.problem)
    if verdict.warning:
        ctx.warn("mnemosyne-untested", verdict.warning, "warning")
