"""``mnemo-ops topics``: the topic map and the seed map, with their freshness warnings (read-only)."""

from __future__ import annotations

import typer

from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.jobs.evening_batch.topics.report import collect


@handle_errors
def topics_command(
    limit: int = typer.Option(0, "--limit", help="Show only the N largest topics (0: all).", min=0),
) -> None:
    """Show the topic map and the seed map, with their freshness warnings."""
    data = collect(invocation_state().settings)
    if limit:
        data["topic_map"]["topics"] = data["topic_map"]["topics"][:limit]

    def text(console) -> None:
        topic_map, seed_map = data["topic_map"], data["seed_map"]
        if not topic_map["built_at"]:
            console.print("No topic map yet: run [bold]mnemo-ops run evening-batch[/].")
        else:
            console.print(
                f"[bold]topic map[/] built {topic_map['built_at']} ({topic_map['mode']}), "
                f"{len(topic_map['topics'])} topics shown, {topic_map['unclustered']} memories in no topic"
            )
            console.print(f"[bold]seed map[/] built {seed_map['built_at'] or 'never'}")
        for topic in topic_map["topics"]:
            console.print(
                f"\n[bold]{topic['label']}[/] ({topic['size']} memories): {', '.join(topic['terms'])}",
                markup=True,
                highlight=False,
            )
            for rank, seed in enumerate(seed_map["topics"].get(topic["label"], []), start=1):
                marker = " [canonical]" if seed["canonical"] else ""
                console.print(f"  {rank}. {seed['key']}{marker} {seed['preview']}", markup=False)
        for warning in data["warnings"]:
            invocation_state().err_console.print(
                f"mnemo-ops: {warning['severity']}: {warning['code']}: {warning['message']}",
                markup=False,
            )

    emit(data, text)


def register(app: typer.Typer) -> None:
    """Add the ``topics`` command."""
    app.command(
        "topics",
        help=(
            "Show the topic map (live memories clustered by salient terms) and the seed map (per topic, "
            "the memories the agent should see first), with freshness warnings: maps built on memories "
            "that have changed since, and memory-block entries of canonical facts since superseded. "
            "Read-only; evening-batch builds the maps.\n\n"
            "Exit codes: 0 shown (warnings allowed), 2 config or database problem.\n\n"
            "Example: mnemo-ops topics --limit 5"
        ),
    )(topics_command)
