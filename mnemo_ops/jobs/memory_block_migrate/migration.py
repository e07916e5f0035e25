"""One run of memory-block-migrate.

1. Read MEMORY.md and USER.md (a symlink, invalid UTF-8 or a file over 10x its limit is reported and
   left byte-identical; a missing file is fine) and record first-seen dates of new entries.
2. Plan each block that reached its high water mark (`plan`).
3. Store the chosen entries through Mnemosyne in a child process (`store`), each exactly once.
4. Recall each by its own text as the agent would (`verify`). One that does not come back stays in
   the file, is reported, its row is closed (``valid_until``) and it is not tried again; the plan is
   made again without it, for at most ``max_rounds`` rounds.
5. Take the verified entries out of each file under Hermes' lock, after a copy of the file went
   into quarantine (`rewrite`).

At every moment each entry is in the file, in the database, or (as a copy of the file) in
quarantine: an entry leaves the file only after its row is committed and recalled. A dry run does
steps 1 and 2 without writing anything and lists what would move, with the sizes before and after.
Nothing slow runs while Hermes' lock is held, and no database transaction is held open across steps.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from mnemo_ops.core.context import JobContext
from mnemo_ops.core.results import JobResult, Severity
from mnemo_ops.database import transactions
from mnemo_ops.foundation.clock import isoformat, local_now, local_timestamp, utc_now
from mnemo_ops.foundation.errors import MnemoOpsError
from mnemo_ops.jobs.memory_block_migrate import plan as planning
from mnemo_ops.jobs.memory_block_migrate.rewrite import remove_entries
from mnemo_ops.jobs.memory_block_migrate.store import (
    SESSION_PREFIX,
    EntryToStore,
    session_for_run,
    store_entries,
)
from mnemo_ops.jobs.memory_block_migrate.stored_rows import StoredRow, find_stored
from mnemo_ops.jobs.memory_block_migrate.verify import (
    ToVerify,
    agent_session,
    sessions_to_verify,
    verify,
)
from mnemo_ops.jobs.nightly_selfcare import quarantine
from mnemo_ops.memory_blocks import entry_history
from mnemo_ops.memory_blocks.blocks import (
    BLOCK_NAMES,
    Block,
    BlockProblem,
    entry_key,
    folder_problem,
    preview,
    read_block,
)
from mnemo_ops.memory_blocks.hermes_lock import BlockLockTimeout, remove_stale_temporaries
from mnemo_ops.memory_blocks.limits import block_limits
from mnemo_ops.mnemosyne.api import live_schema_gaps

COUNTS = (
    "entries_recorded",
    "entries_stored",
    "entries_moved",
    "entries_not_recalled",
    "blocks_rewritten",
    "files_quarantined",
)
"""Every count is always present in ``changes`` (zero when nothing happened)."""
QUARANTINE_RULE = "memory-block-migrate"
RESTORE_FIX = "mnemo-ops quarantine list (docs/jobs/memory-block-migrate.md, 'Restoring a file')"
PREVIEWS_SHOWN = 8


@dataclasses.dataclass
class BlockWork:
    """One block being worked on."""

    block: Block
    limit: int
    first_seen: dict[str, str]
    plan: planning.BlockPlan


@dataclasses.dataclass(frozen=True)
class Rewritten:
    """What the rewrite did to one block: the entries it moved out, the block's size after (in
    characters and as a share of its limit) and the quarantine id of the file as it was."""

    moved: int
    chars_after: int
    percent_after: float
    quarantine_id: str | None

    def to_stats(self) -> dict[str, Any]:
        """The rewrite's figures in ``stats.blocks.<name>``."""
        return {
            "moved": self.moved,
            "chars_after": self.chars_after,
            "percent_after": self.percent_after,
            "quarantine_id": self.quarantine_id,
        }


@dataclasses.dataclass
class BlockFigures:
    """One block's entry in ``stats.blocks``: its file missing, refused, or its plan's figures and
    then what the rewrite did."""

    missing_limit: int | None = None
    """The limit of a block whose file is missing."""
    refused: str | None = None
    """The problem's code of a file refused (when read, or when rewritten)."""
    plan: dict[str, Any] | None = None
    """The plan's figures (``BlockPlan.to_stats`` with ``limit_source``; previews in a real run)."""
    rewritten: Rewritten | None = None

    def to_stats(self) -> dict[str, Any]:
        """``stats.blocks.<name>``: the rewrite's figures update the plan's (``chars_after``, ...)."""
        if self.refused is not None:
            return {"refused": self.refused}
        if self.missing_limit is not None:
            return {"missing": True, "limit": self.missing_limit}
        return {**(self.plan or {}), **(self.rewritten.to_stats() if self.rewritten else {})}


@dataclasses.dataclass
class Rounds:
    """The rounds of store and recall (``stats.verification``): the sessions recalled in, the rounds
    run, the recall engine's description (once a round ran) and the entries recalled."""

    sessions: list[str]
    rounds: int = 0
    engine: dict[str, Any] | None = None
    recalled: int = 0

    def to_stats(self) -> dict[str, Any]:
        """``stats.verification`` (``engine`` only when a round ran)."""
        stats: dict[str, Any] = {"sessions": self.sessions, "rounds": self.rounds}
        if self.rounds:
            stats["engine"] = self.engine
        stats["recalled"] = self.recalled
        return stats


def _close_row(ctx: JobContext, memory_id: str) -> None:
    """Close a stored entry that recall does not bring back (the entry stays in its file).

    Stamped a second in the past, in whole seconds: Mnemosyne's and the canonical trigger's "now"
    compare as text, and a stamp with microseconds would sort after a same-second "now".
    """
    stamp = (local_now() - timedelta(seconds=1)).isoformat(timespec="seconds")
    connection = ctx.open_db()
    try:
        transactions.write_statement(
            connection,
            "UPDATE working_memory SET valid_until = ? WHERE id = ? AND valid_until IS NULL",
            (stamp, memory_id),
        )
    finally:
        connection.close()


class Migration:
    """The state of one run (see the module docstring)."""

    def __init__(self, ctx: JobContext):
        self.ctx = ctx
        self.options = ctx.options
        # The settings model has checked the water marks and that every pattern compiles.
        self.high, self.low = self.options.high_water, self.options.low_water
        self.keep = planning.compile_keep_patterns(self.options.keep_patterns)
        self.now = utc_now()
        self.now_iso = isoformat(self.now)
        self.limits = block_limits(ctx.settings)
        self.works: dict[str, BlockWork] = {}
        self.new_keys: set[str] = set()
        """Entries first seen by this run (they move after every entry seen before)."""
        self.stored: dict[str, StoredRow] = {}
        self.excluded: set[str] = set()
        self.verified: dict[str, tuple[str, str, str]] = {}  # key -> (block, text, memory id)
        self.failed: set[str] = set()
        self.blocks: dict[str, BlockFigures] = {}
        """Each block's figures, in the order the run came to them (``stats.blocks``)."""
        self.rounds: Rounds | None = None
        self.session: str | None = None
        """The Mnemosyne session the entries were stored in (a real run)."""
        self.state_db = None
        self.latest_session: str | None = None
        self.schema_gaps: list[str] = []

    # ------------------------------------------------------------------------------------- reading

    def read(self) -> None:
        """Read both blocks and the database's stored entries; record first-seen dates."""
        connection = self.ctx.open_db()
        try:
            self.stored = find_stored(connection, local_timestamp())
            self.latest_session = agent_session(connection, SESSION_PREFIX)
            if not self.ctx.dry_run:
                self.schema_gaps = live_schema_gaps(connection)
        finally:
            connection.close()
        history = entry_history.rows(self.state_db)
        self.excluded = {
            key for (_, key), row in history.items() if row["status"] == entry_history.NOT_RECALLED
        } | {key for key, row in self.stored.items() if not row.live}
        folder = self.ctx.settings.memory_blocks_dir
        for name in BLOCK_NAMES:
            limit = self.limits.of(name)
            block = read_block(folder / name, limit)
            if block is None:
                self.blocks[name] = BlockFigures(missing_limit=limit)
                continue
            if isinstance(block, BlockProblem):
                self._refused(block)
                continue
            fresh = entry_history.unseen(self.state_db, name, block.entries)
            self.new_keys |= {entry_key(name, entry) for entry in fresh}
            self.ctx.count("entries_recorded", len(fresh))
            if not self.ctx.dry_run:
                entry_history.record_seen(self.state_db, name, block.entries, self.now_iso)
            first_seen = {
                key: row["first_seen"]
                for (_, key), row in entry_history.rows(self.state_db, name).items()
            }
            self.works[name] = BlockWork(
                block, limit, first_seen, self._plan(block, limit, first_seen)
            )

    def _refused(self, problem: BlockProblem) -> None:
        self.blocks[problem.name] = BlockFigures(refused=problem.code)
        self.ctx.warn(
            f"memory-block-{problem.code}",
            problem.message,
            Severity.ERROR,
            fix=f"ls -l {problem.path}",
        )

    def _plan(self, block: Block, limit: int, first_seen: dict[str, str]) -> planning.BlockPlan:
        failed = self.excluded | (self.failed - set(self.verified))
        return planning.choose(
            block.name,
            block.entries,
            limit,
            self.high,
            self.low,
            first_seen,
            self.now_iso,
            self.keep,
            excluded=failed,
            new=frozenset(self.new_keys),
        )

    # ------------------------------------------------------------------------------------- moving

    def pending(self) -> list[planning.Candidate]:
        """Chosen entries not verified yet."""
        return [
            candidate
            for work in self.works.values()
            for candidate in work.plan.chosen
            if candidate.key not in self.verified and candidate.key not in self.failed
        ]

    def store_and_verify(self) -> None:
        """Rounds of store + recall until every chosen entry is verified or failed."""
        session = session_for_run(f"{self.now:%Y%m%dT%H%M%SZ}")
        sessions = sessions_to_verify(self.latest_session)
        rounds = Rounds(sessions=sessions)
        for _ in range(self.options.max_rounds):
            pending = self.pending()
            if not pending:
                break
            rounds.rounds += 1
            self._store([c for c in pending if c.key not in self.stored], session)
            items = [
                ToVerify(c.key, self.stored[c.key].memory_id, c.text)
                for c in pending
                if c.key in self.stored
            ]
            results, engine = verify(
                self.ctx.settings,
                self.ctx.settings.db_path,
                items,
                sessions,
                self.options.recall_profile,
            )
            rounds.engine = engine
            by_key = {c.key: c for c in pending}
            for key, result in results.items():
                candidate = by_key[key]
                if result.recalled:
                    self.verified[key] = (
                        candidate.block,
                        candidate.text,
                        self.stored[key].memory_id,
                    )
                else:
                    self._not_recalled(candidate, self.stored[key].memory_id, result.ranks)
            for work in self.works.values():
                work.plan = self._plan(work.block, work.limit, work.first_seen)
        rounds.recalled = len(self.verified)
        self.rounds, self.session = rounds, session

    def _store(self, candidates: list[planning.Candidate], session: str) -> None:
        if not candidates:
            return
        self.ctx.before_write()
        entries = [EntryToStore(c.block, c.key, c.text, c.first_seen) for c in candidates]
        outcomes = store_entries(
            self.ctx.settings,
            entries,
            self.options,
            session,
            self.now_iso,
            initialise=bool(self.schema_gaps),
        )
        for candidate in candidates:
            outcome = outcomes[candidate.key]
            if outcome.outcome in ("stored", "already-stored") and outcome.memory_id:
                self.stored[candidate.key] = StoredRow(outcome.memory_id, True, True)
                if outcome.outcome == "stored":
                    self.ctx.count("entries_stored")
                entry_history.update(
                    self.state_db,
                    candidate.block,
                    candidate.text,
                    self.now_iso,
                    status=entry_history.STORED,
                    memory_id=outcome.memory_id,
                    stored_at=self.now_iso,
                )
                continue
            reason = (
                "Mnemosyne's write filter refused it"
                if outcome.outcome == "filtered"
                else "Mnemosyne merged it into another row"
            )
            self.failed.add(candidate.key)
            self.ctx.count("entries_not_recalled")
            entry_history.update(
                self.state_db,
                candidate.block,
                candidate.text,
                self.now_iso,
                status=entry_history.NOT_RECALLED,
                memory_id=outcome.memory_id,
                note=reason,
            )
            self.ctx.warn(
                "memory-block-not-stored",
                f"{candidate.block}: «{preview(candidate.text)}» stays in the file: {reason}",
                Severity.WARNING,
            )

    def _not_recalled(
        self, candidate: planning.Candidate, memory_id: str, ranks: dict[str, int | None]
    ) -> None:
        self.failed.add(candidate.key)
        self.ctx.count("entries_not_recalled")
        _close_row(self.ctx, memory_id)
        missed = ", ".join(session for session, rank in ranks.items() if rank is None)
        entry_history.update(
            self.state_db,
            candidate.block,
            candidate.text,
            self.now_iso,
            status=entry_history.NOT_RECALLED,
            memory_id=memory_id,
            note=f"not recalled by its own text in session(s) {missed}",
        )
        self.ctx.warn(
            "memory-block-not-recalled",
            f"{candidate.block}: «{preview(candidate.text)}» stays in the file: recall by its own "
            f"text did not bring it back (session {missed}); its row {memory_id} was closed",
            Severity.WARNING,
        )

    # ------------------------------------------------------------------------------------- rewriting

    def rewrite(self) -> None:
        """Take the verified entries out of each block under Hermes' lock."""
        folder = self.ctx.settings.memory_blocks_dir
        by_block: dict[str, list[str]] = {}
        for block, text, _memory_id in self.verified.values():
            by_block.setdefault(block, []).append(text)
        if not by_block:
            return
        self.ctx.before_write()
        remove_stale_temporaries(folder)
        for name, texts in by_block.items():
            work = self.works[name]
            try:
                outcome = remove_entries(
                    folder / name,
                    work.limit,
                    texts,
                    self.options.lock_wait_seconds,
                    preserve=self._preserver(name),
                )
            except BlockLockTimeout as error:
                self.ctx.warn("memory-block-locked", error.message, Severity.WARNING)
                continue
            except MnemoOpsError as error:
                self.ctx.warn("memory-block-refused", error.message, Severity.ERROR)
                continue
            if outcome.problem is not None:
                self._refused(outcome.problem)
                continue
            self._record_rewrite(name, outcome)

    def _preserver(self, name: str):
        def preserve(block: Block) -> str:
            entry = quarantine.preserve_copy(
                self.ctx.settings,
                block.path,
                block.data,
                block.mode,
                block.mtime,
                QUARANTINE_RULE,
                utc_now(),
            )
            self.ctx.count("files_quarantined")
            return entry["id"]

        return preserve

    def _record_rewrite(self, name: str, outcome) -> None:
        moved_at = isoformat(utc_now())
        for text in outcome.removed:
            key = entry_key(name, text)
            entry_history.update(
                self.state_db,
                name,
                text,
                moved_at,
                status=entry_history.MOVED,
                memory_id=self.verified[key][2],
                moved_at=moved_at,
            )
        if outcome.removed:
            self.ctx.count("blocks_rewritten")
            self.ctx.count("entries_moved", len(outcome.removed))
        self.blocks[name].rewritten = Rewritten(
            moved=len(outcome.removed),
            chars_after=outcome.chars_after,
            percent_after=round(100 * outcome.chars_after / self.works[name].limit, 1),
            quarantine_id=outcome.quarantine_id,
        )
        if outcome.changed_meanwhile or outcome.kept_as_last:
            left = len(outcome.changed_meanwhile) + len(outcome.kept_as_last)
            self.ctx.warn(
                "memory-block-changed-meanwhile",
                f"{name}: {left} verified entr{'y' if left == 1 else 'ies'} left alone: the agent "
                "changed the file meanwhile (they are stored in Mnemosyne and move next run)",
                Severity.INFO,
            )
        if outcome.removed:
            self._announce_moved(
                name,
                outcome.removed,
                outcome.chars_before,
                outcome.chars_after,
            )
            self.ctx.warn(
                "memory-block-quarantined",
                f"{name} as it was before this run is in quarantine as {outcome.quarantine_id}",
                Severity.INFO,
                fix=RESTORE_FIX,
            )

    # ------------------------------------------------------------------------------------- reporting

    def _announce_moved(self, name: str, texts: list[str], before: int, after: int) -> None:
        """One line per rewritten block: its sizes and what moved (previews: the ledger keeps it)."""
        limit = self.works[name].limit
        listed = ", ".join(
            f"«{preview(text, 40)}» ({len(text)})" for text in texts[:PREVIEWS_SHOWN]
        )
        more = f" and {len(texts) - PREVIEWS_SHOWN} more" if len(texts) > PREVIEWS_SHOWN else ""
        self.ctx.warn(
            "memory-block-moved",
            f"{name}: {before:,} -> {after:,} of {limit:,} characters "
            f"({before / limit:.0%} -> {after / limit:.0%}); moved {len(texts)} "
            f"entr{'y' if len(texts) == 1 else 'ies'} into Mnemosyne: {listed}{more}",
            Severity.INFO,
        )

    def summarise_plans(self) -> None:
        """Stats of every plan, and a warning for a block that cannot get under its low water mark."""
        for name, work in self.works.items():
            plan = work.plan
            figures = plan.to_stats()
            if not self.ctx.dry_run:  # the ledger keeps a real run's result: previews only there
                figures["moving"] = [
                    {**item, "text": preview(item["text"])} for item in figures["moving"]
                ]
            figures["limit_source"] = self.limits.sources[name]
            self.blocks[name] = BlockFigures(plan=figures)
            if not plan.triggered:
                self.ctx.warn(
                    "memory-block-size",
                    f"{name}: {plan.chars_before:,} of {work.limit:,} characters "
                    f"({plan.chars_before / work.limit:.0%}), under the high water mark "
                    f"({self.high:.0%}): nothing moves",
                    Severity.INFO,
                )
            if plan.triggered and not plan.reaches_low_water:
                held = ", ".join(f"{reason} {count}" for reason, count in plan.held.items())
                self.ctx.warn(
                    "memory-block-still-high",
                    f"{name} stays at {plan.chars_after / work.limit:.0%} of its limit "
                    f"({plan.chars_after:,} of {work.limit:,}): the entries left may not move "
                    f"({held or 'none left'})",
                    Severity.WARNING,
                    fix="memory_block_migrate.keep_patterns, or edit the file by hand",
                )

    def to_stats(self) -> dict[str, Any]:
        """The run's figures for ``stats``: ``blocks``, then (a real run) ``verification`` and
        ``session``."""
        stats: dict[str, Any] = {
            "blocks": {name: figures.to_stats() for name, figures in self.blocks.items()}
        }
        if self.rounds is not None:
            stats["verification"] = self.rounds.to_stats()
            stats["session"] = self.session
        return stats

    def dry_run_listing(self) -> None:
        """What a real run would do: the counts, each block's sizes before and after, and every
        entry that would move (its full text, its size and when it was first seen)."""
        for name, work in self.works.items():
            chosen = work.plan.chosen
            if not chosen:
                continue
            self.ctx.count("entries_stored", sum(1 for c in chosen if c.key not in self.stored))
            self.ctx.count("entries_moved", len(chosen))
            self.ctx.count("blocks_rewritten")
            self.ctx.count("files_quarantined")
            limit = work.limit
            before, after = work.plan.chars_before, work.plan.chars_after
            self.ctx.warn(
                "memory-block-would-move",
                f"{name}: {before:,} -> {after:,} of {limit:,} characters "
                f"({before / limit:.0%} -> {after / limit:.0%}); would move {len(chosen)} "
                f"entr{'y' if len(chosen) == 1 else 'ies'} into Mnemosyne, oldest first:",
                Severity.INFO,
            )
            for number, candidate in enumerate(chosen, start=1):
                seen = (
                    "not seen before"
                    if candidate.first_seen == self.now_iso
                    else f"first seen {candidate.first_seen[:10]}"
                )
                stored = ", already stored" if candidate.key in self.stored else ""
                self.ctx.warn(
                    "memory-block-would-move-entry",
                    f"{name} {number}/{len(chosen)} ({candidate.chars} characters, {seen}{stored}): "
                    f"{' '.join(candidate.text.split())}",
                    Severity.INFO,
                )


def run(ctx: JobContext) -> JobResult:
    """One run of memory-block-migrate (module docstring)."""
    for name in COUNTS:
        ctx.count(name, 0)
    migration = Migration(ctx)
    problem = folder_problem(ctx.settings.memory_blocks_dir)
    if problem:
        ctx.warn("memory-block-refused", problem, Severity.ERROR)
        return ctx.result
    if migration.limits.problem:
        ctx.warn("memory-block-limits", migration.limits.problem, Severity.WARNING)
    migration.state_db = ctx.open_state()
    try:
        migration.read()
        if ctx.dry_run:
            migration.summarise_plans()
            migration.dry_run_listing()
        else:
            migration.store_and_verify()
            migration.summarise_plans()
            migration.rewrite()
        ctx.result.stats.update(migration.to_stats())
    finally:
        if migration.state_db is not None:
            migration.state_db.close()
    return ctx.result
