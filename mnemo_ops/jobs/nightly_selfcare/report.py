"""The morning report: what ran, what is overdue, what needs a human (with the command that fixes it),
backups, the eval trend and the week's largest category of eval misses, and memory growth, built
here as one `Report` object (``jobs/nightly_selfcare/report_render`` renders it as text, markdown or JSON and
writes the day's file).

A job's warning is open from the run that raised it until a later ok run of the same job no
longer raises it; from then on it is resolved, listed once (with when and by which run) in the
period it was resolved in, and it no longer counts towards the headline or the exit code.
The findings that depend on the clock (overdue and failing jobs, backup freshness) are recomputed now,
replacing the ones the last nightly-selfcare run recorded, so the report is never stale about them.
Everything here is read-only.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo_ops import database
from mnemo_ops.core import state
from mnemo_ops.core.results import JobResult, Severity, severity_rank
from mnemo_ops.foundation.clock import isoformat, utc_now
from mnemo_ops.foundation.errors import DatabaseError, UsageError
from mnemo_ops.guard import history as guard_history
from mnemo_ops.jobs.nightly_selfcare import quarantine, row_count_history
from mnemo_ops.jobs.nightly_selfcare.audits import code_prefixes, run_audit
from mnemo_ops.jobs.nightly_selfcare.audits.backups import backup_status
from mnemo_ops.jobs.self_reflection.learned import learned_since
from mnemo_ops.memory_blocks import entry_history
from mnemo_ops.memory_blocks.blocks import BLOCK_NAMES, Block, read_block
from mnemo_ops.memory_blocks.limits import block_limits
from mnemo_ops.scheduling.job_table import job_table
from mnemo_ops.settings import Settings

LIVE_AUDITS = ("jobs", "backups")
"""Audits re-run for every report: their findings change with the clock alone."""
EVAL_TREND_RUNS = 7
EVAL_MISSES_DAYS = 7
"""The week whose eval misses the report sums per category (``eval_misses``)."""
EXPLAIN_COMMAND = "mnemo-ops eval explain --only misses"
"""Where the report sends the reader to learn why the cases were missed."""
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
    eval_misses: dict[str, Any] = dataclasses.field(default_factory=dict)
    resolved: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Warnings a later run (or the fresh check) no longer raises, resolved in the period: shown
    once, never counted towards the headline or the exit code."""

    @property
    def run_counts(self) -> dict[str, int]:
        """Runs in the period by status (ok, failed, skipped, interrupted)."""
        counts = {"ok": 0, "failed": 0, "skipped": 0, "interrupted": 0}
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
            "resolved": self.resolved,
            "backups": self.backups,
            "eval_trend": self.eval_trend,
            "eval_misses": self.eval_misses,
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


def _completed_runs(ledger, start: datetime) -> list[dict[str, Any]]:
    """The completed (ok, failed or interrupted) real runs that decide each job's warnings now,
    oldest first.

    For each job: from its latest ok run that started before `start` (everything before it is
    settled by it: what it raised is open, what it did not is not), or from its first run when it
    never succeeded before the period, to its latest run. Skipped runs did no work and count for
    nothing. An interrupted run raises ``run-interrupted``, open until a later ok run.
    """
    if ledger is None or "runs" not in ledger.table_names():
        return []
    rows = ledger.query(
        "SELECT id, job, status, started_at, finished_at, result_json FROM runs AS run "
        "WHERE dry_run = 0 AND status IN ('ok', 'failed', 'interrupted') AND id >= coalesce(("
        "SELECT max(id) FROM runs AS settled WHERE settled.job = run.job "
        "AND settled.dry_run = 0 AND settled.status = 'ok' AND settled.started_at < ?), 0) "
        "ORDER BY id",
        [isoformat(start)],
    )
    runs = []
    for row in rows:
        try:
            result = json.loads(row["result_json"] or "{}")
        except ValueError:
            result = {}
        runs.append({**row, "warnings": (result or {}).get("warnings") or []})
    return runs


def _warnings_by_code(warnings: list[Any]) -> dict[str, list[dict[str, Any]]]:
    by_code: dict[str, list[dict[str, Any]]] = {}
    for warning in warnings:
        if not isinstance(warning, dict) or warning.get("severity") not in set(Severity):
            continue
        by_code.setdefault(str(warning.get("code", "")), []).append(warning)
    return by_code


def _warning_states(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each (job, code) the runs raised: open (the warnings of the latest run that raised it) or
    resolved (when a later successful run of that job no longer raised it, and by which run).

    Only an ok run resolves: a failed or interrupted run may have stopped before the check that
    raised the code, so its silence says nothing.
    """
    states: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        raised = _warnings_by_code(run["warnings"])
        for code, warnings in raised.items():
            states[(run["job"], code)] = {
                "status": "open",
                "warnings": warnings,
                "raised_at": run["started_at"],
            }
        if run["status"] != "ok":
            continue
        for (job, code), entry in states.items():
            if job == run["job"] and code not in raised and entry["status"] == "open":
                entry.update(
                    status="resolved",
                    resolved_at=run["finished_at"] or run["started_at"],
                    resolved_by=f"{job} run at {run['started_at']}",
                )
    return states


def _resolved_entry(job: str, code: str, entry: dict[str, Any]) -> dict[str, Any]:
    last = entry["warnings"][-1]
    return {
        "job": job,
        "code": code,
        "severity": last["severity"],
        "message": last.get("message"),
        "raised_at": entry["raised_at"],
        "resolved_at": entry["resolved_at"],
        "resolved_by": entry["resolved_by"],
    }


def _open_and_resolved_warnings(
    settings: Settings, ledger, current: JobResult | None, now: datetime, start: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The open warnings (the current state) and those resolved in the period.

    A job's warning code is open from the run that raised it until a later ok run of that job
    no longer raises it; then it is resolved, shown once with when and by which run, and no
    longer counts towards the headline or the exit code. The audits that depend on the clock
    (`LIVE_AUDITS`) are run again now: their codes recorded by an older run are replaced by the
    fresh findings, and one the fresh check no longer finds is resolved now.
    """
    runs = _completed_runs(ledger, start)
    if current is not None:
        runs.append(
            {
                "job": current.job,
                "status": "failed" if current.status == "failed" else "ok",
                "started_at": isoformat(current.started_at),
                "finished_at": isoformat(current.finished_at or now),
                "warnings": [warning.to_dict() for warning in current.warnings],
            }
        )
    states = _warning_states(runs)
    live_prefixes = tuple(prefix for name in LIVE_AUDITS for prefix in code_prefixes(name))
    fresh = [
        {"job": "report", **warning.to_dict(), "fix": warning.fix}
        for name in LIVE_AUDITS
        for warning in run_audit(name, settings, now).warnings
    ]
    fresh_codes = {warning["code"] for warning in fresh}
    warnings, resolved, seen = [], [], set()
    for (job, code), entry in sorted(states.items()):
        live = code.startswith(live_prefixes)
        if entry["status"] == "open" and live and code not in fresh_codes:
            # Recorded by an older run, gone now: the fresh check is what resolved it.
            entry.update(status="resolved", resolved_at=isoformat(now), resolved_by="checked now")
        if entry["status"] == "resolved":
            if entry["resolved_at"] >= isoformat(start):
                resolved.append(_resolved_entry(job, code, entry))
            continue
        if live:
            continue  # the fresh findings stand for it
        for warning in entry["warnings"]:
            key = (code, warning.get("message"))
            if key not in seen:
                seen.add(key)
                warnings.append(
                    {
                        "job": job,
                        "code": code,
                        "severity": warning["severity"],
                        "message": warning.get("message"),
                        "fix": warning.get("fix"),
                    }
                )
    warnings += fresh
    warnings.sort(key=lambda w: (-severity_rank(w["severity"]), w["job"], w["code"] or ""))
    resolved.sort(key=lambda entry: (entry["resolved_at"], entry["job"], entry["code"]))
    return warnings, resolved


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


def _eval_misses(settings: Settings, ledger, now: datetime) -> dict[str, Any]:
    """The week's eval misses per category, summed over the runs of the latest run's suite, and
    the largest category; {} when no run of the week recorded its misses.

    Why those cases were missed is left to ``mnemo-ops eval explain`` (several recalls a case,
    too many for every night): the report names the category and the command.
    """
    if ledger is None or "eval_history" not in ledger.table_names():
        return {}
    if "misses_json" not in ledger["eval_history"].columns_dict:
        return {}
    since = isoformat(now - timedelta(days=EVAL_MISSES_DAYS))
    rows = list(
        ledger.query(
            "SELECT suite, run_at, misses_json FROM eval_history WHERE run_at >= ? "
            "AND misses_json IS NOT NULL AND misses_json != '{}' ORDER BY run_at DESC, id DESC",
            [since],
        )
    )
    if not rows:
        return {}
    suite = rows[0]["suite"]
    runs = []
    for row in rows:
        if row["suite"] != suite:
            continue
        try:
            misses = json.loads(row["misses_json"])
        except ValueError:
            continue
        if isinstance(misses, dict):
            runs.append(misses)
    categories: dict[str, dict[str, Any]] = {}
    for number, misses in enumerate(runs):
        for category, figures in misses.items():
            if not isinstance(figures, dict):
                continue
            entry = categories.setdefault(
                category,
                {"runs": 0, "missed": 0, "latest_missed": None, "cases": None, "examples": []},
            )
            entry["runs"] += 1
            entry["missed"] += int(figures.get("missed") or 0)
            if number == 0:  # the newest run first
                entry["latest_missed"] = int(figures.get("missed") or 0)
                entry["cases"] = int(figures.get("cases") or 0)
                entry["examples"] = list(figures.get("examples") or [])[:3]
    for entry in categories.values():
        entry["missed_per_run"] = round(entry["missed"] / entry["runs"], 2) if entry["runs"] else 0
    missed = {name: entry for name, entry in categories.items() if entry["missed"]}
    largest = (
        max(missed, key=lambda name: (missed[name]["missed"], missed[name]["latest_missed"] or 0))
        if missed
        else None
    )
    configured = settings.retrieval_eval.suite
    default = settings.state_dir / "eval" / "suite.jsonl"
    chosen = str(Path(configured).expanduser().absolute()) if configured else str(default)
    command = EXPLAIN_COMMAND if suite == chosen else f"{EXPLAIN_COMMAND} --suite {suite}"
    return {
        "days": EVAL_MISSES_DAYS,
        "suite": suite,
        "runs": len(runs),
        "categories": dict(sorted(categories.items())),
        "largest": {"category": largest, **missed[largest]} if largest else None,
        "explain": command,
    }


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
            "unchanged": bool(decision["figures"].get("unchanged")),
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
        warnings, resolved = _open_and_resolved_warnings(settings, ledger, current, now, start)
        from mnemo_ops.jobs.nightly_selfcare.audits.jobs import overdue_jobs

        table = job_table(settings)
        overdue = [
            {
                "job": row["job"],
                "schedule": row["schedule"],
                "missed_slot": row["missed_slot"],
                "last_success": row["last_success"],
            }
            for row in overdue_jobs(settings, now, table)
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
                    "scheduled",
                )
            }
            for row in table
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
            resolved=resolved,
            backups=backup_status(settings, now),
            eval_trend=_eval_trend(ledger),
            eval_misses=_eval_misses(settings, ledger, now),
            growth=growth,
            quarantine=_quarantine_summary(settings, start),
            guard=_guard_summary(ledger),
            memory_blocks=_memory_blocks_summary(settings, ledger, start),
            learned=learned,
        )
    finally:
        if ledger is not None:
            ledger.close()
