"""``mnemo-ops config schema|show``: the config file's JSON Schema, and the values in effect."""

from __future__ import annotations

import json

import typer
import yaml

from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.settings import file_values, json_schema


@handle_errors
def schema_command() -> None:
    """Print the JSON Schema of config.yaml."""
    # Always JSON: the schema is the output, with or without --json.
    print(json.dumps(json_schema(), indent=2))


@handle_errors
def show_command() -> None:
    """Print the paths and every option as they are resolved."""
    settings = invocation_state().settings
    data = {
        "paths": settings.to_dict(),
        "options": file_values(settings.config),
    }

    def text(console) -> None:
        paths = data["paths"]
        for key in ("db", "state_dir", "config_file", "hermes_home", "memory_blocks_dir"):
            source = paths["sources"].get(key, "")
            console.print(f"{key}: {paths[key]}" + (f"  ({source})" if source else ""))
        console.print(f"owner: {paths['owner']}  ({paths['sources'].get('owner', '')})")
        console.print(_yaml(data["options"]), markup=False, highlight=False)

    emit(data, text)


def register(app: typer.Typer) -> None:
    """Add the ``config`` command group."""
    group = typer.Typer(
        help="The configuration: its JSON Schema and the resolved values.\n\n"
        "Example: mnemo-ops config show",
        no_args_is_help=True,
    )
    app.add_typer(group, name="config")

    group.command(
        "schema",
        help=(
            "Print the JSON Schema of config.yaml: every section and key with its type, default, "
            "range and help. Editors that read JSON Schema (VS Code's YAML extension, for one) "
            "check a config file against it as you type. Exit code: 0.\n\n"
            "Example: mnemo-ops config schema > ~/.config/mnemo-ops/config.schema.json"
        ),
    )(schema_command)

    group.command(
        "show",
        help=(
            "Print the paths and every option as they are resolved: flags over environment over "
            "the config file over the defaults, with where each path came from. Exit codes: 0 ok, "
            "2 the config file is bad (one line naming the file and the key).\n\n"
            "Example: mnemo-ops --config ./config.yaml config show --json"
        ),
    )(show_command)


def _yaml(options: dict) -> str:
    """The options as YAML text, in the file's own layout (so a part can be copied into it)."""
    return yaml.safe_dump(options, sort_keys=False, default_flow_style=False).rstrip()
