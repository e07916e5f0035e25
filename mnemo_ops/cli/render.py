"""Render results as rich text; the JSON form comes from the objects themselves."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from mnemo_ops.core.results import JobResult

_STATUS_STYLE = {
    "ok": "green",
    "dry-run": "cyan",
    "skipped": "yellow",
    "failed": "bold red",
    "interrupted": "bold yellow",
}
_SEVERITY_STYLE = {"info": "dim", "warning": "yellow", "error": "red", "critical": "bold red"}


def print_json(console: Console, data: Any) -> None:
    """Print exactly one JSON object on stdout (no rich markup, no wrapping)."""
    console.file.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    console.file.flush()


def render_result(console: Console, result: JobResult, verbose: bool = False) -> None:
    """Print a job result for a person: status line, changes, notable stats, warnings, error."""
    style = _STATUS_STYLE.get(result.status, "white")
    title = f"[{style}]{result.status}[/] {result.job}"
    if result.dry_run:
        title += " [cyan](dry run: nothing was changed)[/]"
    console.print(f"{title}  [dim]{result.duration_s:.1f}s  {result.db or ''}[/]")
    if result.checkpoint:
        console.print(f"  checkpoint: {result.checkpoint}")
    if result.changes:
        verb = "would change" if result.dry_run else "changes"
        table = Table(show_header=False, box=None, padding=(0, 2))
        for name, count in result.changes.items():
            table.add_row(f"  {verb}: {name}", str(count))
        console.print(table)
    elif result.status in ("ok", "dry-run"):
        console.print("  no changes" if not result.dry_run else "  nothing would change")
    listing = result.stats.get("listing") if isinstance(result.stats, dict) else None
    if isinstance(listing, dict) and listing.get("lines"):
        console.print(f"  {listing.get('title', 'items')}:", markup=False)
        for line in listing["lines"]:
            console.print(f"    {line}", markup=False, soft_wrap=True)
    if verbose and result.stats:
        for key, value in result.stats.items():
            console.print(f"  [dim]{key}:[/] {value}")
    for warning in result.warnings:
        severity = _SEVERITY_STYLE.get(warning.severity, "white")
        line = f"  [{severity}]{warning.severity}[/] {warning.code}: {warning.message}"
        if warning.fix:
            line += f" [dim](fix: {warning.fix})[/]"
        console.print(line)
    if result.error:
        console.print(f"  [bold red]error:[/] {result.error}")
