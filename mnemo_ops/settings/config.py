"""The whole configuration as one model, and the three ways values come in: the YAML file,
``--option KEY=VALUE`` for one run, and the defaults.

Every way goes through the same models (``sections``, ``job_sections``); a bad value is one line
naming where it came from (the file, or ``--option``) and the dotted key, in the wording users
have seen since the first release ("key 'backup.keep' must be an integer, got 'three'").
"""

from __future__ import annotations

import difflib
import json
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from mnemo_ops.foundation.errors import ConfigError, UsageError
from mnemo_ops.settings.job_sections import (
    JOB_SECTIONS,
    BackupOptions,
    BridgeDrainOptions,
    EveningBatchOptions,
    JobsOptions,
    MemoryBlockMigrateOptions,
    MemoryMaintainOptions,
    MonthlyMaintenanceOptions,
    NightlySelfcareOptions,
    RetrievalEvalOptions,
    SelfReflectionOptions,
    section_name,
)
from mnemo_ops.settings.messages import base_types, is_model, validation_message
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
from mnemo_ops.settings.types import is_run_only, run_alias


class Config(Section):
    """Everything a config file may say (``mnemo-ops config schema`` prints it as JSON Schema)."""

    db: str | None = Field(None, description="the Mnemosyne database (see Paths)")
    state_dir: str | None = Field(None, description="mnemo-ops' state folder (see Paths)")
    hermes_home: str | None = Field(None, description="the Hermes home (see Paths)")
    memory_blocks_dir: str | None = Field(
        None, description="the folder of MEMORY.md and USER.md (default `<hermes_home>/memories`)"
    )
    owner: str | None = Field(
        None,
        description="canonical owner of promoted facts and lessons (else "
        "`MNEMOSYNE_DEFAULT_OWNER`, else `default`)",
    )
    jobs: JobsOptions = Field(default_factory=JobsOptions)
    monitoring: MonitoringOptions = MonitoringOptions()
    transactions: TransactionOptions = TransactionOptions()
    disk: DiskOptions = DiskOptions()
    retrieval_eval: RetrievalEvalOptions = RetrievalEvalOptions()
    models: ModelOptions = ModelOptions()
    guard: GuardOptions = GuardOptions()
    evening_batch: EveningBatchOptions = EveningBatchOptions()
    sleep: SleepOptions = SleepOptions()
    memory_maintain: MemoryMaintainOptions = MemoryMaintainOptions()
    backup: BackupOptions = BackupOptions()
    bridge_drain: BridgeDrainOptions = BridgeDrainOptions()
    nightly_selfcare: NightlySelfcareOptions = NightlySelfcareOptions()
    monthly_maintenance: MonthlyMaintenanceOptions = MonthlyMaintenanceOptions()
    self_reflection: SelfReflectionOptions = SelfReflectionOptions()
    memory_block_migrate: MemoryBlockMigrateOptions = MemoryBlockMigrateOptions()
    scheduling: SchedulingOptions = SchedulingOptions()


def _refuse_run_only(file: Path, model: type[BaseModel], data: Any, prefix: str) -> None:
    """A per-run option in the file is refused with the way to pass it."""
    if not isinstance(data, dict):
        return
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            continue
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if is_run_only(field):
            raise ConfigError(
                f"{file}: key '{dotted}' is for one run only: pass --option {key}=VALUE"
            )
        nested = [kind for kind in base_types(field.annotation) if is_model(kind)]
        if nested:
            _refuse_run_only(file, nested[0], value, dotted)


def _without_nulls(data: Any) -> Any:
    """A key given no value (``keep:``) means the default, as a missing key does."""
    if isinstance(data, dict):
        return {key: _without_nulls(value) for key, value in data.items() if value is not None}
    return data


def parse_config(data: Any, where: Path | str, run_options: bool = False) -> Config:
    """Validate a config mapping (already read from YAML) into a Config; ConfigError names `where`.

    A file may not hold per-run options; `run_options` allows them (settings copied in code, which
    carry the run's values).
    """
    if data is None:
        return Config()
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a mapping, got {type(data).__name__}")
    if not run_options:
        _refuse_run_only(Path(str(where)), Config, data, "")
    try:
        return Config.model_validate(_without_nulls(data))
    except ValidationError as error:
        raise ConfigError(validation_message(Config, error, str(where))) from None


def load_config_file(path: Path) -> Config:
    """Read and validate a YAML config file (safe_load); the defaults fill every key it omits."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: cannot read config file: it is a folder") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read config file: {error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    return parse_config(data, path)


def _from_text(annotation: Any, text: Any) -> Any:
    """Turn the text of ``--option KEY=VALUE`` into the field's type (YAML for lists and mappings).

    A value that is not text (a command that already parsed it) is passed through for checking;
    text that does not convert is passed through too, so the check names the wrong value.
    """
    if not isinstance(text, str):
        return text
    kinds = base_types(annotation)
    literal_values = [
        value
        for kind in kinds
        if typing.get_origin(kind) is Literal
        for value in typing.get_args(kind)
    ]
    if str in kinds or any(isinstance(value, str) for value in literal_values):
        return text
    if bool in kinds:
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on", ""):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        return text
    if int in kinds or float in kinds or literal_values:
        for convert in (int, float):
            if convert in kinds or (convert is int and (float in kinds or literal_values)):
                try:
                    return convert(text)
                except ValueError:
                    continue
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def check_run_options(config: Config, job: str, given: dict[str, Any]) -> tuple[Section, BaseModel]:
    """`job`'s section with the ``--option KEY=VALUE`` values over the config, and the overrides.

    Every key goes through the same model as the config file: an unknown key, a value of the wrong
    type or out of range, or a combination a cross-field rule refuses, is a UsageError (exit 2)
    naming the key.
    """
    from mnemo_ops.settings.job_sections import run_overrides_model

    name = section_name(job)
    model = JOB_SECTIONS[job]
    fields = model.model_fields
    by_alias = {run_alias(field): key for key, field in fields.items() if run_alias(field)}
    values: dict[str, Any] = {}
    for raw_key, raw_value in given.items():
        key = by_alias.get(raw_key, raw_key)
        field = fields.get(key)
        if field is None:
            known = ", ".join(sorted(fields)) or "none"
            close = difflib.get_close_matches(raw_key, [*fields, *by_alias], n=1, cutoff=0.6)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{job} has no option {raw_key!r}{guess}; its options are: {known}")
        values[key] = _from_text(field.annotation, raw_value)
    current: Section = getattr(config, name)
    wrapper = {name: {**current.model_dump(), **values}}
    try:
        checked = Config.model_validate(wrapper)
    except ValidationError as error:
        raise UsageError(validation_message(Config, error, "--option")) from None
    section = getattr(checked, name)
    overrides = run_overrides_model(model).model_validate(
        {key: getattr(section, key) for key in values}
    )
    return section, overrides


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a config file (per-run options left out: the file refuses them)."""
    schema = Config.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mnemo-ops config.yaml"

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                for key in [key for key, value in properties.items() if _run_only_schema(value)]:
                    del properties[key]
                for value in properties.values():
                    value.pop("x-run-alias", None)
                    # A section's default is every key's: the keys' own defaults say it, and this
                    # copy would list the per-run options the file refuses.
                    if isinstance(value.get("default"), dict) and "$ref" in value:
                        del value["default"]
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    strip(schema)
    return schema


def _run_only_schema(node: Any) -> bool:
    return isinstance(node, dict) and bool(node.get("x-run-only"))


def file_values(config: Config) -> dict[str, Any]:
    """The options as a config file would hold them: the file's key names, no per-run option."""

    def values(model: BaseModel) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name, field in type(model).model_fields.items():
            if is_run_only(field):
                continue
            value = getattr(model, name)
            if isinstance(value, BaseModel):
                result[field.alias or name] = values(value)
            else:
                result[field.alias or name] = (
                    [
                        item.model_dump(mode="json") if isinstance(item, BaseModel) else item
                        for item in value
                    ]
                    if isinstance(value, list)
                    else value
                )
        return result

    return json.loads(json.dumps(values(config), default=str))
