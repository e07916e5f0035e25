"""Paths and options, resolved as flags > environment > YAML config file > Mnemosyne's own defaults.

The database is found the way Mnemosyne finds it: ``$MNEMOSYNE_DATA_DIR/mnemosyne.db``, else
``$HERMES_HOME/mnemosyne/data/mnemosyne.db`` with ``HERMES_HOME`` defaulting to ``~/.hermes``.
Our state dir defaults to a ``mnemo-ops`` folder beside Mnemosyne's ``data`` folder.

Options are typed sections (``settings.sleep.nrem_max_cluster``), one pydantic model per config
section (``sections``, ``job_sections``); the config file, ``--option KEY=VALUE`` and the defaults
all go through them (``config``). Code reads options only as attributes of these models.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mnemo_ops.settings.config import (
    Config,
    check_run_options,
    file_values,
    json_schema,
    load_config_file,
    parse_config,
)
from mnemo_ops.settings.job_sections import (
    JOB_NAMES,
    JOB_SECTIONS,
    BackupOptions,
    BridgeDrainOptions,
    EveningBatchOptions,
    JobSchedule,
    JobsOptions,
    MemoryBlockMigrateOptions,
    MemoryMaintainOptions,
    MonthlyMaintenanceOptions,
    NightlySelfcareOptions,
    RetrievalEvalOptions,
    SelfReflectionOptions,
    schedule_of,
    section_name,
)
from mnemo_ops.settings.sections import (
    DiskOptions,
    GuardOptions,
    ModelOptions,
    MonitoringOptions,
    SchedulingOptions,
    Section,
    SleepOptions,
    TransactionOptions,
)
from mnemo_ops.settings.types import parse_time_range

__all__ = [
    "JOB_NAMES",
    "JOB_SECTIONS",
    "Config",
    "Settings",
    "default_config_file",
    "default_state_dir",
    "file_values",
    "json_schema",
    "load_config_file",
    "load_settings",
    "mnemosyne_default_db",
    "parse_config",
    "parse_time_range",
    "section_name",
]

ENV_DB = "MNEMO_OPS_DB"
ENV_STATE_DIR = "MNEMO_OPS_STATE_DIR"
ENV_CONFIG = "MNEMO_OPS_CONFIG"


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


class StatePath:
    """A path inside the state dir, read as an attribute of Settings (``settings.queue_dir``)."""

    def __init__(self, name: str, doc: str):
        self.name = name
        self.__doc__ = doc

    def __get__(self, settings: Settings | None, owner: type) -> Any:
        if settings is None:
            return self
        return settings.state_dir / self.name


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a command needs to know about where things are and how jobs are configured.

    Each config section is an attribute (``settings.backup.keep``); ``config`` is the whole tree.
    """

    db_path: Path
    state_dir: Path
    config_file: Path | None
    hermes_home: Path
    memory_blocks_dir: Path
    owner: str
    config: Config
    sources: dict[str, str]
    live_db_path: Path | None = None
    """Set on the recall guard's trial settings: the live database the copy at `db_path` stands for."""

    @property
    def database_key(self) -> str:
        """The name of this database in state.db (a job's cursor, a ledger): the live database's
        path, also for a trial copy, so the job on the copy resumes where the live run would."""
        return str(self.live_db_path or self.db_path)

    def job(self, name: str) -> JobSchedule:
        """The ``jobs.<name>`` section (schedule, enabled, timeout, ping_url) of job `name`."""
        return schedule_of(self.config.jobs, name)

    def with_timeout(self, name: str, seconds: int) -> Settings:
        """These settings with job `name`'s timeout set to `seconds` for one run (``run --timeout``:
        a scheduler that stops scripts sooner than the job's own timeout)."""
        schedule = self.job(name).model_copy(update={"timeout": seconds})
        jobs = self.config.jobs.model_copy(update={section_name(name): schedule})
        return dataclasses.replace(self, config=self.config.model_copy(update={"jobs": jobs}))

    def check_run_options(
        self, job: str, given: dict[str, Any]
    ) -> tuple[Settings, Section, BaseModel]:
        """These settings with `job`'s ``--option`` values applied, its section and the overrides.

        The values are checked by the section's model, like the config file's (exit 2 naming the
        key); the overrides model holds each value given for this run, None for the others.
        """
        section, overrides = check_run_options(self.config, job, given)
        updated = self.config.model_copy(update={section_name(job): section})
        return dataclasses.replace(self, config=updated), section, overrides

    def updated(self, **sections: dict[str, Any]) -> Settings:
        """A copy with some keys of some sections replaced, checked like a config file's.

        ``settings.updated(guard={"enabled": False})``: for a trial copy, a test or a benchmark.
        """
        data = self.config.model_dump(by_alias=True)
        for name, values in sections.items():
            data[name] = {**data[name], **values}
        return dataclasses.replace(self, config=parse_config(data, "settings", run_options=True))

    @property
    def jobs(self) -> JobsOptions:
        """``jobs``: the per-job schedule sections (use `job` to get one by name)."""
        return self.config.jobs

    @property
    def monitoring(self) -> MonitoringOptions:
        """``monitoring``."""
        return self.config.monitoring

    @property
    def transactions(self) -> TransactionOptions:
        """``transactions``."""
        return self.config.transactions

    @property
    def disk(self) -> DiskOptions:
        """``disk``."""
        return self.config.disk

    @property
    def retrieval_eval(self) -> RetrievalEvalOptions:
        """``retrieval_eval``."""
        return self.config.retrieval_eval

    @property
    def models(self) -> ModelOptions:
        """``models``."""
        return self.config.models

    @property
    def guard(self) -> GuardOptions:
        """``guard``."""
        return self.config.guard

    @property
    def evening_batch(self) -> EveningBatchOptions:
        """``evening_batch``."""
        return self.config.evening_batch

    @property
    def sleep(self) -> SleepOptions:
        """``sleep``."""
        return self.config.sleep

    @property
    def memory_maintain(self) -> MemoryMaintainOptions:
        """``memory_maintain``."""
        return self.config.memory_maintain

    @property
    def backup(self) -> BackupOptions:
        """``backup``."""
        return self.config.backup

    @property
    def bridge_drain(self) -> BridgeDrainOptions:
        """``bridge_drain``."""
        return self.config.bridge_drain

    @property
    def nightly_selfcare(self) -> NightlySelfcareOptions:
        """``nightly_selfcare``."""
        return self.config.nightly_selfcare

    @property
    def monthly_maintenance(self) -> MonthlyMaintenanceOptions:
        """``monthly_maintenance``."""
        return self.config.monthly_maintenance

    @property
    def self_reflection(self) -> SelfReflectionOptions:
        """``self_reflection``."""
        return self.config.self_reflection

    @property
    def memory_block_migrate(self) -> MemoryBlockMigrateOptions:
        """``memory_block_migrate``."""
        return self.config.memory_block_migrate

    @property
    def scheduling(self) -> SchedulingOptions:
        """``scheduling``."""
        return self.config.scheduling

    state_db_path = StatePath(
        "state.db", "Our own SQLite file: the run ledger and every job's state."
    )
    backups_dir = StatePath("backups", "Where checkpoints are written.")
    queue_dir = StatePath("queue", "The bridge spool (Maildir layout).")
    reports_dir = StatePath("reports", "Where reports and maps are rendered.")
    quarantine_dir = StatePath("quarantine", "Where staged files go instead of being deleted.")

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
    options = load_config_file(config_file) if config_file else Config()

    def pick(name: str, flag: Any, env_name: str | None, fallback) -> Path:
        if flag:
            sources[name] = "flag"
            return Path(flag).expanduser()
        if env_name and env.get(env_name):
            sources[name] = "env"
            return Path(env[env_name]).expanduser()
        configured = getattr(options, name)
        if configured:
            sources[name] = "config"
            return Path(configured).expanduser()
        sources[name] = "default"
        return fallback()

    hermes_home = pick("hermes_home", None, None, lambda: _default_hermes_home(env))
    db_path = pick("db", db, ENV_DB, lambda: mnemosyne_default_db(env))
    resolved_state = pick(
        "state_dir", state_dir, ENV_STATE_DIR, lambda: default_state_dir(db_path.absolute())
    )
    blocks = pick("memory_blocks_dir", None, None, lambda: hermes_home / "memories")
    owner = options.owner or env.get("MNEMOSYNE_DEFAULT_OWNER") or "default"
    sources["owner"] = (
        "config" if options.owner else ("env" if env.get("MNEMOSYNE_DEFAULT_OWNER") else "default")
    )
    return Settings(
        db_path=db_path.absolute(),
        state_dir=resolved_state.absolute(),
        config_file=config_file.absolute() if config_file else None,
        hermes_home=hermes_home.absolute(),
        memory_blocks_dir=blocks.absolute(),
        owner=owner,
        config=options,
        sources=sources,
    )
