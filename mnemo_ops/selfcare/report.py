"""The morning report: what ran, what is overdue, what needs a human (with the command that fixes it),
backups, the eval trend and memory growth. Built as an object, rendered as text, markdown or JSON.

Open warnings are those of the latest completed run of each job in the ledger (``runs.result_json``).
The findings that depend on the clock (overdue and failing jobs, backup freshness) are recomputed now,
replacing the ones the last nightly-selfcare run recorded, so the report is never stale about them.
Everything is read-only except `write_report_file`.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo_ops import database
from mnemo_ops.core import state
from mnemo_ops.core.results import JobResult, Severity, severity_rank
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import DatabaseError, UsageError
from mnemo_ops.foundation.private_files import ensure_private_dir, write_atomic
from mnemo_ops.guard import history as guard_history
from mnemo_ops.memory_blocks import entry_history
from mnemo_ops.memory_blocks.blocks import BLOCK_NAMES, Block, read_block
from mnemo_ops.memory_blocks.limits import block_limits
from mnemo_ops.reflection.learned import learned_since
from mnemo_ops.scheduling.job_table import job_table
from mnemo_ops.selfcare import quarantine, row_count_history
from mnemo_ops.selfcare.audits import code_prefixes, run_audit
from mnemo_ops.selfcare.audits.backups import backup_status
from mnemo_ops.settings import Settings

FORMATS = ("text", "markdown", "json")
LIVE_AUDITS = ("jobs", "backups")
"""Audits re-run for every report: their findings change with the clock alone."""
EVAL_TREND_RUNS = 7
LEARNED_DAYS = 7
""""Learned this week": the lessons self-reflection stored or confirmed in the last 7 days."""


@dataclasses.dataclass
class Report:
    """Everything the morning report shows."""

    generated_at: datetime
    since: datetime
    db: str
    runs: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    overdue: list[dict[str, Any]]
    warnings: list[dict[str, Any]]
    backups: dict[str, Any]
    eval_trend: list[dict[str, Any]]
    growth: dict[str, Any]
    quarantine: dict[str, Any] = dataclasses.field(default_factory=dict)
    guard: dict[str, Any] = dataclasses.field(default_factory=dict)
    memory_blocks: dict[str, Any] = dataclasses.field(default_factory=dict)
    learned: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def run_counts(self) -> dict[str, int]:
        """Runs in the period by status (ok, failed, skipped)."""
        counts = {"ok": 0, "failed": 0, "skipped": 0}
        for run in self.runs:
            counts[run["status"]] = counts.get(run["status"], 0) + 1
        return counts

    @property
    def worst_severity(self) -> str | None:
        """The highest severity among the open warnings (None when there are none)."""
        if not self.warnings:
            return None
        return max((warning["severity"] for warning in self.warnings), key=severity_rank)

    def at_least(self, severity: str) -> list[dict[str, Any]]:
        """The warnings at `severity` or above."""
        floor = severity_rank(severity)
        return [warning for warning in self.warnings if severity_rank(warning["severity"]) >= floor]

    @property
    def needs_attention(self) -> bool:
        """True when anything is at warning or above (``--quiet-if-ok`` prints nothing otherwise)."""
        return bool(self.at_least("warning"))

    @property
    def exit_code(self) -> int:
        """1 when anything is at error or above, else 0."""
        return 1 if self.at_least("error") else 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        by_severity = {
            severity: sum(1 for w in self.warnings if w["severity"] == severity)
            for severity in Severity
        }
        return {
            "generated_at": isoformat(self.generated_at),
            "since": isoformat(self.since),
            "db": self.db,
            "worst_severity": self.worst_severity,
            "needs_attention": self.needs_attention,
            "exit_code": self.exit_code,
            "warnings_by_severity": by_severity,
            "runs": {"counts": self.run_counts, "items": self.runs},
            "overdue": self.overdue,
            "warnings": self.warnings,
            "backups": self.backups,
            "eval_trend": self.eval_trend,
            "growth": self.growth,
            "quarantine": self.quarantine,
            "guard": self.guard,
            "memory_blocks": self.memory_blocks,
            "learned_this_week": self.learned,
            "jobs": self.jobs,
        }


def parse_period(text: str) -> timedelta:
    """``24h``, ``90m``, ``7d``, ``2w`` -> a timedelta; UsageError (exit 2) otherwise."""
    units = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    value, unit = text.strip()[:-1], text.strip()[-1:].lower()
    if unit not in units or not value.isdigit() or int(value) <= 0:
        raise UsageError(f"--since takes a period such as 24h, 90m, 7d or 2w, got {text!r}")
    return timedelta(**{units[unit]: int(value)})


def _latest_results(ledger) -> dict[str, dict[str, Any]]:
    """The result_json of the latest completed (ok or failed) run of each job."""
    if ledger is None or "runs" not in ledger.table_names():
        return {}
    latest = {}
    for row in ledger.query(
        "SELECT job, result_json FROM runs WHERE id IN (SELECT max(id) FROM runs "
        "WHERE dry_run = 0 AND status IN ('ok', 'failed') GROUP BY job)"
    ):
        try:
            latest[row["job"]] = json.loads(row["result_json"] or "{}")
        except ValueError:
            latest[row["job"]] = {}
    return latest


def _open_warnings(
    settings: Settings, ledger, current: JobResult | None, now: datetime
) -> list[dict[str, Any]]:
    results = _latest_results(ledger)
    if current is not None:
        results[current.job] = current.to_dict()
    live_prefixes = tuple(prefix for name in LIVE_AUDITS for prefix in code_prefixes(name))
    warnings, seen = [], set()
    for job, result in sorted(results.items()):
        for warning in result.get("warnings") or []:
            if not isinstance(warning, dict) or warning.get("severity") not in set(Severity):
                continue
            if str(warning.get("code", "")).startswith(live_prefixes):
                continue
            key = (warning.get("code"), warning.get("message"))
            if key not in seen:
                seen.add(key)
                warnings.append(
                    {
                        "job": job,
                        "code": warning.get("code"),
                        "severity": warning["severity"],
                        "message": warning.get("message"),
                        "fix": warning.get("fix"),
                    }
                )
    for name in LIVE_AUDITS:
        for warning in run_audit(name, settings, now).warnings:
            warnings.append({"job": "report", **warning.to_dict(), "fix": warning.fix})
    return sorted(
        warnings, key=lambda w: (-severity_rank(w["severity"]), w["job"], w["code"] or "")
    )


def _eval_trend(ledger) -> list[dict[str, Any]]:
    """The latest eval_history rows (oldest first); [] when retrieval-eval never ran."""
    if ledger is None or "eval_history" not in ledger.table_names():
        return []
    rows = list(
        ledger.query(
            "SELECT * FROM eval_history ORDER BY run_at DESC, id DESC LIMIT ?", [EVAL_TREND_RUNS]
        )
    )
    trend = []
    for row in reversed(rows):
        try:
            metrics = json.loads(row.get("metrics_json") or "{}")
        except ValueError:
            metrics = {}
        trend.append(
            {
                "run_at": row.get("run_at"),
                "suite": row.get("suite"),
                "engine": row.get("engine"),
                "status": row.get("status"),
                "regressions": row.get("regressions"),
                "metrics": metrics if isinstance(metrics, dict) else {},
            }
        )
    return trend


def _guard_summary(ledger) -> dict[str, Any]:
    """Each guarded job's latest verdict, and the probe recall of the latest decisions (oldest first)."""
    decisions = guard_history.recent(ledger, limit=50)
    latest: dict[str, dict[str, Any]] = {}
    for decision in decisions:
        latest.setdefault(decision["job"], decision)
    verdicts = [
        {
            "job": job,
            "run_at": decision["run_at"],
            "verdict": decision["verdict"],
            "before": decision["figures"].get("before", {}),
            "after": decision["figures"].get("after", {}),
            "problems": decision["figures"].get("problems", []),
        }
        for job, decision in sorted(latest.items())
    ]
    trend = [
        {
            "run_at": d["run_at"],
            "job": d["job"],
            "verdict": d["verdict"],
            "after": d["figures"].get("after", {}),
        }
        for d in reversed(decisions[:EVAL_TREND_RUNS])
    ]
    return {"verdicts": verdicts, "trend": trend}


def _guard_lines(guard: dict[str, Any]) -> list[str]:
    if not guard.get("verdicts"):
        return ["no guarded run recorded yet"]
    lines = []
    for entry in guard["verdicts"]:
        figures = ", ".join(
            f"{name} {value:.3f} -> {entry['after'].get(name, 0):.3f}"
            for name, value in entry["before"].items()
        )
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


def _growth(
    settings: Settings, ledger, now: datetime, learned: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Row count per table now against the recorded count of a week ago (or the oldest since).

    With `learned` (a list), the lessons of the last `LEARNED_DAYS` days are added to it, read on the
    same connection."""
    problem = None
    try:
        connection = database.open_memory_db(settings.db_path, readonly=True)
        try:
            current = {
                table: count
                for table, count in database.row_counts(connection).items()
                if count is not None
            }
            if learned is not None:
                since = now.astimezone().replace(tzinfo=None) - timedelta(days=LEARNED_DAYS)
                learned.extend(learned_since(connection, since))
        finally:
            connection.close()
        source = "database"
    except DatabaseError as error:
        day, current = row_count_history.latest(ledger)
        source = f"recorded {day}" if day else "unavailable"
        problem = error.message
    week_ago_day: date = (now - timedelta(days=7)).date()
    baseline_day, baseline = row_count_history.counts_on_or_before(ledger, week_ago_day)
    tables = {}
    for table, count in current.items():
        before = baseline.get(table)
        tables[table] = {
            "now": count,
            "week_ago": before,
            "change": None if before is None else count - before,
        }
    return {"source": source, "baseline_day": baseline_day, "tables": tables, "problem": problem}


def _quarantine_summary(settings: Settings, start: datetime) -> dict[str, Any]:
    """Files staged in the period, and how many are in quarantine in all."""
    staged = [entry for entry in quarantine.list_entries(settings) if entry["status"] == "staged"]
    recent = [entry for entry in staged if (entry.get("staged_at") or "") >= isoformat(start)]
    return {
        "staged_in_period": len(recent),
        "bytes_in_period": sum(entry.get("size", 0) for entry in recent),
        "staged_total": len(staged),
    }


def _memory_blocks_summary(settings: Settings, ledger, start: datetime) -> dict[str, Any]:
    """Each block's size now (read fresh), and the entries memory-block-migrate moved in the period."""
    limits = block_limits(settings)
    sizes: dict[str, Any] = {}
    for name in BLOCK_NAMES:
        limit = limits.of(name)
        block = (
            None
            if settings.memory_blocks_dir.is_symlink()
            else read_block(settings.memory_blocks_dir / name, limit)
        )
        if isinstance(block, Block):
            sizes[name] = {
                "chars": block.chars,
                "limit": limit,
                "percent": round(100 * block.chars / limit, 1),
                "entries": len(block.entries),
            }
        else:
            sizes[name] = {
                "limit": limit,
                "unavailable": "missing" if block is None else block.code,
            }
    moved = [
        {key: row[key] for key in ("block", "preview", "chars", "moved_at", "memory_id")}
        for row in entry_history.moved_since(ledger, isoformat(start))
    ]
    return {"blocks": sizes, "moved": moved}


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


def build_report(
    settings: Settings,
    since: timedelta = timedelta(hours=24),
    current: JobResult | None = None,
    now: datetime | None = None,
) -> Report:
    """Build the report for the period `since` before now (read-only).

    `current` is a job result still in progress (nightly-selfcare passes its own), used instead of that
    job's last ledger row for the open warnings.
    """
    now = now or utc_now()
    start = now - since
    ledger = state.open_state_readonly(settings.state_db_path)
    try:
        runs = [
            {
                "job": run["job"],
                "status": run["status"],
                "started_at": run["started_at"],
                "duration_s": run["duration_s"],
                "warnings": run["warnings"],
                "error": run["error"],
            }
            for run in state.runs_since(ledger, start)
            if not run["dry_run"]
        ]
        warnings = _open_warnings(settings, ledger, current, now)
        from mnemo_ops.selfcare.audits.jobs import (
            overdue_jobs,  # the same rule as the jobs audit (with grace
        )

        overdue = [
            {
                "job": row["job"],
                "schedule": row["schedule"],
                "missed_slot": row["missed_slot"],
                "last_success": row["last_success"],
            }
            for row in overdue_jobs(settings, now)
        ]
        jobs = [
            {
                key: row[key]
                for key in (
                    "job",
                    "schedule",
                    "implemented",
                    "enabled",
                    "last_run",
                    "last_status",
                    "next_run",
                )
            }
            for row in job_table(settings)
        ]
        learned: list[dict[str, Any]] = []
        growth = _growth(settings, ledger, now, learned)
        if growth["problem"] and not any(w["code"] == "db-unreadable" for w in warnings):
            # The database itself is gone or broken: the first thing the user must see.
            warnings.insert(
                0,
                {
                    "job": "report",
                    "code": "db-unreadable",
                    "severity": "critical",
                    "message": growth["problem"],
                    "fix": "mnemo-ops doctor",
                },
            )
        return Report(
            generated_at=now,
            since=start,
            db=str(settings.db_path),
            runs=runs,
            jobs=jobs,
            overdue=overdue,
            warnings=warnings,
            backups=backup_status(settings, now),
            eval_trend=_eval_trend(ledger),
            growth=growth,
            quarantine=_quarantine_summary(settings, start),
            guard=_guard_summary(ledger),
            memory_blocks=_memory_blocks_summary(settings, ledger, start),
            learned=learned,
        )
    finally:
        if ledger is not None:
            ledger.close()


# ---------------------------------------------------------------------------------------------- rendering


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


def render_text(report: Report) -> str:
    """Plain text for a terminal or a chat message (no markup)."""
    lines = [
        f"mnemo-ops morning report, {report.generated_at:%Y-%m-%d %H:%M} UTC ({_period_label(report)})",
        _headline(report),
        f"database: {report.db}",
        "",
    ]
    counts = report.run_counts
    lines.append(f"Runs: {counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped")
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
    lines.append(f"Backups: {_backup_line(report.backups)}")
    lines.append(f"Quarantine: {_quarantine_line(report.quarantine)}")
    lines.append("Eval trend: " + "; ".join(_metric_summary(report.eval_trend)))
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
        f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped",
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
