"""Before against after: does the change keep recall within tolerance?

A change is refused when, on the probes whose answer is still live afterwards, recall@k or MRR@k
falls by more than its tolerance, or more probes than ``max_newly_failing`` were answered before and
are not now; the same holds for the user's eval suite. A probe whose own answer the job closed (a
forgetting stage archives it on purpose) is reported as forgotten, not as a regression: the rules
that archive decide those. A suite case is never excused that way: the user said it matters.

Each place the suite asks in (the same chat, a new conversation, another session:
``evaluation.asked``) is judged on its own: its recall, evidence received and answer received may
not fall by more than ``recall_tolerance``, and no more than ``max_newly_failing`` of its cases may
lose the evidence they received, so a change that helps one place cannot hide a loss in another.
Mnemosyne's own recall over every session (``measure.EverySession``) is judged the same way: a
change that keeps what the agent is given but loses what the database can give is refused too.

Probes are measured in two steps (``guard.first_sample``): a first sample spread over the set's
strata, then the rest only when the first sample does not settle the verdict
(`settled_by_sample`). The sample settles it when it proves a refusal that measuring more probes
cannot undo, or when it shows no sign of harm at all; anything in between measures every probe
and is judged as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mnemo_ops.evaluation.receives import cost_increase
from mnemo_ops.guard.measure import Measurement
from mnemo_ops.guard.probes import Probe
from mnemo_ops.settings.sections import GuardOptions


@dataclasses.dataclass
class Verdict:
    """The decision and everything a person needs to read it."""

    accepted: bool
    before: dict[str, float]
    after: dict[str, float]
    problems: list[str]
    newly_failing: list[Probe]
    forgotten: list[str]
    suite_before: dict[str, float] | None = None
    suite_after: dict[str, float] | None = None
    suite_newly_failing: list[str] = dataclasses.field(default_factory=list)
    cost: dict[str, Any] | None = None
    """The agent's per-turn recall cost before and after, and each unit's rise."""
    cost_problems: list[str] = dataclasses.field(default_factory=list)
    places_before: dict[str, dict[str, Any]] | None = None
    places_after: dict[str, dict[str, Any]] | None = None
    places_newly_failing: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """Per place: the cases that received their evidence before and do not now."""
    every_session: dict[str, Any] | None = None
    """Mnemosyne's own recall over every session, before and after, and the cases it lost."""

    @property
    def refused_for_cost_only(self) -> bool:
        """Refused, and only because the agent's recall would cost too much (recall itself held)."""
        return (
            not self.accepted and bool(self.cost_problems) and self.problems == self.cost_problems
        )

    def to_stats(self) -> dict[str, Any]:
        """The JSON form kept in the result's stats and the guard history."""
        data: dict[str, Any] = {
            "verdict": "ok" if self.accepted else "refused",
            "before": self.before,
            "after": self.after,
            "problems": self.problems,
            "newly_failing": [
                {"memory_id": probe.memory_id, "query": probe.query, "session": probe.session_id}
                for probe in self.newly_failing[:20]
            ],
            "newly_failing_count": len(self.newly_failing),
            "forgotten": len(self.forgotten),
        }
        if self.cost is not None:
            data["cost"] = self.cost
        if self.suite_before is not None:
            data["suite"] = {
                "before": self.suite_before,
                "after": self.suite_after,
                "newly_failing": self.suite_newly_failing[:20],
            }
            if self.places_before is not None:
                data["suite"]["places"] = {
                    "before": self.places_before,
                    "after": self.places_after,
                    "newly_failing": {
                        place: cases[:20] for place, cases in self.places_newly_failing.items()
                    },
                }
        if self.every_session is not None:
            data["every_session"] = self.every_session
        return data


def _subset_metrics(ranks: dict[str, int | None], keys: list[str], cutoff: int) -> dict[str, float]:
    subset = Measurement(profile="", cutoff=cutoff, ranks={key: ranks[key] for key in keys})
    return subset.metrics()


AGENT_PROFILES = ("hermes", "hermes-approximate")
"""Profiles that measure what the agent is given: a block of up to five lines, all in its prompt."""


def _drops(
    label: str,
    before: dict[str, float],
    after: dict[str, float],
    tolerances: GuardOptions,
    profile: str = "",
) -> list[str]:
    """Metrics that fell past their tolerance. With an agent profile only what is received is
    judged (recall): the plugin puts every injected line in the prompt at once, so a line moving
    from first to second place within the block changes nothing the agent is given (the rank
    metrics are still reported)."""
    problems = []
    for name, value in before.items():
        if profile in AGENT_PROFILES and not name.startswith("recall"):
            continue
        limit = (
            tolerances.recall_tolerance if name.startswith("recall") else tolerances.mrr_tolerance
        )
        now = after.get(name, 0.0)
        if value - now > limit + 1e-12:
            problems.append(
                f"{label} {name} fell from {value:.3f} to {now:.3f} (tolerance {limit})"
            )
    return problems


def _without_recall(probes: list[Probe], before: Measurement, after: Measurement) -> Verdict:
    """When Mnemosyne could not recall before or after the change.

    Unable before: the agent already gets nothing, so the change cannot make recall worse (it may
    be the repair). Able before and unable after: the change broke recall, and is refused.
    """
    problems = []
    if after.error and not before.error:
        problems.append(f"Mnemosyne cannot recall after the change: {after.error}")
    return Verdict(
        accepted=not problems,
        before={**before.metrics(), **({"error": before.error} if before.error else {})},
        after={**after.metrics(), **({"error": after.error} if after.error else {})},
        problems=problems,
        newly_failing=[p for p in probes if before.ranks.get(p.memory_id) and after.error],
        forgotten=[],
    )


def decide(
    probes: list[Probe],
    before: Measurement,
    after: Measurement,
    live_after: set[str],
    tolerances: GuardOptions,
) -> Verdict:
    """Compare `before` with `after` (see the module docstring); `live_after` holds the memory ids
    still live in the database after the change."""
    if before.error or after.error:
        return _without_recall(probes, before, after)
    forgotten = [probe.memory_id for probe in probes if probe.memory_id not in live_after]
    kept = [probe for probe in probes if probe.memory_id in live_after]
    keys = [probe.memory_id for probe in kept]
    before_metrics = _subset_metrics(before.ranks, keys, before.cutoff)
    after_metrics = _subset_metrics(after.ranks, keys, after.cutoff)
    newly_failing = [
        probe
        for probe in kept
        if before.ranks[probe.memory_id] and not after.ranks[probe.memory_id]
    ]
    problems = _drops("probe", before_metrics, after_metrics, tolerances, before.profile)
    if len(newly_failing) > tolerances.max_newly_failing:
        problems.append(
            f"{len(newly_failing)} probes answered before are not now "
            f"(at most {tolerances.max_newly_failing} allowed)"
        )
    verdict = Verdict(
        accepted=True,
        before=before_metrics,
        after=after_metrics,
        problems=problems,
        newly_failing=newly_failing,
        forgotten=forgotten,
    )
    if before.suite is not None and after.suite is not None:
        verdict.suite_before = before.suite.metrics
        verdict.suite_after = after.suite.metrics
        was = {outcome.case.id for outcome in before.suite.outcomes if outcome.score.passed}
        now = {outcome.case.id for outcome in after.suite.outcomes if outcome.score.passed}
        verdict.suite_newly_failing = sorted(was - now)
        problems += _drops(
            "eval suite", before.suite.metrics, after.suite.metrics, tolerances, before.profile
        )
        if len(verdict.suite_newly_failing) > tolerances.max_newly_failing:
            problems.append(
                f"{len(verdict.suite_newly_failing)} eval cases passed before and fail now "
                f"(at most {tolerances.max_newly_failing} allowed)"
            )
        problems += _place_problems(before.suite, after.suite, tolerances, verdict)
    problems += _every_session_problems(before, after, keys, tolerances, verdict)
    verdict.cost_problems = _cost_problems(before, after, tolerances, verdict)
    problems += verdict.cost_problems
    verdict.accepted = not problems
    return verdict


PLACE_PREFIX = "eval suite, place"
EVERY_SESSION_PREFIX = "recall over every session"


def _fallen(
    label: str, before: dict[str, Any], after: dict[str, Any], names: list[str], limit: float
) -> list[str]:
    """The figures of `names` that fell from `before` to `after` by more than `limit` (a figure
    that is None on either side, e.g. no case has an answer, is not judged)."""
    problems = []
    for name in names:
        old, new = before.get(name), after.get(name)
        if old is None or new is None:
            continue
        if old - new > limit + 1e-12:
            problems.append(f"{label} {name} fell from {old:.3f} to {new:.3f} (tolerance {limit})")
    return problems


def _received_cases(evaluation) -> dict[str, set[str]]:
    """Place -> the cases whose evidence the agent received there."""
    found: dict[str, set[str]] = {}
    for outcome in evaluation.outcomes:
        if outcome.received is not None and outcome.received.evidence:
            found.setdefault(outcome.received.place, set()).add(outcome.case.id)
    return found


def _place_problems(
    before_suite, after_suite, tolerances: GuardOptions, verdict: Verdict
) -> list[str]:
    """Each place the suite asks in, judged on its own (see the module docstring)."""
    if before_suite.places is None or after_suite.places is None:
        return []
    verdict.places_before, verdict.places_after = before_suite.places, after_suite.places
    problems = []
    recall = metric_name(before_suite)
    for place, figures in before_suite.places.items():
        now = after_suite.places.get(place, {})
        problems += _fallen(
            f"{PLACE_PREFIX} {place}:",
            figures,
            now,
            [recall, "evidence_received", "answer_received"],
            tolerances.recall_tolerance,
        )
    was, now_found = _received_cases(before_suite), _received_cases(after_suite)
    for place, cases in was.items():
        lost = sorted(cases - now_found.get(place, set()))
        if lost:
            verdict.places_newly_failing[place] = lost
        if len(lost) > tolerances.max_newly_failing:
            problems.append(
                f"{PLACE_PREFIX} {place}: {len(lost)} cases received their evidence before and "
                f"do not now (at most {tolerances.max_newly_failing} allowed)"
            )
    return problems


def metric_name(evaluation) -> str:
    """The suite's ``recall@k`` name."""
    return f"recall@{evaluation.k}"


def _every_session_problems(
    before: Measurement, after: Measurement, keys: list[str], tolerances: GuardOptions, verdict
) -> list[str]:
    """Mnemosyne's own recall over every session may not fall: the probes still live by more than
    ``recall_tolerance``, the suite by more than ``max_newly_failing`` cases found before and not
    after. The suite is judged by its cases, not its averages: over every session its rows compete
    with every chat's, and a night's summaries may move one case past the cut while the agent's
    places keep it; the places hold the stricter rule."""
    first, second = before.every_session, after.every_session
    if first is None or second is None:
        return []
    problems = []
    if second.error and not first.error:
        problems.append(f"{EVERY_SESSION_PREFIX}: Mnemosyne cannot recall: {second.error}")
    measured = [key for key in keys if key in first.ranks and key in second.ranks]
    old, new = first.metrics(measured), second.metrics(measured)
    lost = sorted(first.found_cases() - second.found_cases())
    verdict.every_session = {"before": old, "after": new, "newly_failing": lost[:20]}
    probe_figures = [name for name in old if name.startswith("probe ")]
    problems += _fallen(
        f"{EVERY_SESSION_PREFIX}:", old, new, probe_figures, tolerances.recall_tolerance
    )
    if len(lost) > tolerances.max_newly_failing:
        problems.append(
            f"{EVERY_SESSION_PREFIX}: {len(lost)} eval cases were found before and are not now "
            f"(at most {tolerances.max_newly_failing} allowed)"
        )
    return problems


def _cost_problems(
    before: Measurement, after: Measurement, tolerances: GuardOptions, verdict: Verdict
) -> list[str]:
    """The cost rule: the agent's per-turn recall may not cost more than ``max_cost_increase`` more.

    Counted in SQLite VM steps and Python calls on the same probes before and after (units that
    do not follow the machine's load); wall and CPU time are reported beside them, never judged.
    A rise under the unit's floor (``cost_floor_*``) is not judged: on a small home any new memory
    adds a share of a cost that is a fraction of a millisecond.
    """
    floors = {
        "sqlite_steps": tolerances.cost_floor_sqlite_steps,
        "python_calls": tolerances.cost_floor_python_calls,
    }
    if before.receives is None or after.receives is None or not before.receives.cost_turns:
        return []
    rises = cost_increase(before.receives, after.receives)
    verdict.cost = {
        "before": before.receives.cost,
        "after": after.receives.cost,
        "increase": {name: round(rise, 4) for name, rise in rises.items()},
        "limit": tolerances.max_cost_increase,
        "floors": floors,
    }
    problems = []
    for name, rise in rises.items():
        added = after.receives.cost[name] - before.receives.cost[name]
        if rise > tolerances.max_cost_increase + 1e-12 and added > floors[name]:
            problems.append(
                f"the agent's recall costs {rise:.0%} more {name.replace('_', ' ')} per turn "
                f"({before.receives.cost[name]:.0f} -> {after.receives.cost[name]:.0f}; "
                f"at most {tolerances.max_cost_increase:.0%} allowed)"
            )
    return problems


@dataclasses.dataclass(frozen=True)
class Settled:
    """Whether a first sample's verdict stands for the whole probe set, and why."""

    settled: bool
    reason: str


def settled_by_sample(
    verdict: Verdict,
    sampled: int,
    total: int,
    cost_turns: int,
    tolerances: GuardOptions,
    profile: str = "",
) -> Settled:
    """Does the verdict on the first `sampled` of `total` probes stand for all of them?

    - Every probe measured: yes.
    - A refusal the rest cannot undo: Mnemosyne cannot recall after the change; more sampled
      probes broke than ``max_newly_failing`` allows (they stay broken in the whole set); the eval
      suite (always measured whole) fell, in any place; recall over every session fell (measured
      on the first sample and the whole suite only); the cost rule, when the sample held every turn the whole
      measurement counts (`cost_turns`: the cost is counted on the first probes only).
    - An acceptance with no sign of harm: no sampled probe broke, no judged metric (with an agent
      profile, only recall: see `_drops`) fell at all,
      and every cost unit rose by at most half its limit (or by less than its floor).
    - Anything else (a probe broke, a metric moved down, a cost near its limit): no.
    """
    if sampled >= total:
        return Settled(True, "every probe measured")
    if not verdict.accepted:
        if any(problem.startswith("Mnemosyne cannot recall") for problem in verdict.problems):
            return Settled(True, "Mnemosyne cannot recall after the change")
        if len(verdict.newly_failing) > tolerances.max_newly_failing:
            return Settled(True, f"{len(verdict.newly_failing)} sampled probes broke")
        if any(
            problem.startswith(("eval suite", EVERY_SESSION_PREFIX)) for problem in verdict.problems
        ) or (
            verdict.suite_newly_failing
            and len(verdict.suite_newly_failing) > tolerances.max_newly_failing
        ):
            return Settled(True, "the eval suite fell")
        if verdict.cost_problems and sampled >= cost_turns:
            return Settled(True, "the cost rule, on every turn it counts")
        return Settled(False, "the sample was refused: measuring every probe")
    if verdict.newly_failing:
        return Settled(False, "a sampled probe broke: measuring every probe")
    fallen = [
        name
        for name, value in verdict.before.items()
        if verdict.after.get(name, 0.0) < value
        and (profile not in AGENT_PROFILES or name.startswith("recall"))
    ]
    if fallen:
        return Settled(False, f"{', '.join(fallen)} fell on the sample: measuring every probe")
    if verdict.cost is not None:
        for name, rise in verdict.cost["increase"].items():
            added = verdict.cost["after"][name] - verdict.cost["before"][name]
            if rise > tolerances.max_cost_increase / 2 and added > verdict.cost["floors"][name]:
                return Settled(False, f"{name} rose near its limit: measuring every probe")
    return Settled(True, "no sign of harm on the sample")
