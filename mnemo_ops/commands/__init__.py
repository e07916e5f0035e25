"""CLI command modules. Each exposes ``register(app)`` adding its commands to the root typer app."""

COMMAND_MODULES = {
    "backup": "Checkpoints: list, verify, restore.",
    "trigger": "The canonical promotion trigger: install, uninstall, status.",
    "eval": "Retrieval eval: run, baseline, import.",
    "quarantine": "Files staged instead of deleted: list, restore.",
    "capture": "Drop one item into the bridge inbox.",
    "report": "The morning report.",
    "topics": "The topic map and the seed map.",
}
"""Command modules that jobs' issues add, with the help line shown while one is not written yet."""
