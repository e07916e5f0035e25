"""``mnemo-ops why QUESTION``: what the agent would be given for one question, and why not more.

The explanation is made by ``evaluation.explain.explain_question`` (on a snapshot copy); this
module renders it: the injected lines, every candidate with its score parts and outcome, and for
each ``--expect`` the reason it is missing.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mnemo_ops.cli.common import emit, handle_errors, invocation_state
from mnemo_ops.cli.eval_explain import STYLES, render_header
from mnemo_ops.core.progress import ProgressReporter
from mnemo_ops.evaluation.explain import MISMATCH, QuestionExplanation, explain_question
from mnemo_ops.mnemosyne.plugin_prefetch import NEW_CONVERSATION_KEY

SCORE_COLUMNS = ("final", "keyword", "fts", "dense", "importance", "recency_decay")
"""Mnemosyne's score parts, as its ``recall(explain=True)`` names them."""


def _number(value) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else ""


def _outcome(candidate) -> str:
    if candidate.outcome == "injected":
        return f"injected, line {candidate.line}"
    if candidate.outcome == "ranked-out":
        cut = "near-duplicate" if candidate.reason == "near-duplicate" else "past the top 5"
        return f"ranked out, rank {candidate.rank} ({cut})"
    return f"filtered: {candidate.reason}"


def render_question(console: Console, explained: QuestionExplanation) -> None:
    """The injected lines, each candidate's score parts and outcome, the expected memories."""
    data = explained.to_dict()
    query = explained.explanation
    render_header(console, data)
    where = query.recalled_in or "every session"
    latest = ""
    if query.session_key == NEW_CONVERSATION_KEY:
        latest = " (a new conversation: the plugin wrote no session here)"
    elif query.session is None and query.session_key:
        latest = " (the latest conversation)"
    console.print(f"question {query.query!r}, recalled in {where}{latest}", markup=False)
    if query.recall_query != query.query:
        console.print(f"  the plugin asked recall for {query.recall_query!r}", markup=False)
    for note in query.notes:
        style = "bold red" if note.get("code") == MISMATCH else "yellow"
        console.print(f"[{style}]{escape(str(note.get('code')))}:[/] {escape(note['message'])}")
    console.print(
        f"injected: {len(query.injected)} line(s), {query.injected_chars:,} characters"
        if query.injected
        else "injected: nothing"
    )
    for line, item in enumerate(query.injected, start=1):
        tag = " [canonical]" if item.get("canonical") else ""
        content = " ".join(str(item.get("content") or "").split())
        console.print(f"  {line}. {item.get('id')}{tag}  {content[:160]}", markup=False)
    if query.candidates:
        table = Table(box=None, padding=(0, 1), title="candidates", title_justify="left")
        for column in ("#", "id", *SCORE_COLUMNS, "signal", "sort", "outcome", "content"):
            table.add_column(
                column, justify="left" if column in ("id", "outcome", "content") else "right"
            )
        for candidate in query.candidates:
            scores = candidate.scores
            style = STYLES.get(candidate.outcome, "white")
            content = " ".join(candidate.content.split())
            table.add_row(
                str(candidate.recall_rank or "c"),
                escape(candidate.id or ""),
                *(_number(scores.get(name)) for name in SCORE_COLUMNS),
                _number(scores.get("signal")),
                _number(candidate.adjusted_score),
                f"[{style}]{escape(_outcome(candidate))}[/]",
                escape(content[:60]),
            )
        console.print(table)
        console.print(
            "[dim]#: rank in Mnemosyne's recall (c: a canonical fact the plugin appends); "
            "sort: the plugin's sort key; signal: its topical signal[/]"
        )
        for candidate in query.candidates:
            if candidate.outcome != "injected" and candidate.detail:
                console.print(
                    f"  {escape(candidate.id or '')}: {escape(candidate.detail)}", soft_wrap=True
                )
    for target in query.targets:
        console.print(
            f"expected {target.target!r} ({target.kind}): {target.sentence()}",
            markup=False,
            soft_wrap=True,
        )


@handle_errors
def why_command(
    question: str = typer.Argument(..., metavar="QUESTION", help="The question, as asked."),
    expect: list[str] = typer.Option(
        None,
        "--expect",
        "-e",
        help="A memory that should come back: its id, or a text it contains (repeatable).",
        metavar="ID|TEXT",
    ),
    session: str = typer.Option(
        None,
        "--session",
        help="The Hermes session key the question is asked in (telegram-42; default: the "
        "latest conversation).",
        metavar="KEY",
    ),
) -> None:
    """Explain what the agent would be given for QUESTION, and why each --expect is missing."""
    settings = invocation_state().settings
    with ProgressReporter(invocation_state().show_progress).bar("explaining", total=1) as bar:
        explained = explain_question(
            settings, question, expect or (), session, progress=bar.advance
        )
    emit(explained.to_dict(), lambda console: render_question(console, explained))
    if explained.explanation.mismatch:
        invocation_state().err_console.print(
            f"mnemo-ops: {MISMATCH}: the reproduction differed from the plugin's prefetch",
            markup=False,
        )
        raise typer.Exit(1)
    raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    """Add the ``why`` command."""
    app.command(
        "why",
        help=(
            "What the agent would be given for one question, on a snapshot copy: the lines the "
            "Hermes plugin's prefetch injects, every candidate it considered with Mnemosyne's "
            "score parts (recall with explain) and its outcome (injected, ranked out, filtered by "
            "which rule), and for each --expect (a memory id, or a text the memory contains) why "
            "it is missing. Without the plugin, the documented approximation is explained and the "
            "output says so.\n\n"
            "Exit codes: 0 explained, 1 the reproduction of the plugin's decision differed from "
            "its prefetch (explain-mismatch), 2 usage or database problem.\n\n"
            'Example: mnemo-ops why "Which reverse proxy do we run?" --expect nginx\n\n'
            'Example: mnemo-ops --json why "Where did Ines move?" --expect 3f9c0a1b2c3d4e5f '
            "--session telegram-42"
        ),
    )(why_command)
