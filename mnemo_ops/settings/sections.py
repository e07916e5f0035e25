"""The config sections that are not one job's options: monitoring, transactions, disk, models, the
recall guard, the sleep stages and the schedulers.

One pydantic model per section. A model declares each key once: its type, default, range and help;
its cross-field rules are model validators here, never checks in the code that uses it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from mnemo_ops.settings.types import (
    Fraction,
    NonNegativeInt,
    NonNegativeNumber,
    PositiveInt,
    PositiveNumber,
    Similarity,
    TimeRange,
    option,
    parse_time_range,
)


class Section(BaseModel):
    """A config section: strict types (``keep: yes`` is not an integer), no unknown key, read-only."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class MonitoringOptions(Section):
    """``monitoring``: where each run is reported besides its result."""

    prometheus_textfile_dir: str | None = option(None, "node_exporter textfile collector folder")
    syslog: bool = option(False, "one line per run to the local syslog")


class TransactionOptions(Section):
    """``transactions``: every job's write transactions on the memory database.

    The live agent waits at most its 5 s busy timeout for the write lock, and after one timeout
    Mnemosyne keeps failing (docs/live-agent.md), so these stay far below it. ``target_ms`` keeps
    its default: a shorter target helped the agent's slowest writes on one Mnemosyne line, but on
    the other it made a capped memory-maintain far slower beside the live writer (not yet
    understood).
    """

    target_ms: PositiveInt = option(50, "a write transaction stops taking rows after this long")
    max_ms: PositiveInt = option(250, "the bound: a longer write transaction is reported")
    agent_share: Fraction = option(0.5, "after each commit, pause to leave the agent this share")


class DiskOptions(Section):
    """``disk``: free space kept for the live agent on the database's and the checkpoints' disks."""

    reserve_factor: NonNegativeNumber = option(
        2.0, "reserve = this x (database + its WAL), at least the floor"
    )
    reserve_floor_mb: NonNegativeInt = option(256, "the smallest reserve, in MiB")


class ModelOptions(Section):
    """``models``: summaries, judgements and reflections come from this model through the llm
    library when one is named, else from each task's deterministic fallback."""

    model: str | None = option(
        None, "llm model id (see `llm models`); unset: the deterministic fallbacks"
    )
    options: dict[Any, Any] = option({}, "the model's options (`llm models --options`)")
    calls_per_night: NonNegativeInt = option(40, "model calls allowed per night, all jobs together")
    seconds_per_night: NonNegativeInt = option(
        900, "model time allowed per night, all jobs together"
    )
    timeout_seconds: PositiveInt = option(120, "one model call is abandoned after this")
    remote: bool = option(
        True,
        "the model runs elsewhere, so private memories are withheld from it; false only for a "
        "model running on this machine",
    )
    send_private_to_remote: bool = option(
        False, "true: private memories may go to a remote model too (redacted)"
    )
    max_prompt_chars: PositiveInt = option(
        24000, "evidence beyond this is withheld from one prompt"
    )


class GuardOptions(Section):
    """``guard``: the recall guard every job that writes memories runs under."""

    enabled: bool = option(True, "false: guarded jobs change memories without the trial")
    probes: PositiveInt = option(200, "known-item probes kept in state.db")
    first_sample: NonNegativeInt = option(
        50,
        "probes measured first; the rest only when the first sample's verdict is not clear "
        "(0: every probe at once)",
    )
    recall_tolerance: Fraction = option(0.01, "allowed drop of recall@k")
    mrr_tolerance: Fraction = option(0.01, "allowed drop of MRR@k (and nDCG@k)")
    max_newly_failing: NonNegativeInt = option(2, "probes (or eval cases) allowed to break")
    eval_suite: bool = option(True, "also measure the eval suite when one is configured")
    max_cost_increase: NonNegativeNumber = option(
        0.25,
        "a change that raises the agent's per-turn recall cost (SQLite steps or Python calls) by "
        "more than this share, and by more than the unit's floor, is refused",
    )
    # The floors are a few milliseconds of work on these machines (docs/recall-guard.md): against
    # an agent turn of seconds that is noise, and on a small home any new memory adds that much.
    cost_floor_sqlite_steps: NonNegativeInt = option(
        250000, "a rise of fewer SQLite VM steps per turn than this is never refused"
    )
    cost_floor_python_calls: NonNegativeInt = option(
        100000, "a rise of fewer Python calls per turn than this is never refused"
    )


class SleepOptions(Section):
    """``sleep``: the sleep stages of evening-batch (docs/sleep-stages.md)."""

    enabled: bool = option(True, "false: evening-batch runs no sleep stage")
    retention_relationship: Fraction = option(0.998, "daily retention r of relationships")
    retention_preference: Fraction = option(0.995, "daily retention r of preferences")
    retention_fact: Fraction = option(0.99, "daily retention r of facts")
    retention_insight: Fraction = option(0.97, "daily retention r of insights")
    retention_event: Fraction = option(0.95, "daily retention r of events")
    grace_days: NonNegativeNumber = option(1, "days before decay starts")
    confirmation_similarity: Similarity = option(
        93, "rapidfuzz ratio (0..100) of a restatement (100: exact only)"
    )
    reinforcement_rows_per_night: PositiveInt = option(
        20000, "memories checked for restatements per night"
    )
    confirmation_edges: bool = option(
        False,
        "link each restatement to its original by a mnemo:confirms edge (the agent's recall pays a "
        "scan of every edge per candidate; see docs/sleep-stages.md)",
    )
    importance: bool = option(
        True, "false: no user statement's importance is raised (docs/sleep-stages.md)"
    )
    importance_raise_to: Annotated[float, Field(ge=0.65, le=1)] = option(
        0.7,
        "importance given to a user statement that proved worth keeping (0.65 or more: below, "
        "the Hermes plugin's cut drops it anyway)",
    )
    importance_rows_per_run: NonNegativeInt = option(1000, "importances raised per run at most")
    graduate: bool = option(
        False,
        "true: the owner's statements of fact become global rows every later conversation "
        "receives (docs/sleep-stages.md, graduation); the recall guard keeps in their chats the "
        "statements whose global rows would take a chat's own evidence out of the agent's lines",
    )
    graduate_per_night: NonNegativeInt = option(
        20, "statements made global per night at most (restatements merged do not count)"
    )
    graduate_max_rows: NonNegativeInt = option(
        200,
        "live graduated rows per owner at most: each is a candidate in every session's recall",
    )
    graduate_shared_home: bool = option(
        False,
        "true: graduate in a home several people write to as well (only rows stamped with the "
        "owner as author); false: a home with another author or a group chat graduates nothing",
    )
    forgetting: bool = option(True, "false: nothing is archived")
    archive_after_days: NonNegativeNumber = option(
        14, "a memory younger than this is never archived"
    )
    archive_utility: Fraction = option(0.1, "archive candidates below this utility are archived")
    max_archived_per_night: NonNegativeInt = option(50, "archived memories per night")
    protect_eval_answers: bool = option(
        True, "never archive a memory the eval suite names as an answer"
    )
    forget_keeps_facts: bool = option(
        True,
        "archive only chatter and rows whose facts a current row holds (docs/sleep-stages.md); "
        "false: any old, unused row (the recall guard still counts a lost fact)",
    )
    hebbian_rate: Fraction = option(0.1, "eta: gain of a co-active edge")
    downscale: Fraction = option(0.8, "alpha: our edges' weights times this nightly")
    edge_floor: Fraction = option(0.05, "no edge of ours falls below this weight")
    quiet_hours: TimeRange = option(
        "02:00-05:00", "local time when `--if-needed` may sleep on time"
    )
    hours_between_sleeps: NonNegativeNumber = option(
        20, "hours since the last sleep for the time trigger"
    )
    entropy_threshold: Fraction = option(0.9, "normalised importance entropy of new memories")
    entropy_min_memories: PositiveInt = option(
        20, "fewer new memories than this never fire the entropy trigger"
    )
    contradiction_density: Fraction = option(
        0.3, "pending contradictions per edge that fire a sleep"
    )
    nrem: bool = option(True, "false: no summaries are fused")
    nrem_min_prominence: Fraction = option(0.05, "candidates have at least this")
    nrem_max_prominence: Fraction = option(0.8, "candidates have less than this")
    # A cluster of one is not a fusion: below 2 members a rule meant the stage clamped it to 2.
    nrem_min_cluster: PositiveInt = option(3, "members a cluster needs at least (2 or more)")
    nrem_max_cluster: PositiveInt = option(8, "members one summary covers at most (2 or more)")
    nrem_clusters_per_night: NonNegativeInt = option(10, "summaries fused per night")
    max_summary_chars: PositiveInt = option(600, "a summary is at most this long")
    summary_prominence_cap: Fraction = option(
        0.6, "a fused summary's prominence never exceeds this"
    )
    rem: bool = option(True, "false: no extends edges are added")
    rem_seeds: NonNegativeInt = option(6, "seeds drawn per night")
    rem_seeds_per_kind: PositiveInt = option(2, "seeds of one kind per night at most")
    rem_seed_noise: NonNegativeNumber = option(0.5, "sigma of the seeds' Gaussian draw noise")
    rem_hops: PositiveInt = option(4, "hops of spreading activation")
    rem_decay: Fraction = option(0.4, "activation kept per hop")
    rem_noise: NonNegativeNumber = option(0.6, "sigma of each hop's noise")
    rem_candidates_per_seed: NonNegativeInt = option(8, "pairs judged per seed")
    rem_min_score: PositiveNumber = option(
        3, "a pair averaging this (1..5) gets an extends edge", le=5
    )

    @model_validator(mode="after")
    def _prominence_band(self) -> SleepOptions:
        if not self.nrem_min_prominence < self.nrem_max_prominence:
            raise PydanticCustomError(
                "cross_field",
                "nrem_min_prominence ({low}) must be below nrem_max_prominence ({high})",
                {"low": self.nrem_min_prominence, "high": self.nrem_max_prominence},
            )
        return self

    @property
    def quiet_hours_minutes(self) -> tuple[int, int]:
        """``quiet_hours`` as (start, end) minutes after local midnight."""
        parsed = parse_time_range(self.quiet_hours)
        assert parsed is not None  # checked by the TimeRange type
        return parsed

    @property
    def nrem_cluster_bounds(self) -> tuple[int, int]:
        """(fewest, most) members of one fusion: never below two, whatever the file says."""
        return max(2, self.nrem_min_cluster), max(2, self.nrem_max_cluster)


JobNameList = list[str]


class HermesSchedulingOptions(Section):
    """``scheduling.hermes``: the jobs as Hermes' own script-only cron jobs."""

    deliver: str | None = option(
        None,
        "Hermes delivery target (local, origin, telegram:<chat>, ...); unset: each installed job "
        "keeps its own, a new one gets Hermes' default (local)",
    )
    lock_wait_seconds: NonNegativeNumber = option(
        30, "wait this long for cron/.jobs.lock, then exit 75"
    )
    report_since: str = option(
        "24h", "the period of the morning report delivered after nightly-selfcare"
    )


HEAVY_JOBS = (
    "backup",
    "memory-maintain",
    "evening-batch",
    "retrieval-eval",
    "monthly-maintenance",
    "self-reflection",
)


class SystemdSchedulingOptions(Section):
    """``scheduling.systemd``: a service and a timer per job."""

    randomized_delay_seconds: NonNegativeInt = option(300, "RandomizedDelaySec of every timer")
    nice: int = option(10, "Nice= of the heavy jobs' services (-20..19)", ge=-20, le=19)
    idle_jobs: JobNameList = option(
        list(HEAVY_JOBS), "the heavy jobs: Nice= and IOSchedulingClass=idle"
    )


class KubernetesSchedulingOptions(Section):
    """``scheduling.kubernetes``: CronJobs for an agent whose Hermes home is on a volume."""

    image: str = option("mnemo-ops:latest", "container image with mnemo-ops installed")
    namespace: str = option("default", "namespace of the CronJobs")
    claim: str | None = option(None, "PersistentVolumeClaim holding the Hermes home")
    mount_path: str = option("/hermes", "where the claim is mounted (HERMES_HOME)")
    time_zone: str | None = option(
        None, "CronJob spec.timeZone (unset: the controller's, usually UTC)"
    )
    starting_deadline_seconds: PositiveInt = option(
        600, "a run that cannot start this late is skipped"
    )
    successful_jobs_history_limit: NonNegativeInt = option(3, "finished Jobs kept per CronJob")
    failed_jobs_history_limit: NonNegativeInt = option(3, "failed Jobs kept per CronJob")


class SchedulingOptions(Section):
    """``scheduling``: where the jobs are scheduled besides crontab; all render from the manifests."""

    hermes: HermesSchedulingOptions = HermesSchedulingOptions()
    systemd: SystemdSchedulingOptions = SystemdSchedulingOptions()
    kubernetes: KubernetesSchedulingOptions = KubernetesSchedulingOptions()


ProfileName = Literal["auto", "plain", "hermes", "hermes-approximate"]
