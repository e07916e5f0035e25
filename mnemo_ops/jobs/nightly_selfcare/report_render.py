"""The morning report rendered: plain text (a terminal or a chat message), markdown (the day's file
``<state_dir>/reports/YYYY-MM-DD.md``) or JSON (`Report.to_dict`).

`jobs/nightly_selfcare/report` builds the `Report`; this module only lays it out, and `write_report_file` is the
one write (atomic, 0600 in a 0700 folder).
"""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path
from typing import Any

from mnemo_ops.core.results import Severity
from mnemo_ops.foundation.clock import isoformat
from mnemo_ops.foundation.errors import UsageError
from mnemo_ops.foundation.private_files import ensure_private_dir, write_atomic
from mnemo_ops.jobs.nightly_selfcare.report import Report
from mnemo_ops.settings import Settings

FORMATS = ("text", "markdown", "json")


def _guard_lines(guard: dict[str, Any]) -> list[str]:
    if not guard.get("verdicts"):
        return ["no guarded run recorded yet"]
    lines = []
    for entry in guard["verdicts"]:
        figures = ", ".join(
            f"{name} {value:.3f} -> {entry['after'].get(name, 0):.3f}"
            for name, value in entry["before"].items()
        )
        # A trial that changed nothing is not measured: say so rather than show an empty list.
        if not figures:
            figures = "the trial changed nothing" if entry.get("unchanged") else "not measured"
        problems = f"; {'; '.join(entry['problems'])}" if entry["problems"] else ""
        lines.append(f"{entry['job']}: {entry['verdict']} ({entry['run_at']}; {figures}){problems}")
    trend = [
        f"{point['job']} {value:.3f}"
        for point in guard["trend"]
        for name, value in point["after"].items()
        if name.startswith("recall@")
    ]
    if trend:
        lines.append("probe recall after each of the last guarded runs: " + ", ".join(trend))
    return lines


def _memory_block_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    for name, size in (summary.get("blocks") or {}).items():
        if "chars" in size:
            lines.append(
                f"{name}: {size['chars']:,} of {size['limit']:,} characters ({size['percent']:.0f}%), "
                f"{size['entries']} entries"
            )
        else:
            lines.append(f"{name}: {size['unavailable']} (limit {size['limit']:,})")
    moved = summary.get("moved") or []
    if moved:
        by_block: dict[str, int] = {}
        for row in moved:
            by_block[row["block"]] = by_block.get(row["block"], 0) + 1
        counts = ", ".join(f"{name} {count}" for name, count in sorted(by_block.items()))
        lines.append(
            f"moved into Mnemosyne in the period: {len(moved)} entries "
            f"({sum(row['chars'] or 0 for row in moved):,} characters; {counts}); the files as "
            "they were: mnemo-ops quarantine list"
        )
        lines += [f"  {row['block']}: {row['preview']} ({row['chars']})" for row in moved[:10]]
    else:
        lines.append("nothing moved into Mnemosyne in the period")
    return lines


def _period_label(report: Report) -> str:
    hours = (report.generated_at - report.since).total_seconds() / 3600
    return f"last {hours:.0f} h" if hours < 48 else f"last {hours / 24:.0f} days"


def _headline(report: Report) -> str:
    counts = {
        severity: len([w for w in report.warnings if w["severity"] == severity])
        for severity in Severity
    }
    if not report.needs_attention:
        return "OK: nothing needs you"
    parts = [
        f"{counts[s]} {s}{'s' if counts[s] != 1 and s != 'critical' else ''}"
        for s in reversed(Severity)
        if counts[s] and s != "info"
    ]
    return f"{'ACTION NEEDED' if report.exit_code else 'ATTENTION'}: {', '.join(parts)}"


def _resolved_line(entry: dict[str, Any]) -> str:
    """One resolved warning: what it was, and when and by what it was resolved."""
    return (
        f"{entry['code']} ({entry['job']}, was {entry['severity']}): {entry['message']}; "
        f"resolved {entry['resolved_at']} ({entry['resolved_by']})"
    )


def _backup_line(backups: dict[str, Any]) -> str:
    newest = backups.get("newest_verified")
    if not newest:
        line = "no verified checkpoint"
    else:
        line = f"newest verified {newest['name']} ({backups['newest_age_hours']:.1f} h ago)"
    return f"{line}; {backups['checkpoints']} checkpoint(s), {len(backups['failed'])} failed"


def _quarantine_line(summary: dict[str, Any]) -> str:
    if not summary:
        return "nothing staged"
    return (
        f"{summary['staged_in_period']} file(s) ({summary['bytes_in_period']:,} bytes) staged in the period, "
        f"{summary['staged_total']} in all (mnemo-ops quarantine list)"
    )


def _metric_summary(trend: list[dict[str, Any]]) -> list[str]:
    if not trend:
        return ["no eval runs recorded"]
    lines = []
    first, last = trend[0]["metrics"], trend[-1]["metrics"]
    for metric, value in last.items():
        if not isinstance(value, (int, float)):
            continue
        before = first.get(metric)
        change = (
            f" ({value - before:+.3f} over {len(trend)} runs)"
            if isinstance(before, (int, float))
            else ""
        )
        lines.append(f"{metric} {value:.3f}{change}")
    lines.append(f"latest run {trend[-1]['run_at']}: {trend[-1]['status']}")
    return lines


def _misses_line(misses: dict[str, Any]) -> str:
    """The week's largest category of eval misses, and where to learn why."""
    if not misses:
        return "no eval run recorded its misses this week"
    largest = misses.get("largest")
    if not largest:
        return f"no case missed in the {misses['runs']} run(s) of the last {misses['days']} days"
    examples = ", ".join(largest.get("examples") or [])
    return (
        f"largest category of misses in the last {misses['days']} days: {largest['category']}, "
        f"{largest['missed']} missed case(s) over {largest['runs']} run(s) "
        f"({largest['latest_missed']} of {largest['cases']} in the latest"
        f"{': ' + examples if examples else ''}); why: {misses['explain']}"
    )


def _learned_lines(learned: list[dict[str, Any]]) -> list[str]:
    if not learned:
        return ["nothing new (self-reflection runs on Sundays at 23:00)"]
    return [
        f"{'new' if entry['new'] else 'confirmed'} {entry['kind']}: {entry['lesson']} "
        f"({entry['confirmations']}x, {entry['method']})"
        for entry in learned
    ]


def _growth_rows(growth: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for table, numbers in growth["tables"].items():
        change = "-" if numbers["change"] is None else f"{numbers['change']:+,}"
        rows.append((table, f"{numbers['now']:,}", change))
    return rows


def _interrupted_count(counts: dict[str, int]) -> str:
    """``", 1 interrupted"`` when a run was stopped by a signal in the period, else nothing."""
    return f", {counts['interrupted']} interrupted" if counts.get("interrupted") else ""


def render_text(report: Report) -> str:
    """Plain text for a terminal or a chat message (no markup)."""
    lines = [
        f"mnemo-ops morning report, {report.generated_at:%Y-%m-%d %H:%M} UTC ({_period_label(report)})",
        _headline(report),
        f"database: {report.db}",
        "",
    ]
    counts = report.run_counts
    lines.append(
        f"Runs: {counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped"
        + _interrupted_count(counts)
    )
    for run in report.runs:
        error = f"  ({run['error']})" if run["error"] and run["status"] != "ok" else ""
        lines.append(f"  {run['status']:<8} {run['job']:<22} {run['started_at']}{error}")
    lines.append("Overdue jobs:" + (" none" if not report.overdue else ""))
    for row in report.overdue:
        lines.append(
            f"  {row['job']}: missed {row['missed_slot']} (last success {row['last_success'] or 'never'})"
        )
    lines.append("Warnings:" + (" none" if not report.warnings else ""))
    for warning in report.warnings:
        lines.append(f"  {warning['severity'].upper():<8} {warning['code']}: {warning['message']}")
        if warning.get("fix"):
            lines.append(f"           fix: {warning['fix']}")
    if report.resolved:
        lines.append("Resolved in the period:")
        lines += [f"  RESOLVED {_resolved_line(entry)}" for entry in report.resolved]
    lines.append(f"Backups: {_backup_line(report.backups)}")
    lines.append(f"Quarantine: {_quarantine_line(report.quarantine)}")
    lines.append("Eval trend: " + "; ".join(_metric_summary(report.eval_trend)))
    lines.append(f"Eval misses: {_misses_line(report.eval_misses)}")
    lines.append("Recall guard:")
    lines += [f"  {line}" for line in _guard_lines(report.guard)]
    lines.append("Memory blocks:")
    lines += [f"  {line}" for line in _memory_block_lines(report.memory_blocks)]
    lines.append("Learned this week:")
    lines += [f"  {line}" for line in _learned_lines(report.learned)]
    baseline = report.growth["baseline_day"]
    lines.append(f"Memory growth (against {baseline or 'no record from a week ago yet'}):")
    for table, now_count, change in _growth_rows(report.growth):
        lines.append(f"  {table:<20} {now_count:>10}  {change}")
    return "\n".join(lines) + "\n"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """Markdown, as written to ``reports/YYYY-MM-DD.md``."""
    lines = [
        f"# mnemo-ops morning report, {report.generated_at:%Y-%m-%d}",
        "",
        f"**{_headline(report)}**  ",
        f"Generated {isoformat(report.generated_at)}, covering the "
        f"{_period_label(report)}. Database: `{report.db}`",
        "",
    ]
    counts = report.run_counts
    lines += [
        "## Runs",
        "",
        f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped"
        + _interrupted_count(counts),
        "",
    ]
    if report.runs:
        lines += ["| job | status | started | error |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {run['job']} | {run['status']} | {run['started_at']} | {_cell(run['error'] or '')} |"
            for run in report.runs
        ]
        lines.append("")
    lines += ["## Overdue jobs", ""]
    lines += [
        f"- **{row['job']}** missed {row['missed_slot']} (last success {row['last_success'] or 'never'})"
        for row in report.overdue
    ] or ["None."]
    lines += ["", "## Warnings", ""]
    if report.warnings:
        lines += ["| severity | code | message | fix |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {w['severity']} | `{w['code']}` | {_cell(w['message'])} | "
            f"{'`' + _cell(w['fix']) + '`' if w.get('fix') else ''} |"
            for w in report.warnings
        ]
    else:
        lines.append("None.")
    if report.resolved:
        lines += ["", "## Resolved in the period", ""]
        lines += [f"- {_cell(_resolved_line(entry))}" for entry in report.resolved]
    lines += [
        "",
        "## Backups",
        "",
        _backup_line(report.backups) + ".",
        "",
        "## Quarantine",
        "",
        _quarantine_line(report.quarantine) + ".",
        "",
        "## Eval trend",
        "",
    ]
    lines += [f"- {line}" for line in _metric_summary(report.eval_trend)]
    lines.append(f"- {_cell(_misses_line(report.eval_misses))}")
    lines += ["", "## Recall guard", ""]
    lines += [f"- {_cell(line)}" for line in _guard_lines(report.guard)]
    lines += ["", "## Memory blocks", ""]
    lines += [
        ("  " if line.startswith("  ") else "") + f"- {_cell(line.strip())}"
        for line in _memory_block_lines(report.memory_blocks)
    ]
    lines += ["", "## Learned this week", ""]
    lines += [f"- {_cell(line)}" for line in _learned_lines(report.learned)]
    baseline = report.growth["baseline_day"]
    lines += [
        "",
        "## Memory growth",
        "",
        f"Against {baseline or 'no record from a week ago yet'}.",
        "",
    ]
    rows = _growth_rows(report.growth)
    if rows:
        lines += ["| table | rows | change |", "| --- | ---: | ---: |"]
        lines += [f"| {table} | {count} | {change} |" for table, count, change in rows]
    return "\n".join(lines) + "\n"


def render(report: Report, format: str = "text") -> str:  # noqa: A002 (the public name the CLI uses)
    """Render the report as ``text``, ``markdown`` or ``json``."""
    if format == "text":
        return render_text(report)
    if format == "markdown":
        return render_markdown(report)
    if format == "json":
        return json.dumps(report.to_dict(), indent=2, default=str) + "\n"
    raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")


def report_path(settings: Settings, report: Report) -> Path:
    """``<state_dir>/reports/YYYY-MM-DD.md`` for the report's (UTC) day."""
    return settings.reports_dir / f"{report.generated_at.astimezone(UTC):%Y-%m-%d}.md"


def write_report_file(settings: Settings, report: Report) -> Path:
    """Write the markdown report atomically (0600 in a 0700 folder); return its path."""
    ensure_private_dir(settings.reports_dir)
    path = report_path(settings, report)
    write_atomic(path, render_markdown(report).encode("utf-8"))
    return path
