"""Paths and options, resolved as flags > environment > YAML config file > Mnemosyne's own defaults.

The database is found the way Mnemosyne finds it: ``$MNEMOSYNE_DATA_DIR/mnemosyne.db``, else
``$HERMES_HOME/mnemosyne/data/mnemosyne.db`` with ``HERMES_HOME`` defaulting to ``~/.hermes``.
Our state dir defaults to a ``mnemo-ops`` folder beside Mnemosyne's ``data`` folder.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from croniter import croniter

from mnemo_ops.foundation.errors import ConfigError, UsageError

ENV_DB = "MNEMO_OPS_DB"
ENV_STATE_DIR = "MNEMO_OPS_STATE_DIR"
ENV_CONFIG = "MNEMO_OPS_CONFIG"


@dataclasses.dataclass(frozen=True)
class Option:
    """One option: its Python type(s), default, range check and help; the one definition that the
    config file, ``--option KEY=VALUE`` and the defaults all go through.

    ``per_run`` options exist only for one run (``-o KEY=VALUE``, or ``--KEY`` for a boolean), never
    in the config file; ``alias`` is an older ``--option`` name still accepted.
    """

    kind: type | tuple[type, ...]
    default: Any = None
    check: str | None = None  # "cron", "fraction" (0..1), "positive" (> 0), "non_negative" (>= 0),
    # "time_range" ("HH:MM-HH:MM")
    help: str = ""
    choices: tuple[Any, ...] | None = None
    item_kind: type | None = None  # for lists: the type of every item
    per_run: bool = False
    alias: str | None = None


def _job_section() -> dict[str, Option]:
    return {
        "schedule": Option(str, None, "cron", "cron expression overriding the manifest's"),
        "enabled": Option(
            bool, True, help="false: scheduled runs skip the job (--force still runs it)"
        ),
        "timeout": Option(int, None, "positive", "seconds before the run is stopped"),
        "ping_url": Option(str, None, help="healthchecks URL: /start, success, /fail"),
    }


JOB_NAMES = (
    "backup",
    "nightly-selfcare",
    "memory-maintain",
    "evening-batch",
    "bridge-drain",
    "retrieval-eval",
    "monthly-maintenance",
    "self-reflection",
    "memory-block-migrate",
)
"""Every job, in schedule order (each has a manifest in ``jobs/`` and an options section below)."""

# The whole configuration schema. The section of a job (its name with underscores) holds that job's
# options; a key not listed here is a configuration error (exit 2), so a typo never silently falls
# back to a default. Jobs read their options only through this schema (never a default of their own).
SCHEMA: dict[str, Any] = {
    "db": Option(str),
    "state_dir": Option(str),
    "hermes_home": Option(str),
    "memory_blocks_dir": Option(str),
    "owner": Option(str),
    "jobs": {name: _job_section() for name in JOB_NAMES},
    "monitoring": {
        "prometheus_textfile_dir": Option(str, help="node_exporter textfile collector folder"),
        "syslog": Option(bool, False, help="one line per run to the local syslog"),
    },
    "transactions": {
        # Every job's write transactions on the memory DB (database/transactions.py). The live
        # agent waits at most its 5 s busy timeout for the write lock; after one timeout Mnemosyne
        # keeps failing (docs/architecture.md), so these stay far below it.
        # 50 still: 15 gave memory-maintain at 100k rows an agent p99 of 2.2x instead of 4.1x its
        # p99 alone (3.15), but with it one CI run on 4.0 saw a capped memory-maintain pass 10
        # minutes beside the live writer (54 s alone, with 15 or 50); not yet understood (README).
        "target_ms": Option(
            int, 50, "positive", "a write transaction stops taking rows after this long"
        ),
        "max_ms": Option(int, 250, "positive", "the bound: a longer write transaction is reported"),
        "agent_share": Option(
            float, 0.5, "fraction", "after each commit, pause to leave the agent this share"
        ),
    },
    "disk": {
        # Free space kept for the live agent on the filesystems of the DB and of the checkpoints.
        "reserve_factor": Option(
            float, 2.0, "non_negative", "reserve = this x (database + its WAL), at least the floor"
        ),
        "reserve_floor_mb": Option(int, 256, "non_negative", "the smallest reserve, in MiB"),
    },
    "retrieval_eval": {
        # Paths default to <state_dir>/eval/suite.jsonl and <state_dir>/eval/baseline.json.
        "suite": Option(str, help="the eval suite (JSONL or YAML)"),
        "baseline": Option(str, help="the baseline to compare with"),
        "engine": Option(str, "mnemosyne", help="recall engine: mnemosyne or builtin"),
        "k": Option(int, 10, "positive", "cutoff k (a case or the suite may set its own)"),
        "tolerance": Option(float, 0.02, "fraction", "allowed drop of every metric"),
        "tolerances": Option(dict, {}, help='per metric: {"mrr": 0.05} or {"mrr@10": 0.05}'),
        "max_case_regressions": Option(int, 0, "non_negative", "cases allowed to fail that passed"),
        "enhanced_recall": Option(
            bool, help="MNEMOSYNE_ENHANCED_RECALL; unset: as in the environment"
        ),
        "use_associative": Option(bool, False, help="recall_enhanced appends graph neighbours"),
        "cross_session": Option(
            bool, help="MNEMOSYNE_CROSS_SESSION for recall; unset: as Mnemosyne is configured"
        ),
        "profile": Option(
            str,
            "auto",
            choices=("auto", "plain", "hermes"),
            help="hermes: what the Hermes plugin injects each turn; plain: Mnemosyne's "
            "recall with top k; auto: hermes when a Hermes home is found",
        ),
        "recall_options": Option(dict, {}, help="keyword arguments of Mnemosyne's recall"),
        "mnemosyne_environment": Option(dict, {}, help="extra MNEMOSYNE_* variables for recall"),
        "python": Option(
            str,
            help="the Python whose Mnemosyne the mnemosyne engine runs (an upgrade candidate's "
            "venv); unset: mnemo-ops' own",
        ),
        "allow_suite_change": Option(
            bool, False, per_run=True, help="compare with a changed suite"
        ),
        "ratchet": Option(bool, False, per_run=True, help="raise the baseline when better"),
        "write_baseline": Option(str, per_run=True, help="write a new baseline to this path"),
    },
    # The model layer (mnemo_ops/models): summaries, judgements and reflections come from this model
    # through the llm library when one is named, else from each task's deterministic fallback.
    "models": {
        "model": Option(
            str, None, help="llm model id (see `llm models`); unset: the deterministic fallbacks"
        ),
        "options": Option(dict, {}, help="the model's options (`llm models --options`)"),
        "calls_per_night": Option(
            int, 40, "non_negative", "model calls allowed per night, all jobs together"
        ),
        "seconds_per_night": Option(
            int, 900, "non_negative", "model time allowed per night, all jobs together"
        ),
        "timeout_seconds": Option(int, 120, "positive", "one model call is abandoned after this"),
        "remote": Option(
            bool,
            True,
            help="the model runs elsewhere, so private memories are withheld from it; "
            "false only for a model running on this machine",
        ),
        "send_private_to_remote": Option(
            bool, False, help="true: private memories may go to a remote model too (redacted)"
        ),
        "max_prompt_chars": Option(
            int, 24000, "positive", "evidence beyond this is withheld from one prompt"
        ),
    },
    "guard": {
        "enabled": Option(bool, True, help="false: guarded jobs change memories without the trial"),
        "probes": Option(int, 200, "positive", "known-item probes kept in state.db"),
        "recall_tolerance": Option(float, 0.01, "fraction", "allowed drop of recall@k"),
        "mrr_tolerance": Option(float, 0.01, "fraction", "allowed drop of MRR@k (and nDCG@k)"),
        "max_newly_failing": Option(
            int, 2, "non_negative", "probes (or eval cases) allowed to break"
        ),
        "eval_suite": Option(bool, True, help="also measure the eval suite when one is configured"),
    },
    "evening_batch": {
        "consolidation_model": Option(
            str,
            "auto",
            choices=("auto", "aaak"),
            help="auto: Mnemosyne's model chain if configured, else AAAK",
        ),
        "reclaim_stale_seconds": Option(
            int, 3600, "positive", "claims older than this are reclaimed"
        ),
        "stale_fraction": Option(
            float, 0.10, "fraction", "maps are stale past this share of changes"
        ),
        "min_topic_size": Option(int, 3, "positive"),
        "terms_per_memory": Option(int, 8, "positive"),
        "max_topic_share": Option(float, 0.2, "fraction"),
        "label_similarity": Option((int, float), 85, "positive"),
        "seeds_per_topic": Option(int, 5, "positive"),
        "block_match_similarity": Option((int, float), 85, "positive"),
        "rebuild": Option(bool, False, per_run=True, help="rebuild the topic map from scratch"),
        "summary_repair": Option(
            bool, True, help="give summaries the summary tier and their sources' time"
        ),
        "summary_tier": Option(
            int, 3, choices=(1, 2, 3), help="tier of a repaired summary (3: the lowest weight)"
        ),
        "max_rows_per_summary": Option(
            int, 10, "positive", "rows one consolidation summary may cover"
        ),
        "if_needed": Option(
            bool,
            False,
            per_run=True,
            help="sleep only when an adaptive trigger holds (sleep section; --force sleeps anyway)",
        ),
        "scheduled_if_needed": Option(
            bool,
            False,
            help="the scheduled run (cron, Hermes, systemd, Kubernetes) passes --if-needed; "
            "reinstall the schedule after changing it",
        ),
    },
    # The sleep stages of evening-batch (mnemo_ops/sleep/, README "Sleep stages").
    "sleep": {
        "enabled": Option(bool, True, help="false: evening-batch runs no sleep stage"),
        "retention_relationship": Option(float, 0.998, "fraction", "daily retention r"),
        "retention_preference": Option(float, 0.995, "fraction", "daily retention r"),
        "retention_fact": Option(float, 0.99, "fraction", "daily retention r"),
        "retention_insight": Option(float, 0.97, "fraction", "daily retention r"),
        "retention_event": Option(float, 0.95, "fraction", "daily retention r"),
        "grace_days": Option((int, float), 1, "non_negative", "days before decay starts"),
        "confirmation_similarity": Option(
            (int, float), 93, "positive", "rapidfuzz ratio (0..100) of a restatement"
        ),
        "reinforcement_rows_per_night": Option(
            int, 20000, "positive", "memories checked for restatements per night"
        ),
        "forgetting": Option(bool, True, help="false: nothing is archived"),
        "archive_after_days": Option(
            (int, float), 14, "non_negative", "a memory younger than this is never archived"
        ),
        "archive_utility": Option(
            float, 0.1, "fraction", "archive candidates below this utility are archived"
        ),
        "max_archived_per_night": Option(int, 50, "non_negative", "archived memories per night"),
        "protect_eval_answers": Option(
            bool, True, help="never archive a memory the eval suite names as an answer"
        ),
        "hebbian_rate": Option(float, 0.1, "fraction", "eta: gain of a co-active edge"),
        "downscale": Option(float, 0.8, "fraction", "alpha: our edges' weights times this nightly"),
        "edge_floor": Option(float, 0.05, "fraction", "no edge of ours falls below this weight"),
        "quiet_hours": Option(
            str,
            "02:00-05:00",
            "time_range",
            help="HH:MM-HH:MM local time when --if-needed may sleep on time",
        ),
        "hours_between_sleeps": Option(
            (int, float), 20, "non_negative", "hours since the last sleep for the time trigger"
        ),
        "entropy_threshold": Option(
            float, 0.9, "fraction", "normalised importance entropy of new memories"
        ),
        "entropy_min_memories": Option(
            int, 20, "positive", "fewer new memories than this never fire the entropy trigger"
        ),
        "contradiction_density": Option(
            float, 0.3, "fraction", "pending contradictions per edge that fire a sleep"
        ),
        # NREM fusion and REM association (sleep/nrem.py, sleep/rem.py, README "NREM", "REM").
        "nrem": Option(bool, True, help="false: no summaries are fused"),
        "nrem_min_prominence": Option(float, 0.05, "fraction", "candidates have at least this"),
        "nrem_max_prominence": Option(float, 0.8, "fraction", "candidates have less than this"),
        "nrem_min_cluster": Option(int, 3, "positive", "members a cluster needs at least"),
        "nrem_max_cluster": Option(int, 8, "positive", "members one summary covers at most"),
        "nrem_clusters_per_night": Option(int, 10, "non_negative", "summaries fused per night"),
        "max_summary_chars": Option(int, 600, "positive", "a summary is at most this long"),
        "summary_prominence_cap": Option(
            float, 0.6, "fraction", "a fused summary's prominence never exceeds this"
        ),
        "rem": Option(bool, True, help="false: no extends edges are added"),
        "rem_seeds": Option(int, 6, "non_negative", "seeds drawn per night"),
        "rem_seeds_per_kind": Option(int, 2, "positive", "seeds of one kind per night at most"),
        "rem_seed_noise": Option(
            (int, float), 0.5, "non_negative", "sigma of the seeds' Gaussian draw noise"
        ),
        "rem_hops": Option(int, 4, "positive", "hops of spreading activation"),
        "rem_decay": Option(float, 0.4, "fraction", "activation kept per hop"),
        "rem_noise": Option((int, float), 0.6, "non_negative", "sigma of each hop's noise"),
        "rem_candidates_per_seed": Option(int, 8, "non_negative", "pairs judged per seed"),
        "rem_min_score": Option(
            (int, float), 3, "positive", "a pair averaging this (1..5) gets an extends edge"
        ),
    },
    "memory_maintain": {
        "k": Option(int, 3, "positive", "edges per orphan"),
        "min_score": Option(float, 0.3, "fraction", "bm25 floor relative to the row's own score"),
        "max_rows_per_run": Option(
            int, 20000, "positive", "orphans examined per run", alias="max_rows"
        ),
        "batch_size": Option(
            int, 500, "positive", "orphans read and matched per round (writes are sized by time)"
        ),
        "full_round_days": Option(
            int, 7, "non_negative", "days between full rounds; runs between link only new rows"
        ),
        "match_budget": Option(
            int, 400, "non_negative", "FTS matches scored per orphan at most (0: all, exact)"
        ),
        "link": Option(
            bool,
            True,
            help="link orphan memories with graph edges (off: only the canonical backstop runs)",
        ),
        "backstop_max_rows": Option(
            int,
            20000,
            "positive",
            "canonical facts the backstop closes or promotes per run (the next run goes on)",
        ),
    },
    "backup": {
        "keep": Option(int, 7, "positive", "verified daily checkpoints kept"),
        "pre_write_keep": Option(int, 7, "positive", "verified pre-write checkpoints kept"),
        "reuse_minutes": Option(
            int, 10, "non_negative", "a pre-write checkpoint this recent is reused"
        ),
    },
    "bridge_drain": {
        "max_item_bytes": Option(
            int, 32 * 1024, "positive", "cap on an item's content (UTF-8 bytes)"
        ),
        "max_file_bytes": Option(
            int, 16 * 1024 * 1024, "positive", "bigger files are rejected whole"
        ),
        "default_session": Option(str, "bridge", help="session_id of items that give none"),
        "agent_share": Option(float, 0.5, "fraction", "share of wall time left for the live agent"),
    },
    "nightly_selfcare": {
        "memory_char_limit": Option(int, 2200, "positive", "Hermes memory_char_limit"),
        "user_char_limit": Option(int, 1375, "positive", "Hermes user_char_limit"),
        "memory_block_warn_fraction": Option(float, 0.8, "fraction"),
        "memory_block_stale_days": Option(int, 30, "positive"),
        "auth_expiry_warn_days": Option(int, 7, "positive"),
        "backup_warn_hours": Option(int, 26, "positive"),
        "backup_error_hours": Option(int, 72, "positive"),
        "overdue_grace_minutes": Option(int, 60, "non_negative"),
        "wal_warn_mb": Option(int, 256, "positive"),
        "free_disk_warn_mb": Option(int, 2048, "non_negative"),
        "free_disk_error_mb": Option(int, 512, "non_negative"),
        "staging": {
            "enabled": Option(bool, True),
            "queue_processed_days": Option(int, 30, "non_negative", "0 turns the rule off"),
            "reports_days": Option(int, 90, "non_negative", "0 turns the rule off"),
            "hermes_logs_days": Option(int, 30, "non_negative", "0 turns the rule off"),
            "extra_rules": Option(list, None, help="absolute root, file name pattern, age"),
        },
    },
    "monthly_maintenance": {
        "unconfirmed_fact_age_days": Option(int, 180, "positive"),
        "claim_stale_hours": Option(int, 6, "positive"),
        "multi_valued_predicates": Option(list, [], item_kind=str),
        "fts_merge_pages": Option(int, 500, "positive"),
        "fts_merge_max_steps": Option(int, 200, "positive"),
        "vacuum": Option(bool, False, per_run=True, help="also VACUUM (rewrites the file)"),
    },
    "self_reflection": {
        "window_days": Option(int, 7, "positive", "sessions active in the last N days"),
        "idle_hours": Option(
            (int, float), 2, "non_negative", "a session active more recently waits for next week"
        ),
        "similarity": Option(
            (int, float), 85, "positive", "rapidfuzz ratio (0..100) at which a lesson matches one"
        ),
        "use_model": Option(
            bool, True, help="false: always the deterministic extractor, even with a model"
        ),
        "include_summaries": Option(
            bool, True, help="read Mnemosyne's episodic summaries of the sessions too"
        ),
        "hermes_sessions": Option(
            bool, True, help="read Hermes' session store ($HERMES_HOME/state.db) too"
        ),
        "max_session_chars": Option(
            int, 6000, "positive", "text of one session given to a reflection, at most"
        ),
        "batch_chars": Option(int, 16000, "positive", "sessions per model prompt, by characters"),
        "max_lessons": Option(int, 60, "positive", "lessons stored per run, at most"),
    },
    "memory_block_migrate": {
        "high_water": Option(
            float, 0.8, "fraction", "a block is worked on once it holds this share of its limit"
        ),
        "low_water": Option(
            float, 0.6, "fraction", "entries move until the block is under this share"
        ),
        "keep_patterns": Option(
            list,
            [],
            item_kind=str,
            help="regular expressions (Python re.search); an entry matching one never moves",
        ),
        "user_importance": Option(
            float,
            0.8,
            "fraction",
            "importance of moved USER.md entries (0.7 or more: the canonical trigger promotes them)",
        ),
        "memory_importance": Option(
            float, 0.7, "fraction", "importance of moved MEMORY.md entries"
        ),
        "recall_profile": Option(
            str,
            "hermes",
            choices=("hermes", "plain"),
            help="how a moved entry is recalled before it leaves the file: hermes, what the "
            "Hermes plugin injects each turn; plain, Mnemosyne's recall with retrieval_eval.k",
        ),
        "lock_wait_seconds": Option(
            (int, float),
            30,
            "non_negative",
            "wait this long for Hermes' <file>.lock, then leave the block to the next run",
        ),
        "max_rounds": Option(
            int, 3, "positive", "store-and-recall rounds when some entries are not recalled"
        ),
    },
    # Where the jobs are scheduled (`mnemo-ops hermes|systemd|kubernetes ...`); all render from the
    # same manifests as `cron render`.
    "scheduling": {
        "hermes": {
            "deliver": Option(
                str,
                None,
                help="Hermes delivery target (local, origin, telegram:<chat>, ...); unset: each "
                "installed job keeps its own, a new one gets Hermes' default (local)",
            ),
            "lock_wait_seconds": Option(
                (int, float), 30, "non_negative", "wait this long for cron/.jobs.lock, then exit 75"
            ),
            "report_since": Option(
                str, "24h", help="the period of the morning report delivered after nightly-selfcare"
            ),
        },
        "systemd": {
            "randomized_delay_seconds": Option(
                int, 300, "non_negative", "RandomizedDelaySec of every timer"
            ),
            "nice": Option(int, 10, help="Nice= of the heavy jobs' services (-20..19)"),
            "idle_jobs": Option(
                list,
                [
                    "backup",
                    "memory-maintain",
                    "evening-batch",
                    "retrieval-eval",
                    "monthly-maintenance",
                    "self-reflection",
                ],
                item_kind=str,
                help="the heavy jobs: Nice= and IOSchedulingClass=idle",
            ),
        },
        "kubernetes": {
            "image": Option(
                str, "mnemo-ops:latest", help="container image with mnemo-ops installed"
            ),
            "namespace": Option(str, "default", help="namespace of the CronJobs"),
            "claim": Option(str, None, help="PersistentVolumeClaim holding the Hermes home"),
            "mount_path": Option(str, "/hermes", help="where the claim is mounted (HERMES_HOME)"),
            "time_zone": Option(
                str, None, help="CronJob spec.timeZone (unset: the controller's, usually UTC)"
            ),
            "starting_deadline_seconds": Option(
                int, 600, "positive", "a run that cannot start this late is skipped"
            ),
            "successful_jobs_history_limit": Option(int, 3, "non_negative"),
            "failed_jobs_history_limit": Option(int, 3, "non_negative"),
        },
    },
}


def job_section(job: str) -> str:
    """The config section of `job`'s options (``memory-maintain`` -> ``memory_maintain``)."""
    return job.replace("-", "_")


def _default_hermes_home(environ: dict[str, str]) -> Path:
    """HERMES_HOME, else ~/.hermes (HOME from the environment, as Mnemosyne does)."""
    if environ.get("HERMES_HOME"):
        return Path(environ["HERMES_HOME"]).expanduser()
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".hermes"


def mnemosyne_default_db(environ: dict[str, str]) -> Path:
    """Return the DB path Mnemosyne itself would use with this environment."""
    if environ.get("MNEMOSYNE_DATA_DIR"):
        return Path(environ["MNEMOSYNE_DATA_DIR"]).expanduser() / "mnemosyne.db"
    return _default_hermes_home(environ) / "mnemosyne" / "data" / "mnemosyne.db"


def default_state_dir(db_path: Path) -> Path:
    """The ``mnemo-ops`` folder beside the folder that holds the DB (Mnemosyne's ``data`` folder)."""
    data_dir = db_path.parent
    parent = data_dir.parent
    if parent == data_dir:  # the DB sits at the filesystem root: stay inside its folder
        return data_dir / "mnemo-ops"
    return parent / "mnemo-ops"


def default_config_file(environ: dict[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/mnemo-ops/config.yaml`` (``~/.config`` by default); used only if it exists."""
    base = environ.get("XDG_CONFIG_HOME")
    if base:
        return Path(base) / "mnemo-ops" / "config.yaml"
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".config" / "mnemo-ops" / "config.yaml"


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, spec in schema.items():
        result[key] = _defaults(spec) if isinstance(spec, dict) else copy.deepcopy(spec.default)
    return result


def _type_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "a mapping",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


_TIME_RANGE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)")


def parse_time_range(text: str) -> tuple[int, int] | None:
    """``"02:00-05:00"`` -> (start, end) in minutes after midnight; None when not of that form.

    The end may come before the start (``"23:00-04:00"`` runs over midnight).
    """
    match = _TIME_RANGE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        return None
    hour_from, minute_from, hour_to, minute_to = (int(part) for part in match.groups())
    return hour_from * 60 + minute_from, hour_to * 60 + minute_to


def check_value(where: str, dotted: str, spec: Option, value: Any) -> Any:
    """Return `value` checked against `spec` (an int widened to float where a number is wanted).

    Raises ConfigError naming `where` (the config file, or the command line) and the key.
    """
    if value is None:
        return None
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    # bool is a subclass of int in Python; "keep: yes" must not pass as an integer.
    acceptable = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not acceptable and float in kinds and isinstance(value, int) and not isinstance(value, bool):
        value, acceptable = float(value), True
    if not acceptable:
        raise ConfigError(f"{where}: key '{dotted}' must be {_type_name(spec.kind)}, got {value!r}")
    if spec.check == "cron" and not croniter.is_valid(value):
        raise ConfigError(f"{where}: key '{dotted}' is not a valid cron expression: {value!r}")
    if spec.check == "positive" and value <= 0:
        raise ConfigError(f"{where}: key '{dotted}' must be greater than 0, got {value!r}")
    if spec.check == "non_negative" and value < 0:
        raise ConfigError(f"{where}: key '{dotted}' must be 0 or more, got {value!r}")
    if spec.check == "time_range" and parse_time_range(value) is None:
        raise ConfigError(
            f"{where}: key '{dotted}' must be a local time range HH:MM-HH:MM, got {value!r}"
        )
    if spec.check == "fraction" and not 0 <= value <= 1:
        raise ConfigError(f"{where}: key '{dotted}' must be between 0 and 1, got {value!r}")
    if spec.choices is not None and value not in spec.choices:
        choices = ", ".join(str(choice) for choice in spec.choices)
        raise ConfigError(f"{where}: key '{dotted}' must be one of {choices}, got {value!r}")
    if spec.item_kind is not None and not all(isinstance(item, spec.item_kind) for item in value):
        raise ConfigError(
            f"{where}: key '{dotted}' must be a list of {_type_name(spec.item_kind)}s"
        )
    return value


def parse_command_line_value(spec: Option, text: Any) -> Any:
    """Turn the text of ``--option KEY=VALUE`` into the option's type (YAML for lists and mappings).

    A value that is not text (a command that already parsed it) is passed through for checking.
    """
    if not isinstance(text, str):
        return text
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    if str in kinds:
        return text
    if bool in kinds:
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on", ""):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        return text
    if int in kinds or float in kinds:
        for convert in (int, float):
            if convert in kinds or (convert is int and float in kinds):
                try:
                    return convert(text)
                except ValueError:
                    continue
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _merge(
    file: Path, schema: dict[str, Any], target: dict[str, Any], data: Any, prefix: str
) -> None:
    if not isinstance(data, dict):
        where = f"key '{prefix}'" if prefix else "the top level"
        raise ConfigError(f"{file}: {where} must be a mapping, got {type(data).__name__}")
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in schema:
            raise ConfigError(f"{file}: unknown key '{dotted}'")
        spec = schema[key]
        if isinstance(spec, dict):
            if value is None:
                continue
            _merge(file, spec, target[key], value, dotted)
        elif spec.per_run:
            raise ConfigError(
                f"{file}: key '{dotted}' is for one run only: pass --option {key}=VALUE"
            )
        else:
            target[key] = check_value(str(file), dotted, spec, value)


def load_config_file(path: Path) -> dict[str, Any]:
    """Read and validate a YAML config file; return the full options tree with defaults filled in."""
    options = _defaults(SCHEMA)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read config file: {error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    if data is not None:
        _merge(path, SCHEMA, options, data, "")
    return options


@dataclasses.dataclass
class Settings:
    """Everything a command needs to know about where things are and how jobs are configured."""

    db_path: Path
    state_dir: Path
    config_file: Path | None
    hermes_home: Path
    memory_blocks_dir: Path
    owner: str
    options: dict[str, Any]
    sources: dict[str, str]

    def option(self, dotted: str) -> Any:
        """A config value by dotted name (``"backup.keep"``): the config file's, else the schema default.

        A name the schema does not define is a programming error (KeyError), never a silent None.
        """
        node: Any = self.options
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                raise KeyError(f"no such option: {dotted}")
            node = node[part]
        return node

    def job_option(self, job: str, key: str) -> Any:
        """A per-job setting from the ``jobs.<job>`` section (schedule, enabled, timeout, ping_url)."""
        return self.option(f"jobs.{job}.{key}")

    def section(self, job: str) -> dict[str, Any]:
        """The resolved options of `job` (a copy of its section)."""
        return copy.deepcopy(self.options.get(job_section(job), {}))

    def check_run_options(self, job: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """`job`'s ``--option KEY=VALUE`` values, typed and checked, by their schema names.

        Every key goes through the same schema as the config file: an unknown key, a value of the
        wrong type or out of range is a UsageError (exit 2) naming the key.
        """
        section_name = job_section(job)
        schema = SCHEMA.get(section_name, {})
        by_alias = {
            spec.alias: key
            for key, spec in schema.items()
            if isinstance(spec, Option) and spec.alias
        }
        checked: dict[str, Any] = {}
        for raw_key, raw_value in given.items():
            key = by_alias.get(raw_key, raw_key)
            spec = schema.get(key)
            if not isinstance(spec, Option):
                known = ", ".join(sorted(schema)) or "none"
                raise UsageError(f"{job} has no option {raw_key!r}; its options are: {known}")
            value = parse_command_line_value(spec, raw_value)
            try:
                checked[key] = check_value("--option", f"{section_name}.{key}", spec, value)
            except ConfigError as error:
                raise UsageError(error.message) from None
        return checked

    def with_run_options(self, job: str, checked: Mapping[str, Any]) -> Settings:
        """A copy of these settings whose `job` section holds the checked run options over the config."""
        options = copy.deepcopy(self.options)
        options.setdefault(job_section(job), {}).update(checked)
        return dataclasses.replace(self, options=options)

    @property
    def state_db_path(self) -> Path:
        """Our own SQLite file: the run ledger and every job's state."""
        return self.state_dir / "state.db"

    @property
    def backups_dir(self) -> Path:
        """Where checkpoints are written."""
        return self.state_dir / "backups"

    @property
    def queue_dir(self) -> Path:
        """The bridge spool (Maildir layout)."""
        return self.state_dir / "queue"

    @property
    def reports_dir(self) -> Path:
        """Where reports and maps are rendered."""
        return self.state_dir / "reports"

    @property
    def quarantine_dir(self) -> Path:
        """Where staged files go instead of being deleted."""
        return self.state_dir / "quarantine"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly summary of the resolved paths and where each came from."""
        return {
            "db": str(self.db_path),
            "state_dir": str(self.state_dir),
            "config_file": str(self.config_file) if self.config_file else None,
            "hermes_home": str(self.hermes_home),
            "memory_blocks_dir": str(self.memory_blocks_dir),
            "owner": self.owner,
            "sources": dict(self.sources),
        }


def load_settings(
    db: str | Path | None = None,
    state_dir: str | Path | None = None,
    config: str | Path | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    """Resolve settings: flags (the arguments) > environment > config file > Mnemosyne's defaults."""
    env = dict(os.environ if environ is None else environ)
    sources: dict[str, str] = {}

    config_file: Path | None
    if config:
        config_file, sources["config_file"] = Path(config).expanduser(), "flag"
    elif env.get(ENV_CONFIG):
        config_file, sources["config_file"] = Path(env[ENV_CONFIG]).expanduser(), "env"
    else:
        candidate = default_config_file(env)
        config_file = candidate if candidate.is_file() else None
        sources["config_file"] = "default" if config_file else "none"
    options = load_config_file(config_file) if config_file else _defaults(SCHEMA)

    def pick(name: str, flag: Any, env_name: str | None, fallback) -> Path:
        if flag:
            sources[name] = "flag"
            return Path(flag).expanduser()
        if env_name and env.get(env_name):
            sources[name] = "env"
            return Path(env[env_name]).expanduser()
        if options.get(name):
            sources[name] = "config"
            return Path(options[name]).expanduser()
        sources[name] = "default"
        return fallback()

    hermes_home = pick("hermes_home", None, None, lambda: _default_hermes_home(env))
    db_path = pick("db", db, ENV_DB, lambda: mnemosyne_default_db(env))
    resolved_state = pick(
        "state_dir", state_dir, ENV_STATE_DIR, lambda: default_state_dir(db_path.absolute())
    )
    blocks = pick("memory_blocks_dir", None, None, lambda: hermes_home / "memories")
    owner = options.get("owner") or env.get("MNEMOSYNE_DEFAULT_OWNER") or "default"
    sources["owner"] = (
        "config"
        if options.get("owner")
        else ("env" if env.get("MNEMOSYNE_DEFAULT_OWNER") else "default")
    )
    return Settings(
        db_path=db_path.absolute(),
        state_dir=resolved_state.absolute(),
        config_file=config_file.absolute() if config_file else None,
        hermes_home=hermes_home.absolute(),
        memory_blocks_dir=blocks.absolute(),
        owner=owner,
        options=options,
        sources=sources,
    )
