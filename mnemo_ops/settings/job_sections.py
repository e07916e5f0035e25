"""Each job's own options: one pydantic model per job, and the one list of job names.

``JOB_SECTIONS`` is where the jobs are named: every job has a manifest ``jobs/<name>.yaml`` (the
manifest loader refuses one that is not named here, and a test checks each name has one), a
``jobs.<name>`` section (schedule, enabled, timeout, ping_url) and the options section below.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model, field_validator, model_validator
from pydantic_core import PydanticCustomError

from mnemo_ops.settings.sections import ProfileName, Section
from mnemo_ops.settings.types import (
    RUN_ALIAS,
    CronExpression,
    Fraction,
    NonNegativeInt,
    NonNegativeNumber,
    PositiveInt,
    Similarity,
    option,
    run_option,
)


class BackupOptions(Section):
    """``backup``: checkpoints and how many are kept."""

    keep: PositiveInt = option(
        7, "daily checkpoints kept: one per UTC day, the newest days' (failed ones: as many)"
    )
    manual_keep: PositiveInt = option(
        3, "manual checkpoints kept: a day's backups after its daily, newest first"
    )
    pre_write_keep: PositiveInt = option(
        7, "pre-write checkpoints kept, besides each job's rollback points"
    )
    reuse_minutes: NonNegativeInt = option(10, "a pre-write checkpoint this recent is reused")
    layout: Literal["deduplicated", "full-copy"] = option(
        "deduplicated",
        "how the database is kept: chunks stored once by hash and shared by every checkpoint "
        "(deduplicated), or a whole copy in each checkpoint (full-copy); both restore",
    )
    pre_write_integrity_check: bool = option(
        False,
        "deduplicated layout: run integrity_check on a pre-write checkpoint's snapshot too (the "
        "daily backup, verify and restore always do; a full copy always does)",
    )
    compact_dead_share: float = option(
        0.3,
        "deduplicated layout: after a backup, a pack is compacted (its pages still in use "
        "copied into a new pack, the old one removed) once this share of it no checkpoint uses; "
        "1 turns compaction off",
        gt=0,
        le=1,
    )
    copy_to: str | None = option(
        None,
        "a second copy of each verified backup, made after it: an absolute folder that exists "
        "(another disk), rsync:HOST:PATH or rclone:REMOTE:PATH (the tool must be on PATH; an "
        "absolute PATH alone is a local one); "
        "unset: no copy",
    )
    copy_keep: PositiveInt = option(
        7,
        "checkpoints kept in a copy_to folder, newest first (the packs only older ones used go "
        "with them); rsync and rclone targets keep everything",
    )

    @field_validator("copy_to")
    @classmethod
    def _copy_target(cls, copy_to: str | None) -> str | None:
        # The form only: whether the folder exists or the tool is installed is checked when a
        # backup runs (the disk may be mounted later, the tool installed later).
        if copy_to is None:
            return None
        if copy_to.startswith(("/", "~")):
            return copy_to
        tool, _, rest = copy_to.partition(":")
        where, _, path = rest.partition(":")
        if tool in ("rsync", "rclone") and ((where and path) or rest.startswith("/")):
            return copy_to
        raise PydanticCustomError(
            "copy_target",
            "must be an absolute folder, rsync:HOST:PATH or rclone:REMOTE:PATH, got {value}",
            {"value": repr(copy_to)},
        )


class StagingRule(Section):
    """One extra staging rule of nightly-selfcare: files under `root` matching `pattern`."""

    name: str | None = option(None, "the rule's name in the report (default extra-N)")
    root: str = Field(description="an absolute folder path")
    pattern: str | None = option("*", "file name pattern (fnmatch)")
    older_than_days: NonNegativeInt = option(30, "files older than this are staged")

    @field_validator("root")
    @classmethod
    def _absolute(cls, root: str) -> str:
        if not root.startswith(("/", "~")):
            raise PydanticCustomError(
                "absolute_path", "must be an absolute path, got {value}", {"value": repr(root)}
            )
        return root


class StagingOptions(Section):
    """``nightly_selfcare.staging``: expired files moved into quarantine, never deleted."""

    enabled: bool = option(True, "false: nothing is staged into quarantine")
    queue_processed_days: NonNegativeInt = option(30, "0 turns the rule off")
    reports_days: NonNegativeInt = option(90, "0 turns the rule off")
    hermes_logs_days: NonNegativeInt = option(30, "0 turns the rule off")
    extra_rules: list[StagingRule] | None = option(
        None,
        "more rules, each {name, root, pattern, older_than_days}: root an absolute folder "
        "(required), pattern a file name pattern (default *), older_than_days (default 30)",
    )


class NightlySelfcareOptions(Section):
    """``nightly_selfcare``: the audits' limits and the staging rules."""

    memory_char_limit: PositiveInt = option(
        2200, "Hermes' `memory_char_limit`, used when Hermes' `config.yaml` sets none"
    )
    user_char_limit: PositiveInt = option(
        1375, "Hermes' `user_char_limit`, used when Hermes' `config.yaml` sets none"
    )
    memory_block_warn_fraction: Fraction = option(
        0.8, "`memory-block-near-limit` from this share of the limit"
    )
    memory_block_stale_days: PositiveInt = option(
        30, "`memory-block-stale` after this many days unchanged"
    )
    auth_expiry_warn_days: PositiveInt = option(
        7, "`auth-expiring-soon` this many days before expiry"
    )
    backup_warn_hours: PositiveInt = option(
        26, "`backup-stale` (warning) when the newest checkpoint is older"
    )
    backup_error_hours: PositiveInt = option(
        72, "`backup-stale` (error) when the newest checkpoint is older"
    )
    overdue_grace_minutes: NonNegativeInt = option(
        60, "`job-overdue` when a slot was missed by more"
    )
    wal_warn_mb: PositiveInt = option(256, "`db-wal-large` above this WAL size, in MiB")
    free_disk_warn_mb: NonNegativeInt = option(
        2048, "`disk-space-low` (warning) under this much free, in MiB"
    )
    free_disk_error_mb: NonNegativeInt = option(
        512, "`disk-space-low` (error) under this much free, in MiB"
    )
    staging: StagingOptions = StagingOptions()


class MemoryMaintainOptions(Section):
    """``memory_maintain``: orphan linking and the canonical promotion backstop."""

    k: PositiveInt = option(3, "edges per orphan")
    min_score: Fraction = option(0.3, "bm25 floor relative to the row's own score")
    max_rows_per_run: PositiveInt = option(
        20000, "orphans examined per run", json_schema_extra={RUN_ALIAS: "max_rows"}
    )
    batch_size: PositiveInt = option(
        500, "orphans read and matched per round (writes are sized by time)"
    )
    full_round_days: NonNegativeInt = option(
        7, "days between full rounds; runs between link only new rows"
    )
    match_budget: NonNegativeInt = option(
        400, "FTS matches scored per orphan at most (0: all, exact)"
    )
    link: bool = option(
        True, "link orphan memories with graph edges (off: only the canonical backstop runs)"
    )
    backstop_max_rows: PositiveInt = option(
        20000, "canonical facts the backstop closes or promotes per run (the next run goes on)"
    )
    fts_merge_above_segments: NonNegativeInt = option(
        8,
        "before linking, merge an FTS5 index with more segments than this towards one (0: never)",
    )
    fts_merge_pages: PositiveInt = option(200, "pages per FTS5 merge step (one short transaction)")
    fts_merge_max_steps: PositiveInt = option(
        500, "FTS5 merge steps per index and run, at most (the next run goes on)"
    )


class EveningBatchOptions(Section):
    """``evening_batch``: consolidation, the summary repair and the maps."""

    consolidation_model: Literal["auto", "aaak"] = option(
        "auto", "auto: Mnemosyne's model chain if configured, else AAAK"
    )
    reclaim_stale_seconds: PositiveInt = option(3600, "claims older than this are reclaimed")
    stale_fraction: Fraction = option(0.10, "maps are stale past this share of changes")
    min_topic_size: PositiveInt = option(3, "the fewest memories a topic has")
    terms_per_memory: PositiveInt = option(8, "salient terms taken from each memory")
    max_topic_share: Fraction = option(
        0.2, "a term shared by more memories than this share names no topic"
    )
    label_similarity: Similarity = option(
        85, "rapidfuzz ratio (0..100) for merging near-identical labels"
    )
    seeds_per_topic: PositiveInt = option(5, "memories in a topic's seed list")
    block_match_similarity: Similarity = option(
        85, "rapidfuzz token-set ratio (0..100) of a memory-block entry and a superseded fact"
    )
    rebuild: bool = run_option(False, "rebuild the topic map from scratch")
    summary_repair: bool = option(True, "give summaries the summary tier and their sources' time")
    summary_tier: Literal[1, 2, 3] = option(3, "tier of a repaired summary (3: the lowest weight)")
    max_rows_per_summary: PositiveInt = option(10, "rows one consolidation summary may cover")
    max_sessions_per_night: PositiveInt | None = option(
        100, "sessions consolidated per run at most, the oldest first (none: no limit)"
    )
    if_needed: bool = run_option(
        False, "sleep only when an adaptive trigger holds (sleep section; --force sleeps anyway)"
    )
    scheduled_if_needed: bool = option(
        False,
        "the scheduled run (cron, Hermes, systemd, Kubernetes) passes --if-needed; reinstall the "
        "schedule after changing it",
    )


class BridgeDrainOptions(Section):
    """``bridge_drain``: the spool's limits."""

    max_item_bytes: PositiveInt = option(32 * 1024, "cap on an item's content (UTF-8 bytes)")
    max_file_bytes: PositiveInt = option(16 * 1024 * 1024, "bigger files are rejected whole")
    default_session: str = option("bridge", "session_id of items that give none")
    agent_share: Fraction = option(0.5, "share of wall time left for the live agent")


class RetrievalEvalOptions(Section):
    """``retrieval_eval``: the suite, the baseline and how recall is run.

    Paths default to ``<state_dir>/eval/suite.jsonl`` and ``<state_dir>/eval/baseline.json``.
    """

    suite: str | None = option(
        None, "the eval suite (JSONL or YAML); default <state_dir>/eval/suite.jsonl"
    )
    baseline: str | None = option(
        None, "the baseline to compare with; default <state_dir>/eval/baseline.json"
    )
    engine: Literal["mnemosyne", "builtin"] = option(
        "mnemosyne", "recall engine: mnemosyne or builtin"
    )
    k: PositiveInt = option(10, "cutoff k (a case or the suite may set its own)")
    tolerance: Fraction = option(0.02, "allowed drop of every metric")
    tolerances: dict[Any, Any] = option({}, 'per metric: {"mrr": 0.05} or {"mrr@10": 0.05}')
    max_case_regressions: NonNegativeInt = option(0, "cases allowed to fail that passed")
    enhanced_recall: bool | None = option(
        None, "MNEMOSYNE_ENHANCED_RECALL; unset: as in the environment"
    )
    use_associative: bool = option(False, "recall_enhanced appends graph neighbours")
    cross_session: bool | None = option(
        None, "MNEMOSYNE_CROSS_SESSION for recall; unset: as Mnemosyne is configured"
    )
    profile: ProfileName = option(
        "auto",
        "hermes: what the Hermes plugin injects each turn (its own prefetch where it is installed, "
        "else the approximation); plain: Mnemosyne's recall with top k; hermes-approximate: the "
        "approximation always; auto: hermes when a Hermes home is found",
    )
    recall_options: dict[Any, Any] = option({}, "keyword arguments of Mnemosyne's recall")
    mnemosyne_environment: dict[Any, Any] = option({}, "extra MNEMOSYNE_* variables for recall")
    python: str | None = option(
        None,
        "the Python whose Mnemosyne the mnemosyne engine runs (an upgrade candidate's venv); "
        "unset: mnemo-ops' own",
    )
    allow_no_suite: bool = option(
        False,
        "no suite yet is not a failure: without a suite the run warns and exits 0 (default: it "
        "fails, exit 1, so a gate without a suite cannot pass)",
    )
    allow_suite_change: bool = run_option(False, "compare with a changed suite")
    ratchet: bool = run_option(False, "raise the baseline when better")
    write_baseline: str | None = run_option(None, "write a new baseline to this path")


class MonthlyMaintenanceOptions(Section):
    """``monthly_maintenance``: integrity checks and repairs."""

    unconfirmed_fact_age_days: PositiveInt = option(
        180, "flag unconfirmed canonical facts older than this"
    )
    claim_stale_hours: PositiveInt = option(
        6, "a sleep claim older than this without a summary is orphaned"
    )
    multi_valued_predicates: list[str] = option(
        [], "triple predicates that may hold several objects at once (never closed as conflicts)"
    )
    fts_merge_pages: PositiveInt = option(500, "pages per FTS5 'merge' step")
    fts_merge_max_steps: PositiveInt = option(200, "merge steps per table and run, at most")
    vacuum: bool = run_option(False, "also VACUUM (rewrites the file)")


class SelfReflectionOptions(Section):
    """``self_reflection``: the week's sessions into lessons."""

    window_days: PositiveInt = option(7, "sessions active in the last N days")
    idle_hours: NonNegativeNumber = option(2, "a session active more recently waits for next week")
    similarity: Similarity = option(85, "rapidfuzz ratio (0..100) at which a lesson matches one")
    use_model: bool = option(True, "false: always the deterministic extractor, even with a model")
    include_summaries: bool = option(
        True, "read Mnemosyne's episodic summaries of the sessions too"
    )
    hermes_sessions: bool = option(True, "read Hermes' session store ($HERMES_HOME/state.db) too")
    max_session_chars: PositiveInt = option(
        6000, "text of one session given to a reflection, at most"
    )
    batch_chars: PositiveInt = option(16000, "sessions per model prompt, by characters")
    max_lessons: PositiveInt = option(60, "lessons stored per run, at most")


class MemoryBlockMigrateOptions(Section):
    """``memory_block_migrate``: MEMORY.md and USER.md kept under their limits."""

    high_water: Fraction = option(0.8, "a block is worked on once it holds this share of its limit")
    low_water: Fraction = option(0.6, "entries move until the block is under this share")
    keep_patterns: list[str] = option(
        [], "regular expressions (Python re.search); an entry matching one never moves"
    )
    user_importance: Fraction = option(
        0.8,
        "importance of moved USER.md entries (0.7 or more: the canonical trigger promotes them)",
    )
    memory_importance: Fraction = option(0.7, "importance of moved MEMORY.md entries")
    recall_profile: Literal["hermes", "plain", "hermes-approximate"] = option(
        "hermes",
        "how a moved entry is recalled before it leaves the file: hermes, what the Hermes plugin "
        "injects each turn; plain, Mnemosyne's recall with retrieval_eval.k",
    )
    lock_wait_seconds: NonNegativeNumber = option(
        30, "wait this long for Hermes' <file>.lock, then leave the block to the next run"
    )
    max_rounds: PositiveInt = option(
        3, "store-and-recall rounds when some entries are not recalled"
    )

    @field_validator("keep_patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise PydanticCustomError(
                    "regex",
                    "holds a pattern that is not a regular expression: {pattern} ({error})",
                    {"pattern": repr(pattern), "error": str(error)},
                ) from None
        return patterns

    @model_validator(mode="after")
    def _water_marks(self) -> MemoryBlockMigrateOptions:
        if not self.low_water < self.high_water:
            raise PydanticCustomError(
                "cross_field",
                "low_water ({low}) must be below high_water ({high})",
                {"low": self.low_water, "high": self.high_water},
            )
        return self


JOB_SECTIONS: dict[str, type[Section]] = {
    "backup": BackupOptions,
    "nightly-selfcare": NightlySelfcareOptions,
    "memory-maintain": MemoryMaintainOptions,
    "evening-batch": EveningBatchOptions,
    "bridge-drain": BridgeDrainOptions,
    "retrieval-eval": RetrievalEvalOptions,
    "monthly-maintenance": MonthlyMaintenanceOptions,
    "self-reflection": SelfReflectionOptions,
    "memory-block-migrate": MemoryBlockMigrateOptions,
}
"""Every job, in schedule order, with the model of its options section (``memory_maintain``)."""

JOB_NAMES: tuple[str, ...] = tuple(JOB_SECTIONS)


def section_name(job: str) -> str:
    """The config section of `job`'s options (``memory-maintain`` -> ``memory_maintain``)."""
    return job.replace("-", "_")


class JobSchedule(Section):
    """``jobs.<job>``: when and whether a job runs, and who hears about it."""

    schedule: CronExpression | None = option(
        None, "cron expression overriding the manifest's (`jobs/<job>.yaml`)"
    )
    enabled: bool = option(True, "false: scheduled runs skip the job (--force still runs it)")
    timeout: PositiveInt | None = option(
        None, "seconds before the run is stopped (default: the manifest's)"
    )
    ping_url: str | None = option(None, "healthchecks URL: /start, success, /fail")


def _jobs_model() -> type[BaseModel]:
    fields: dict[str, Any] = {
        section_name(job): (JobSchedule, Field(default_factory=JobSchedule, alias=job))
        for job in JOB_NAMES
    }
    model = create_model("JobsOptions", __base__=Section, **fields)
    model.__doc__ = "``jobs``: one ``jobs.<job>`` section per job, by the job's name."
    return model


JobsOptions = _jobs_model()


def schedule_of(jobs: BaseModel, job: str) -> JobSchedule:
    """The ``jobs.<job>`` section of `job` (KeyError for a name that is not a job)."""
    if job not in JOB_SECTIONS:
        raise KeyError(f"no such job: {job}")
    return getattr(jobs, section_name(job))


def run_overrides_model(section: type[Section]) -> type[BaseModel]:
    """A model with the fields of `section`, each None unless given for this run.

    A job reads ``ctx.run_options.k`` to tell a value given for this run from the configured one
    (the eval's cutoff: the flag beats the suite, which beats the config).
    """
    cached = _OVERRIDES.get(section)
    if cached is None:
        fields = {
            name: (field.annotation | None, None) for name, field in section.model_fields.items()
        }
        cached = create_model(f"{section.__name__}ForThisRun", **fields)
        _OVERRIDES[section] = cached
    return cached


_OVERRIDES: dict[type[Section], type[BaseModel]] = {}
